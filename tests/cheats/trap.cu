/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Aborts the kernel.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    if (threadIdx.x == 0) __trap();
}
