/*@kernelwright
[knobs]
TILE = [16, 32, 8]

[[launch]]
kernel = "gemm_nt_tiled"
grid = ["ceil_div(N, TILE)", "ceil_div(M, TILE)"]
block = ["TILE", "TILE"]
args = ["A", "B", "C", "M", "N", "K"]
@*/
// Square shared-memory tiles: a TILE x TILE block loads a tile of A's rows and a tile of B's rows, both
// along K (coalesced), and each thread accumulates one element of C. Padding avoids bank conflicts
// when threads read B's tile across its rows.
extern "C" __global__ void gemm_nt_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;          // i, in M
    int col = blockIdx.x * TILE + threadIdx.x;          // j, in N
    int b_row = blockIdx.x * TILE + threadIdx.y;        // the row of B this thread loads
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int k = k0 + threadIdx.x;
        As[threadIdx.y][threadIdx.x] = (row < M && k < K) ? A[(long long)row * K + k] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (b_row < N && k < K) ? B[(long long)b_row * K + k] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) acc += As[threadIdx.y][kk] * Bs[threadIdx.x][kk];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}
