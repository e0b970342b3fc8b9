/*@kernelwright
[[launch]]
kernel = "k"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// An honest sum that remembers where its inputs were: once it has run three times on one input buffer and is
// then handed another (the timing stage moved to its next rotating set), it writes a NaN into the first element
// of the buffer it left (at sizes above a million only: the correctness trials free their buffers). It never
// touches the buffers of the launch it is in, so only a guard over the stage's other buffers sees it. The last block to finish records the launch, after every block has read the history.
__device__ const float* seen[3];
__device__ unsigned finished = 0;
extern "C" __global__ void k(const float* a, const float* b, float* c, int n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const float* last = seen[0];
        if (n > (1 << 20) && last != nullptr && last != a && seen[1] == last && seen[2] == last)
            *const_cast<float*>(last) = __int_as_float(0x7fc00000);
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&finished, 1u) == gridDim.x - 1) {
            seen[2] = seen[1];
            seen[1] = seen[0];
            seen[0] = a;
            finished = 0;
            __threadfence();
        }
    }
}
