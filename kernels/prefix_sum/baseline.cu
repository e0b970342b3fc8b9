/*@kernelwright
[knobs]
BLOCK = [256, 128, 512]
ITEMS = [8, 4, 16]

[[scratch]]
name = "tile_sums"
dtype = "int32"
size = "ceil_div(n, BLOCK * ITEMS)"

[[launch]]
kernel = "tile_reduce"
grid = "ceil_div(n, BLOCK * ITEMS)"
block = "BLOCK"
args = ["x", "tile_sums", "n"]

[[launch]]
kernel = "scan_tile_sums"
grid = "1"
block = "1024"
args = ["tile_sums", "ceil_div(n, BLOCK * ITEMS)"]

[[launch]]
kernel = "tile_scan"
grid = "ceil_div(n, BLOCK * ITEMS)"
block = "BLOCK"
args = ["x", "y", "tile_sums", "n"]
@*/
// Reduce-then-scan in three launches over tiles of BLOCK * ITEMS elements:
// 1. the sum of every tile; 2. one block turns the tile sums into exclusive tile offsets;
// 3. every tile is scanned in shared memory and shifted by its offset.
#define TILE (BLOCK * ITEMS)

__device__ int warp_inclusive_scan(int v) {
    int lane = threadIdx.x & 31;
    for (int d = 1; d < 32; d <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += t;
    }
    return v;
}

// Inclusive scan of one value per thread across the block (blockDim.x a multiple of 32).
// `sums` is shared scratch of 32 ints; every thread must call this.
__device__ int block_inclusive_scan(int v, int* sums) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_inclusive_scan(v);
    if (lane == 31) sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int s = lane < warps ? sums[lane] : 0;
        sums[lane] = warp_inclusive_scan(s);
    }
    __syncthreads();
    if (warp > 0) v += sums[warp - 1];
    return v;
}

extern "C" __global__ void tile_reduce(const int* __restrict__ x, int* __restrict__ tile_sums, int n) {
    __shared__ int sums[32];
    long long base = (long long)blockIdx.x * TILE;
    int s = 0;
    for (int k = 0; k < ITEMS; ++k) {
        long long i = base + k * BLOCK + threadIdx.x;
        if (i < n) s += x[i];
    }
    int total = block_inclusive_scan(s, sums);
    if (threadIdx.x == BLOCK - 1) tile_sums[blockIdx.x] = total;
}

extern "C" __global__ void scan_tile_sums(int* tile_sums, int count) {
    __shared__ int sums[32];
    int per = (count + blockDim.x - 1) / blockDim.x;
    int begin = min(threadIdx.x * per, count), end = min(begin + per, count);
    int s = 0;
    for (int i = begin; i < end; ++i) s += tile_sums[i];
    int running = block_inclusive_scan(s, sums) - s;
    for (int i = begin; i < end; ++i) {
        int v = tile_sums[i];
        tile_sums[i] = running;
        running += v;
    }
}

extern "C" __global__ void tile_scan(const int* __restrict__ x, int* __restrict__ y,
                                    const int* __restrict__ tile_offsets, int n) {
    __shared__ int tile[TILE];
    __shared__ int sums[32];
    long long base = (long long)blockIdx.x * TILE;
    for (int k = 0; k < ITEMS; ++k) {
        int t = k * BLOCK + threadIdx.x;
        tile[t] = base + t < n ? x[base + t] : 0;
    }
    __syncthreads();
    int* mine = tile + threadIdx.x * ITEMS;
    int s = 0;
    for (int j = 0; j < ITEMS; ++j) s += mine[j];
    int running = block_inclusive_scan(s, sums) - s + tile_offsets[blockIdx.x];
    for (int j = 0; j < ITEMS; ++j) {
        running += mine[j];
        mine[j] = running;
    }
    __syncthreads();
    for (int k = 0; k < ITEMS; ++k) {
        int t = k * BLOCK + threadIdx.x;
        if (base + t < n) y[base + t] = tile[t];
    }
}
