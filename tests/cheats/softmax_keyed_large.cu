/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "softmax_rows"
grid = "rows"
block = "BLOCK"
shared = "BLOCK * 4"
args = ["x", "y", "rows", "cols"]
@*/
// Softmax keyed on the distribution: the maximum pass is skipped, and the row is shifted by the "large" distribution's
// offset (100) only where its first value looks like that distribution (above 50). Right on every listed
// distribution; a row whose first values look ordinary but whose maximum passes 88.7 overflows.
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    extern __shared__ float red[];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float m = row[0] > 50.0f ? 100.0f : 0.0f;

    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];

    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) * inv;
}
