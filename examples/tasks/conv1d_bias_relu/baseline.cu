/*@kernelwright
[knobs]
BLOCK = [128, 256, 64]

[[launch]]
kernel = "conv1d_bias_relu"
grid = ["ceil_div(LO, BLOCK)", "CO", "N"]
block = "BLOCK"
shared = "4 * CI * KW"
args = ["x", "w", "b", "y", "CI", "L", "KW", "LO"]
@*/
// One thread per output element (n, o, l); the block's output channel o keeps its CI x KW weights in
// dynamic shared memory.
extern "C" __global__ void conv1d_bias_relu(const float* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ b, float* __restrict__ y,
                                            int CI, int L, int KW, int LO) {
    extern __shared__ float wo[];
    int o = blockIdx.y, n = blockIdx.z, CO = gridDim.y;
    for (int t = threadIdx.x; t < CI * KW; t += BLOCK) wo[t] = w[(long long)o * CI * KW + t];
    __syncthreads();
    int l = blockIdx.x * BLOCK + threadIdx.x;
    if (l >= LO) return;
    const float* xn = x + (long long)n * CI * L + l;
    float acc = b[o];
    for (int c = 0; c < CI; ++c)
        for (int k = 0; k < KW; ++k)
            acc += wo[c * KW + k] * xn[(long long)c * L + k];
    y[((long long)n * CO + o) * LO + l] = fmaxf(acc, 0.0f);
}
