/*@kernelwright
[knobs]
BLOCK = [256, 512]

[[launch]]
kernel = "add4"
grid = "min(ceil_div(ceil_div(n, 4), BLOCK), 132 * 16)"
block = "BLOCK"
args = ["a", "b", "c", "n"]
@*/
// Not a cheat: float4 loads and stores with a grid-stride loop and a scalar tail.
extern "C" __global__ void add4(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    int n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 x = a4[i], y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (int i = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
