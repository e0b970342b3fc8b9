/*@kernelwright
[[launch]]
kernel = "softmax_no_max"
grid = "rows"
block = "256"
args = ["x", "y", "rows", "cols"]
@*/
// Softmax without subtracting the row maximum: one pass fewer, and exact while every exp(x) stays
// finite, which it does for inputs of magnitude up to 88. Past that, exp overflows to inf: inf / inf is NaN.
extern "C" __global__ void softmax_no_max(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) sum += expf(row[c]);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int c = threadIdx.x; c < cols; c += 256) out[c] = expf(row[c]) * inv;
}
