/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
shared = "1024 * 1024"
args = ["a", "b", "c", "n"]
@*/
// Asks for 1 MiB of dynamic shared memory: the launch must fail, not run.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
