/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Stages values in shared memory and reads a neighbour's slot with no barrier: a race.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = (i < n) ? a[i] : 0.0f;
    int j = (threadIdx.x + 32) & 255;
    int p = blockIdx.x * blockDim.x + j;
    float partner = (p < n) ? a[p] : 0.0f;
    // With a __syncthreads() before this read, s[j] == partner and the sum is exact.
    if (i < n) c[i] = a[i] + b[i] + (s[j] - partner);
}
