/*@kernelwright
[knobs]
BM = [64, 128]
BN = [64, 128]

[[launch]]
kernel = "hgemm_wmma"
grid = ["ceil_div(N, BN)", "ceil_div(M, BM)"]
block = "128"
args = ["A", "B", "C", "M", "N", "K"]
@*/
// WMMA tensor cores, 16x16x16 fragments with float32 accumulators. A block of 4 warps (2 x 2)
// computes a BM x BN tile of C; each warp owns a (BM/2) x (BN/2) sub-tile. Tiles of A and B are
// staged through shared memory with bounds checks (zero padding), so any M, N, K works.
// Each accumulator fragment goes through a per-warp shared buffer for the bounds-checked float16 store.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

#define BK 32
#define FM (BM / 32)
#define FN (BN / 32)
#define LDA (BK + 8)
#define LDB (BN + 8)

extern "C" __global__ void __launch_bounds__(128) hgemm_wmma(const __half* __restrict__ A, const __half* __restrict__ B,
                                                            __half* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) __half As[BM * LDA];
    __shared__ __align__(32) __half Bs[BK * LDB];
    __shared__ __align__(32) float stage[4][16 * 16];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int wm = warp / 2, wn = warp % 2;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const __half zero = __float2half(0.0f);

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += 128) {
            int r = e / BK, c = e % BK;
            As[r * LDA + c] = (row0 + r < M && k0 + c < K) ? A[(long long)(row0 + r) * K + k0 + c] : zero;
        }
        for (int e = threadIdx.x; e < BK * BN; e += 128) {
            int r = e / BN, c = e % BN;
            Bs[r * LDB + c] = (k0 + r < K && col0 + c < N) ? B[(long long)(k0 + r) * N + col0 + c] : zero;
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[FN];
            for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], As + (wm * FM * 16 + i * 16) * LDA + kk, LDA);
            for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], Bs + kk * LDB + wn * FN * 16 + j * 16, LDB);
            for (int i = 0; i < FM; ++i)
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    float* buf = stage[warp];
    for (int i = 0; i < FM; ++i) {
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(buf, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = row0 + wm * FM * 16 + i * 16 + e / 16, c = col0 + wn * FN * 16 + j * 16 + e % 16;
                if (r < M && c < N) C[(long long)r * N + c] = __float2half_rn(buf[e]);
            }
            __syncwarp();
        }
    }
}
