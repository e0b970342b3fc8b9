/*@kernelwright
[knobs]
BM = [64, 128]
BN = [64, 128]
SOFTMAX_BLOCK = [256, 128, 512, 1024]

[[scratch]]
name = "scores"
dtype = "float32"
size = "BH * S * S"

[[scratch]]
name = "probs"
dtype = "float16"
size = "BH * S * S"

[[launch]]
kernel = "attn_scores"
grid = ["ceil_div(S, BN)", "ceil_div(S, BM)", "BH"]
block = "128"
args = ["q", "k", "scores", "S", "D"]

[[launch]]
kernel = "attn_softmax"
grid = "BH * S"
block = "SOFTMAX_BLOCK"
args = ["scores", "probs", "S"]

[[launch]]
kernel = "attn_pv"
grid = ["ceil_div(D, BN)", "ceil_div(S, BM)", "BH"]
block = "128"
args = ["probs", "v", "o", "S", "D"]
@*/
// Unfused attention in three launches:
// 1. scores = q k^T / sqrt(D) in float32 (tensor cores, one BM x BN tile per block, batch in grid.z);
// 2. a row softmax of the scores, written as float16 probabilities;
// 3. o = probs v (tensor cores), rounded to float16.
// Both products use one WMMA tile routine: 4 warps (2 x 2), float32 accumulators, tiles of A and B
// staged through shared memory with bounds checks (zero padding), so any S and D work.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

#define BK 32
#define FM (BM / 32)
#define FN (BN / 32)
#define LDA (BK + 8)
#define LDB (BN + 8)
#define LDBT (BK + 8)
#define B_TILE (BK * LDB > BN * LDBT ? BK * LDB : BN * LDBT)

template <bool TRANS> struct BLayout { typedef wmma::row_major type; };
template <> struct BLayout<true> { typedef wmma::col_major type; };

// The BM x BN tile at (row0, col0) of A[M, K] @ B[K, N] (row-major B), or of A @ Bt^T where Bt[N, K]
// is row-major (TRANS). Each finished element goes to store(row, col, value).
template <bool TRANS, typename Store>
__device__ void gemm_tile(const __half* __restrict__ A, const __half* __restrict__ B, int M, int N, int K,
                          int row0, int col0, Store store) {
    __shared__ __align__(32) __half As[BM * LDA];
    __shared__ __align__(32) __half Bs[B_TILE];
    __shared__ __align__(32) float stage[4][16 * 16];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int wm = warp / 2, wn = warp % 2;
    const __half zero = __float2half(0.0f);

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += 128) {
            int r = e / BK, c = e % BK;
            As[r * LDA + c] = (row0 + r < M && k0 + c < K) ? A[(long long)(row0 + r) * K + k0 + c] : zero;
        }
        if (TRANS) {
            for (int e = threadIdx.x; e < BN * BK; e += 128) {
                int r = e / BK, c = e % BK;
                Bs[r * LDBT + c] = (col0 + r < N && k0 + c < K) ? B[(long long)(col0 + r) * K + k0 + c] : zero;
            }
        } else {
            for (int e = threadIdx.x; e < BK * BN; e += 128) {
                int r = e / BN, c = e % BN;
                Bs[r * LDB + c] = (k0 + r < K && col0 + c < N) ? B[(long long)(k0 + r) * N + col0 + c] : zero;
            }
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, typename BLayout<TRANS>::type> b[FN];
            for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], As + (wm * FM * 16 + i * 16) * LDA + kk, LDA);
            for (int j = 0; j < FN; ++j) {
                int n = wn * FN * 16 + j * 16;
                if (TRANS) wmma::load_matrix_sync(b[j], Bs + n * LDBT + kk, LDBT);
                else wmma::load_matrix_sync(b[j], Bs + kk * LDB + n, LDB);
            }
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
                if (r < M && c < N) store(r, c, buf[e]);
            }
            __syncwarp();
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_scores(const __half* __restrict__ q, const __half* __restrict__ k,
                                                             float* __restrict__ scores, int S, int D) {
    long long bh = blockIdx.z;
    float* out = scores + bh * S * S;
    float scale = 1.0f / sqrtf((float)D);
    gemm_tile<true>(q + bh * S * D, k + bh * S * D, S, S, D, blockIdx.y * BM, blockIdx.x * BN,
                    [&](int r, int c, float value) { out[(long long)r * S + c] = value * scale; });
}

extern "C" __global__ void attn_softmax(const float* __restrict__ scores, __half* __restrict__ probs, int S) {
    __shared__ float red[SOFTMAX_BLOCK];
    const float* row = scores + (long long)blockIdx.x * S;
    __half* p = probs + (long long)blockIdx.x * S;

    float m = __int_as_float(0xff800000);  // -infinity
    for (int c = threadIdx.x; c < S; c += SOFTMAX_BLOCK) m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = SOFTMAX_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();

    float sum = 0.0f;
    for (int c = threadIdx.x; c < S; c += SOFTMAX_BLOCK) sum += expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = SOFTMAX_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];

    for (int c = threadIdx.x; c < S; c += SOFTMAX_BLOCK) p[c] = __float2half_rn(expf(row[c] - m) * inv);
}

extern "C" __global__ void __launch_bounds__(128) attn_pv(const __half* __restrict__ probs, const __half* __restrict__ v,
                                                         __half* __restrict__ o, int S, int D) {
    long long bh = blockIdx.z;
    __half* out = o + bh * S * D;
    gemm_tile<false>(probs + bh * S * S, v + bh * S * D, S, D, S, blockIdx.y * BM, blockIdx.x * BN,
                     [&](int r, int c, float value) { out[(long long)r * D + c] = __float2half_rn(value); });
}
