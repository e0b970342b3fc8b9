/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// Never finishes.
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    long long start = clock64();
    while (clock64() - start >= 0) { }
}
