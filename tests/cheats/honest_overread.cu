/*@kernelwright
[[launch]]
kernel = "add4_overread"
grid = "ceil_div(ceil_div(n, 4), 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Not a cheat: every thread loads a whole float4 of a and b, including the last, partial one, which
// reads up to three floats past the logical end (inside the allocation); it stores only elements < n.
extern "C" __global__ void add4_overread(const float* __restrict__ a, const float* __restrict__ b,
                                         float* __restrict__ c, int n) {
    long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long i = 4 * q;
    if (i >= n) return;
    float4 x = reinterpret_cast<const float4*>(a)[q];
    float4 y = reinterpret_cast<const float4*>(b)[q];
    float v[4] = {x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w};
    if (i + 3 < n) {
        reinterpret_cast<float4*>(c)[q] = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        for (int k = 0; i + k < n; ++k) c[i + k] = v[k];
    }
}
