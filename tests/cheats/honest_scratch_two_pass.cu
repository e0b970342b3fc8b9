/*@kernelwright
[[scratch]]
name = "stats"
dtype = "float32"
size = "2 * rows"
init = "poison"

[[launch]]
kernel = "row_stats"
grid = "rows"
block = "256"
args = ["x", "stats", "rows", "cols", "eps"]

[[launch]]
kernel = "normalize"
grid = ["rows", "ceil_div(cols, 256)"]
block = "256"
args = ["x", "gamma", "beta", "stats", "y", "rows", "cols"]
@*/
// Not a cheat: a two-launch LayerNorm through a scratch buffer. The first launch writes each row's mean
// and 1 / sqrt(variance + eps) (two passes over the row); the second normalizes every element.
__device__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float total = red[0];
    __syncthreads();
    return total;
}

extern "C" __global__ void row_stats(const float* __restrict__ x, float* __restrict__ stats, int rows, int cols,
                                     float eps) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) s += row[c];
    float mean = block_sum(s, red) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) {
        float d = row[c] - mean;
        q += d * d;
    }
    float rstd = 1.0f / sqrtf(block_sum(q, red) / cols + eps);
    if (threadIdx.x == 0) {
        stats[2 * blockIdx.x] = mean;
        stats[2 * blockIdx.x + 1] = rstd;
    }
}

extern "C" __global__ void normalize(const float* __restrict__ x, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, const float* __restrict__ stats,
                                     float* __restrict__ y, int rows, int cols) {
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    long long i = (long long)blockIdx.x * cols + c;
    float mean = stats[2 * blockIdx.x], rstd = stats[2 * blockIdx.x + 1];
    y[i] = (x[i] - mean) * rstd * gamma[c] + beta[c];
}
