/*@kernelwright
[knobs]
THREADS = [256, 128, 512, 1024]
VEC = [4, 1, 2]
ONLINE = [1, 0]
UNROLL = [1, 2, 4]
WARP_PER_ROW = [0, 1]

[[launch]]
kernel = "softmax_tuned"
grid = "ceil_div(rows, WARP_PER_ROW * (THREADS / 32 - 1) + 1)"
block = "THREADS"
args = ["x", "y", "rows", "cols"]
@*/
// Row-wise softmax with the usual tuning choices exposed as knobs, for tuning benchmarks:
//   WARP_PER_ROW  0: a block owns a row (warp shuffles, then one shared-memory step across warps);
//                 1: each warp owns a row, THREADS / 32 rows per block, no block synchronization;
//   ONLINE        1: one pass computes the running maximum and the rescaled sum together, then a
//                 second pass writes (two reads of x); 0: separate max, sum and write passes (three);
//   VEC           float, float2 or float4 loads and stores, used when cols % VEC == 0 (rows then
//                 start aligned, as the buffers are 256-byte aligned); otherwise scalar;
//   UNROLL        unroll factor of the element loops.
#define NWARPS (THREADS / 32)
#define NEG_INF __int_as_float(0xff800000)
#define STR_(x) #x
#define STR(x) STR_(x)
#define UNROLLED _Pragma(STR(unroll UNROLL))

template <int V> struct VecOf;
template <> struct VecOf<1> { typedef float T; };
template <> struct VecOf<2> { typedef float2 T; };
template <> struct VecOf<4> { typedef float4 T; };

__device__ __forceinline__ void unpack(float v, float* o) { o[0] = v; }
__device__ __forceinline__ void unpack(float2 v, float* o) { o[0] = v.x; o[1] = v.y; }
__device__ __forceinline__ void unpack(float4 v, float* o) { o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w; }
__device__ __forceinline__ void pack(const float* o, float* v) { *v = o[0]; }
__device__ __forceinline__ void pack(const float* o, float2* v) { *v = make_float2(o[0], o[1]); }
__device__ __forceinline__ void pack(const float* o, float4* v) { *v = make_float4(o[0], o[1], o[2], o[3]); }

// (m, s) pairs: s is a sum of exp(x - m). Merging rescales the side with the smaller maximum; an
// empty side (m = -inf, s = 0) contributes nothing (and never computes exp(-inf - -inf)).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    float a = (m == NEG_INF) ? 0.0f : s * expf(m - mn);
    float b = (m2 == NEG_INF) ? 0.0f : s2 * expf(m2 - mn);
    m = mn;
    s = a + b;
}

__device__ __forceinline__ void add_online(float& m, float& s, float x) {
    if (x > m) { s = s * expf(m - x) + 1.0f; m = x; }
    else s += expf(x - m);
}

__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ void warp_pair(float& m, float& s) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
}

// Group-wide reductions: the warp's result in warp mode; across the block's warps in block mode.
__device__ __forceinline__ float group_max(float v, float* sm) {
    v = warp_max(v);
    if (WARP_PER_ROW) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sm[warp] = v;
    __syncthreads();
    v = warp_max(lane < NWARPS ? sm[lane] : NEG_INF);
    __syncthreads();  // sm is reused by the next reduction
    return v;
}
__device__ __forceinline__ float group_sum(float v, float* sm) {
    v = warp_sum(v);
    if (WARP_PER_ROW) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sm[warp] = v;
    __syncthreads();
    v = warp_sum(lane < NWARPS ? sm[lane] : 0.0f);
    __syncthreads();
    return v;
}
__device__ __forceinline__ void group_pair(float& m, float& s, float* sm) {
    warp_pair(m, s);
    if (WARP_PER_ROW) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sm[warp] = m; sm[32 + warp] = s; }
    __syncthreads();
    m = lane < NWARPS ? sm[lane] : NEG_INF;
    s = lane < NWARPS ? sm[32 + lane] : 0.0f;
    warp_pair(m, s);
    __syncthreads();
}

// The row's elements as V-wide vectors: this thread visits vectors lane, lane + size, ...
template <int V>
__device__ __forceinline__ void row_softmax(const float* __restrict__ row, float* __restrict__ out, int n,
                                            int lane, int size, float* sm) {
    typedef typename VecOf<V>::T T;
    const T* xv = reinterpret_cast<const T*>(row);
    T* yv = reinterpret_cast<T*>(out);
    float e[V];
    float m = NEG_INF, s = 0.0f;
    if (ONLINE) {
        UNROLLED
        for (int i = lane; i < n; i += size) {
            unpack(xv[i], e);
            #pragma unroll
            for (int k = 0; k < V; ++k) add_online(m, s, e[k]);
        }
        group_pair(m, s, sm);
    } else {
        UNROLLED
        for (int i = lane; i < n; i += size) {
            unpack(xv[i], e);
            #pragma unroll
            for (int k = 0; k < V; ++k) m = fmaxf(m, e[k]);
        }
        m = group_max(m, sm);
        UNROLLED
        for (int i = lane; i < n; i += size) {
            unpack(xv[i], e);
            #pragma unroll
            for (int k = 0; k < V; ++k) s += expf(e[k] - m);
        }
        s = group_sum(s, sm);
    }
    const float inv = 1.0f / s;
    UNROLLED
    for (int i = lane; i < n; i += size) {
        unpack(xv[i], e);
        #pragma unroll
        for (int k = 0; k < V; ++k) e[k] = expf(e[k] - m) * inv;
        T v;
        pack(e, &v);
        yv[i] = v;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_tuned(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be a multiple of 32, at most 1024");
    __shared__ float sm[64];
    long long row;
    int lane, size;
    if (WARP_PER_ROW) {
        row = (long long)blockIdx.x * NWARPS + (threadIdx.x >> 5);
        if (row >= rows) return;  // whole warps leave; warp mode never synchronizes the block
        lane = threadIdx.x & 31;
        size = 32;
    } else {
        row = blockIdx.x;
        lane = threadIdx.x;
        size = THREADS;
    }
    const float* r = x + row * cols;
    float* o = y + row * cols;
    if (VEC > 1 && cols % VEC == 0) row_softmax<VEC>(r, o, cols / VEC, lane, size, sm);
    else row_softmax<1>(r, o, cols, lane, size, sm);
}
