/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "add_rmsnorm_rows"
grid = "rows"
block = "BLOCK"
args = ["x", "residual", "weight", "h", "y", "cols", "eps"]
@*/
#include <cuda_bf16.h>

// One block per row. Pass one writes h (rounded once to bfloat16) and sums the squares of the float32 sums;
// pass two reads h back and writes y, so y normalises exactly the h the next layer sees.
extern "C" __global__ void add_rmsnorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
                                            const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ h,
                                            __nv_bfloat16* __restrict__ y, int cols, float eps) {
    __shared__ float red[BLOCK];
    const long long base = (long long)blockIdx.x * cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float s = __bfloat162float(x[base + c]) + __bfloat162float(residual[base + c]);
        __nv_bfloat16 r = __float2bfloat16_rn(s);
        h[base + c] = r;
        float v = __bfloat162float(r);
        q += v * v;
    }
    red[threadIdx.x] = q;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float inv = 1.0f / sqrtf(red[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        y[base + c] = __float2bfloat16_rn(__bfloat162float(h[base + c]) * inv * __bfloat162float(weight[c]));
    }
}
