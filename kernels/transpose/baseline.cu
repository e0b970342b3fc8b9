/*@kernelwright
[knobs]
TILE = [32, 16, 64]
ROWS = [8, 4, 16]

[[launch]]
kernel = "transpose_tiled"
grid = ["ceil_div(cols, TILE)", "ceil_div(rows, TILE)"]
block = ["TILE", "ROWS"]
args = ["x", "y", "rows", "cols"]
@*/
// A TILE x TILE tile goes through shared memory (padded against bank conflicts) so that both the
// reads of x and the writes of y are coalesced; each thread moves TILE / ROWS elements.
extern "C" __global__ void transpose_tiled(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x;
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        int r = blockIdx.y * TILE + j;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[(long long)r * cols + c];
    }
    __syncthreads();
    int r = blockIdx.y * TILE + threadIdx.x;
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        int oc = blockIdx.x * TILE + j;
        if (oc < cols && r < rows) y[(long long)oc * rows + r] = tile[threadIdx.x][j];
    }
}
