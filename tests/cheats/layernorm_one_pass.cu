/*@kernelwright
[[launch]]
kernel = "layernorm_one_pass"
grid = "rows"
block = "256"
args = ["x", "gamma", "beta", "y", "rows", "cols", "eps"]
@*/
// LayerNorm with the variance as E[x^2] - E[x]^2 from one pass of sums in float32: accurate when the
// mean is small next to the spread, catastrophically cancelling when a large common offset dominates.
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

extern "C" __global__ void layernorm_one_pass(const float* __restrict__ x, const float* __restrict__ gamma,
                                              const float* __restrict__ beta, float* __restrict__ y,
                                              int rows, int cols, float eps) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float s = 0.0f, q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) {
        float v = row[c];
        s += v;
        q += v * v;
    }
    float mean = block_sum(s, red) / cols;
    float var = fmaxf(block_sum(q, red) / cols - mean * mean, 0.0f);
    float rstd = 1.0f / sqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += 256) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}
