/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "argmax_rows"
grid = "rows"
block = "BLOCK"
args = ["x", "idx", "cols"]
@*/
// One block per row. Each thread keeps the first maximum of its strided columns (a strict > keeps the
// earlier column), then a shared-memory tree keeps the larger value, or the smaller column on a tie.
extern "C" __global__ void argmax_rows(const float* __restrict__ x, int* __restrict__ idx, int cols) {
    __shared__ float best_v[BLOCK];
    __shared__ int best_i[BLOCK];
    const float* row = x + (long long)blockIdx.x * cols;
    float v = -__int_as_float(0x7f800000);
    int at = 0x7fffffff;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        float y = row[c];
        if (y > v) { v = y; at = c; }
    }
    best_v[threadIdx.x] = v;
    best_i[threadIdx.x] = at;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float ov = best_v[threadIdx.x + s];
            int oi = best_i[threadIdx.x + s];
            if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
                best_v[threadIdx.x] = ov;
                best_i[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) idx[blockIdx.x] = best_i[0];
}
