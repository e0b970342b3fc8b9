/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "row_sum"
grid = "rows"
block = "BLOCK"
args = ["x", "y", "rows", "cols"]
@*/
// One block per row: each thread sums a strided slice of the row, then a shared-memory tree
// (BLOCK must be a power of two).
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float red[BLOCK];
    const float* row = x + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = red[0];
}
