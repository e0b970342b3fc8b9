/*@kernelwright
[knobs]
BLOCK = [256, 512, 1024, 128]
BLOCKS = [1056, 528, 2112, 4224]
COPIES = [1, 2, 4, 8]
VEC = [1, 4]

[[launch]]
kernel = "zero_bins"
grid = "1"
block = "256"
args = ["hist"]

[[launch]]
kernel = "histogram_tuned"
grid = "min(ceil_div(n, BLOCK * VEC), BLOCKS)"
block = "BLOCK"
args = ["x", "hist", "n"]
@*/
// Privatized histogram with its tuning choices exposed as knobs, for tuning benchmarks: each block
// keeps COPIES sub-histograms in shared memory (warp w counts into copy w % COPIES, so fewer warps
// contend for one bin's counter), reads x as int (VEC 1) or int4 (VEC 4; the buffers are 256-byte
// aligned, the last n % 4 elements are read one by one), and adds its summed bins to the global
// histogram, which the first launch zeroes.
#define BINS 256

extern "C" __global__ void zero_bins(int* hist) {
    hist[threadIdx.x] = 0;
}

__device__ __forceinline__ void count(int* bins, int v) {
    if ((unsigned)v < BINS) atomicAdd(&bins[v], 1);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
histogram_tuned(const int* __restrict__ x, int* __restrict__ hist, int n) {
    static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");
    __shared__ int local[COPIES * BINS];
    for (int b = threadIdx.x; b < COPIES * BINS; b += BLOCK) local[b] = 0;
    __syncthreads();
    int* mine = local + ((threadIdx.x >> 5) % COPIES) * BINS;
    const long long stride = (long long)gridDim.x * BLOCK;
    const long long first = (long long)blockIdx.x * BLOCK + threadIdx.x;
    long long done = 0;
    if (VEC == 4) {
        const long long n4 = n / 4;
        const int4* x4 = reinterpret_cast<const int4*>(x);
        for (long long i = first; i < n4; i += stride) {
            int4 v = x4[i];
            count(mine, v.x);
            count(mine, v.y);
            count(mine, v.z);
            count(mine, v.w);
        }
        done = 4 * n4;
    }
    for (long long i = done + first; i < n; i += stride) count(mine, x[i]);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += BLOCK) {
        int sum = 0;
        #pragma unroll
        for (int c = 0; c < COPIES; ++c) sum += local[c * BINS + b];
        if (sum) atomicAdd(&hist[b], sum);
    }
}
