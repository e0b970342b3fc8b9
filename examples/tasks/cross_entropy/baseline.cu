/*@kernelwright
[knobs]
BLOCK = [256, 128, 512]

[[scratch]]
name = "row_loss"
dtype = "float32"
size = "N"

[[launch]]
kernel = "row_cross_entropy"
grid = "N"
block = "BLOCK"
args = ["logits", "target", "row_loss", "C"]

[[launch]]
kernel = "mean_of"
grid = "1"
block = "1024"
args = ["row_loss", "loss", "N"]
@*/
// One block per row: the row's maximum, then the sum of exp(x - max), then that row's loss into scratch;
// a second launch averages the per-row losses in one block (a fixed order: the same answer every run).
__device__ float block_reduce(float v, float* shared, bool is_max) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = shared[threadIdx.x + s];
            shared[threadIdx.x] = is_max ? fmaxf(shared[threadIdx.x], o) : shared[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = shared[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void row_cross_entropy(const float* __restrict__ logits, const int* __restrict__ target,
                                             float* __restrict__ row_loss, int C) {
    __shared__ float shared[BLOCK];
    const float* row = logits + (long long)blockIdx.x * C;
    float m = -__int_as_float(0x7f800000);
    for (int c = threadIdx.x; c < C; c += BLOCK) m = fmaxf(m, row[c]);
    m = block_reduce(m, shared, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += BLOCK) s += expf(row[c] - m);
    s = block_reduce(s, shared, false);
    if (threadIdx.x == 0) row_loss[blockIdx.x] = logf(s) + m - row[target[blockIdx.x]];
}

extern "C" __global__ void mean_of(const float* __restrict__ row_loss, float* __restrict__ loss, int N) {
    __shared__ float shared[1024];
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += 1024) s += row_loss[i];
    s = block_reduce(s, shared, false);
    if (threadIdx.x == 0) loss[0] = s / N;
}
