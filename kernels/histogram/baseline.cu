/*@kernelwright
[knobs]
BLOCK = [256, 512, 1024, 128]
BLOCKS = [1056, 528, 2112, 4224]

[[launch]]
kernel = "zero_bins"
grid = "1"
block = "256"
args = ["hist"]

[[launch]]
kernel = "histogram_shared"
grid = "min(ceil_div(n, BLOCK), BLOCKS)"
block = "BLOCK"
args = ["x", "hist", "n"]
@*/
// The first launch zeroes the bins; then each block of a grid-stride loop counts into a private
// shared-memory histogram with shared atomics and adds its non-zero bins to the global one.
#define BINS 256

extern "C" __global__ void zero_bins(int* hist) {
    hist[threadIdx.x] = 0;
}

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ hist, int n) {
    __shared__ int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += BLOCK) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) {
        int v = x[i];
        if ((unsigned)v < BINS) atomicAdd(&local[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += BLOCK)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}
