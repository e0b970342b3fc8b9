/*@kernelwright
[knobs]
BLOCK = [256, 32, 64, 128, 512, 1024]
VEC = [4, 1, 2, 8]

[[launch]]
kernel = "row_sum_vec"
grid = "rows"
block = "BLOCK"
args = ["x", "y", "rows", "cols"]
@*/
// Row sums for tuning benchmarks: one block per row; each thread reads VEC consecutive floats per step
// (float2 or float4 loads, two float4 for 8) where every row starts aligned to them (cols % VEC == 0, the
// buffer itself being 256-byte aligned), else one float at a time; then a warp-shuffle reduction and one
// across the block's warps. A thread's chain is at most cols / (BLOCK * VEC) steps of a VEC-wide tree.
#define NWARPS (BLOCK / 32)

template <int V> struct Step;
template <> struct Step<1> {
    __device__ static float sum(const float* p) { return p[0]; }
};
template <> struct Step<2> {
    __device__ static float sum(const float* p) {
        float2 v = *reinterpret_cast<const float2*>(p);
        return v.x + v.y;
    }
};
template <> struct Step<4> {
    __device__ static float sum(const float* p) {
        float4 v = *reinterpret_cast<const float4*>(p);
        return (v.x + v.y) + (v.z + v.w);
    }
};
template <> struct Step<8> {
    __device__ static float sum(const float* p) {
        float4 a = *reinterpret_cast<const float4*>(p);
        float4 b = *reinterpret_cast<const float4*>(p + 4);
        return ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));
    }
};

extern "C" __global__ void __launch_bounds__(BLOCK)
row_sum_vec(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
    const float* row = x + (long long)blockIdx.x * cols;
    float s = 0.0f;
    if (cols % VEC == 0) {
        for (int c = threadIdx.x * VEC; c < cols; c += BLOCK * VEC) s += Step<VEC>::sum(row + c);
    } else {
        for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    __shared__ float part[NWARPS];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < NWARPS ? part[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) y[blockIdx.x] = s;
    }
}
