/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Fast and wrong: NaN everywhere.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __int_as_float(0x7fc00000);
}
