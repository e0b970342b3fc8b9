/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[scratch]]
name = "biased"
dtype = "float32"
size = "rows * cols"

[[scratch]]
name = "activated"
dtype = "float32"
size = "rows * cols"

[[launch]]
kernel = "add_bias"
grid = "ceil_div(rows * cols, BLOCK)"
block = "BLOCK"
args = ["x", "bias", "biased", "rows * cols", "cols"]

[[launch]]
kernel = "gelu_tanh"
grid = "ceil_div(rows * cols, BLOCK)"
block = "BLOCK"
args = ["biased", "activated", "rows * cols"]

[[launch]]
kernel = "add_residual"
grid = "ceil_div(rows * cols, BLOCK)"
block = "BLOCK"
args = ["activated", "residual", "out", "rows * cols"]
@*/
// The unfused chain, one element-wise kernel per operation, as a framework runs it op by op:
// biased = x + bias; activated = gelu(biased); out = activated + residual.
extern "C" __global__ void add_bias(const float* __restrict__ x, const float* __restrict__ bias,
                                    float* __restrict__ biased, int n, int cols) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) biased[i] = x[i] + bias[i % cols];
}

extern "C" __global__ void gelu_tanh(const float* __restrict__ v, float* __restrict__ g, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        float a = v[i];
        g[i] = 0.5f * a * (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
    }
}

extern "C" __global__ void add_residual(const float* __restrict__ g, const float* __restrict__ residual,
                                        float* __restrict__ out, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = g[i] + residual[i];
}
