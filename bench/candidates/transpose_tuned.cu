/*@kernelwright
[knobs]
TILE = [32, 16, 64]
ROWS = [8, 1, 2, 4, 16, 32]
VX = [1, 2, 4]
SMEM = [1, 0, 2]

[[launch]]
kernel = "transpose_tuned"
grid = ["ceil_div(cols, TILE)", "ceil_div(rows, TILE)"]
block = ["TILE / VX", "ROWS"]
args = ["x", "y", "rows", "cols"]
@*/
// Tiled transpose with its tuning choices exposed as knobs, for tuning benchmarks. A TILE x TILE tile
// goes through shared memory so that reads of x and writes of y are both coalesced. A block has
// TILE / VX x ROWS threads: each thread moves VX columns (TILE / VX apart, so a warp's accesses stay
// contiguous) of TILE / ROWS rows. SMEM is the shared-memory layout: 1 pads each tile row by one
// float, 2 XOR-swizzles the column index by the row, 0 does neither (bank conflicts on the way out).
// Shapes that do not give 32..1024 threads per block do not compile.
#define TPX (TILE / VX)
#define SWZ(r, c) (SMEM == 2 ? ((c) ^ ((r) & (TILE - 1))) : (c))

extern "C" __global__ void __launch_bounds__(TPX * ROWS)
transpose_tuned(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    static_assert(TILE % VX == 0 && ROWS <= TILE && TILE % ROWS == 0, "VX and ROWS must divide TILE");
    static_assert(TPX * ROWS >= 32 && TPX * ROWS <= 1024, "a block needs 32..1024 threads");
    __shared__ float tile[TILE][TILE + (SMEM == 1 ? 1 : 0)];
    const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
    #pragma unroll
    for (int k = 0; k < VX; ++k) {
        const int tc = threadIdx.x + k * TPX, c = bx + tc;
        #pragma unroll
        for (int jj = 0; jj < TILE; jj += ROWS) {
            const int j = jj + threadIdx.y, r = by + j;
            if (r < rows && c < cols) tile[j][SWZ(j, tc)] = x[(long long)r * cols + c];
        }
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < VX; ++k) {
        const int tr = threadIdx.x + k * TPX, r = by + tr;
        #pragma unroll
        for (int jj = 0; jj < TILE; jj += ROWS) {
            const int j = jj + threadIdx.y, oc = bx + j;
            if (oc < cols && r < rows) y[(long long)oc * rows + r] = tile[tr][SWZ(tr, j)];
        }
    }
}
