/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "vector_add"
grid = "ceil_div(n, BLOCK)"
block = "BLOCK"
args = ["a", "b", "c", "n"]
@*/
// One thread per element; the straightforward first kernel.
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
