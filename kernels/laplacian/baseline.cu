/*@kernelwright
[knobs]
BX = [32, 64, 16]
BY = [8, 4, 16]

[[launch]]
kernel = "laplacian5"
grid = ["ceil_div(W, BX)", "ceil_div(H, BY)"]
block = ["BX", "BY"]
args = ["u", "out", "H", "W"]
@*/
// One thread per grid point, neighbours read straight from global memory (the caches provide the reuse).
extern "C" __global__ void laplacian5(const float* __restrict__ u, float* __restrict__ out, int H, int W) {
    int j = blockIdx.x * BX + threadIdx.x;
    int i = blockIdx.y * BY + threadIdx.y;
    if (i >= H || j >= W) return;
    long long idx = (long long)i * W + j;
    float up = i > 0 ? u[idx - W] : 0.0f;
    float down = i + 1 < H ? u[idx + W] : 0.0f;
    float left = j > 0 ? u[idx - 1] : 0.0f;
    float right = j + 1 < W ? u[idx + 1] : 0.0f;
    out[idx] = (up + down) + (left + right) - 4.0f * u[idx];
}
