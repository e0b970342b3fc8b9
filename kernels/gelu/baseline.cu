/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "gelu_tanh"
grid = "ceil_div(n, BLOCK)"
block = "BLOCK"
args = ["x", "y", "n"]
@*/
// One thread per element: the tanh form of GELU in float32.
extern "C" __global__ void gelu_tanh(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}
