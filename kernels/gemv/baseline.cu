/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "gemv_warp_per_row"
grid = "ceil_div(M * 32, BLOCK)"
block = "BLOCK"
args = ["A", "x", "y", "M", "K"]
@*/
// One warp per row of A: lanes stride along the row (coalesced), then a shuffle reduction.
extern "C" __global__ void gemv_warp_per_row(const float* __restrict__ A, const float* __restrict__ x,
                                             float* __restrict__ y, int M, int K) {
    int row = (blockIdx.x * BLOCK + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= M) return;
    const float* a = A + (long long)row * K;
    float s = 0.0f;
    for (int k = lane; k < K; k += 32) s = fmaf(a[k], x[k], s);
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = s;
}
