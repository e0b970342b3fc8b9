/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Correct output, then zeroes an input so a reference computed afterwards would match zeros.
extern "C" __global__ void k(float* a, float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i]; a[i] = 0.0f; }
}
