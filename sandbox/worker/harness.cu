// Trusted device code of the harness (never a candidate's): hashes and output fingerprints.
#include <cuda_fp16.h>

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// Order-sensitive hash of n 32-bit words: sum over i of mix(mix(i ^ seed) + word[i]).
extern "C" __global__ void hash_words(const unsigned int* __restrict__ p, long long n,
                                      unsigned long long seed, unsigned long long* out) {
    unsigned long long acc = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        acc += mix64(mix64((unsigned long long)i ^ seed) + p[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

template <typename T> __device__ __forceinline__ double as_double(T v) { return (double)v; }
template <> __device__ __forceinline__ double as_double<__half>(__half v) { return (double)__half2float(v); }

// Weighted fingerprint of an output with pseudo-random weights w_i in [-1, 1) keyed by `key`:
// out[0] = sum w*y, out[1] = sum |w|*|y|, out[2] = sum |w| (finite elements only),
// out[3] = #NaN, out[4] = #+inf, out[5] = #-inf.
template <typename T>
__global__ void fingerprint(const T* __restrict__ y, long long n, unsigned long long key, double* out) {
    double s = 0.0, a = 0.0, w1 = 0.0, nan = 0.0, pinf = 0.0, ninf = 0.0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = as_double(y[i]);
        double w = (double)(mix64((unsigned long long)i ^ key) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        if (isnan(v)) nan += 1.0;
        else if (isinf(v)) { if (v > 0) pinf += 1.0; else ninf += 1.0; }
        else { s += w * v; a += fabs(w) * fabs(v); w1 += fabs(w); }
    }
    double vals[6] = {s, a, w1, nan, pinf, ninf};
    #pragma unroll
    for (int k = 0; k < 6; ++k) {
        double v = vals[k];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if ((threadIdx.x & 31) == 0 && v != 0.0) atomicAdd(out + k, v);
    }
}

template __global__ void fingerprint<double>(const double*, long long, unsigned long long, double*);
template __global__ void fingerprint<float>(const float*, long long, unsigned long long, double*);
template __global__ void fingerprint<__half>(const __half*, long long, unsigned long long, double*);
template __global__ void fingerprint<long long>(const long long*, long long, unsigned long long, double*);
template __global__ void fingerprint<int>(const int*, long long, unsigned long long, double*);
template __global__ void fingerprint<unsigned int>(const unsigned int*, long long, unsigned long long, double*);
template __global__ void fingerprint<signed char>(const signed char*, long long, unsigned long long, double*);
template __global__ void fingerprint<unsigned char>(const unsigned char*, long long, unsigned long long, double*);
