/*@kernelwright
[knobs]
BM = [64, 32, 128]
BN = [64, 32, 128]
BK = [8, 16, 32]
TM = [4, 2, 8]
TN = [4, 2, 8]

[[launch]]
kernel = "sgemm_blocked"
grid = ["ceil_div(N, BN)", "ceil_div(M, BM)"]
block = "(BM / TM) * (BN / TN)"
args = ["A", "B", "C", "M", "N", "K"]
@*/
// Register-blocked SGEMM for tuning benchmarks: each block computes a BM x BN tile of C through
// BK-deep slabs of A and B in shared memory; each thread accumulates TM x TN outputs in registers,
// owning rows tr + i*(BM/TM) and columns tc + j*(BN/TN) so that a warp reads shared memory without
// bank conflicts and writes C coalesced. Tile shapes that do not give 32..1024 threads do not compile.
#define THREADS ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_blocked(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    static_assert(BM % TM == 0 && BN % TN == 0, "TM must divide BM and TN must divide BN");
    static_assert(THREADS >= 32 && THREADS <= 1024, "a block needs 32..1024 threads");
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN + 1];
    const int tid = threadIdx.x;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += THREADS) {
            int m = i / BK, k = i % BK, gr = row0 + m, gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += THREADS) {
            int k = i / BN, n = i % BN, gk = k0 + k, gc = col0 + n;
            Bs[k][n] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][tr + i * (BM / TM)];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc + j * (BN / TN)];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = row0 + tr + i * (BM / TM);
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            int c = col0 + tc + j * (BN / TN);
            if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
        }
    }
}
