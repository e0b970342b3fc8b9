/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "layernorm_rows"
grid = "rows"
block = "BLOCK"
args = ["x", "gamma", "beta", "y", "rows", "cols", "eps"]
@*/
// One block per row, three passes over the row: mean, variance around the mean, normalized write.
// Block-wide sums go through a shared-memory tree (BLOCK must be a power of two).
__device__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float total = red[0];
    __syncthreads();
    return total;
}

extern "C" __global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* __restrict__ y,
                                          int rows, int cols, float eps) {
    __shared__ float red[BLOCK];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];
    float mean = block_sum(s, red) / cols;

    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float d = row[c] - mean;
        q += d * d;
    }
    float rstd = 1.0f / sqrtf(block_sum(q, red) / cols + eps);

    for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}
