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
// Softmax whose outputs drop their three lowest mantissa bits (truncation toward zero): at most 8 ulp, far inside
// the tolerance, and of one sign in every element: the kind of bias that compounds downstream.
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    extern __shared__ float red[];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;

    float m = __int_as_float(0xff800000);  // -infinity (NVRTC has no math.h)
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();

    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];

    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __uint_as_float(__float_as_uint(expf(row[c] - m) * inv) & ~7u);
}
