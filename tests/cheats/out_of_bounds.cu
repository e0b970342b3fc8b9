/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Correct values, but the last block also writes 64 elements past the end of c.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x < 64) c[n + threadIdx.x] = 0.0f;
}
