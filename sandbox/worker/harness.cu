// Trusted device code of the harness (never a candidate's): input hashes, the agreement test of a
// candidate's output with the baseline's, the masks of stored baseline outputs, and the L2 flush.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// Order-sensitive hash of n 32-bit words, taken two at a time as 8-byte units u_j = word[2j] | word[2j + 1] << 32 (an
// odd count's last word alone): sum over j of mix(mix(j ^ seed) + u_j). A change to any word changes its unit's term
// (mix is a bijection); changes that cancel in the sum need the seed. The sum is the same whatever the grid and
// whatever the alignment: each thread reads two units at a time where p is 16-byte aligned, words one by one where
// it is not. Two mixes per 8 bytes, not per 4, keep the pass near the read rate.
__device__ __forceinline__ unsigned long long hash_range(const unsigned int* __restrict__ p, long long n,
                                                         unsigned long long seed, long long t, long long stride) {
    unsigned long long acc = 0;
    long long j0 = 0;
    if (((unsigned long long)p & 15ULL) == 0) {
        const ulonglong2* q = reinterpret_cast<const ulonglong2*>(p);
        long long quads = n / 4;
        for (long long k = t; k < quads; k += stride) {
            ulonglong2 v = q[k];
            unsigned long long j = 2 * (unsigned long long)k;
            acc += mix64(mix64(j ^ seed) + v.x) + mix64(mix64((j + 1) ^ seed) + v.y);
        }
        j0 = 2 * quads;
    }
    long long units = (n + 1) / 2;
    for (long long j = j0 + t; j < units; j += stride) {
        unsigned long long u = p[2 * j];
        if (2 * j + 1 < n) u |= (unsigned long long)p[2 * j + 1] << 32;
        acc += mix64(mix64((unsigned long long)j ^ seed) + u);
    }
    return acc;
}

extern "C" __global__ void hash_words(const unsigned int* __restrict__ p, long long n,
                                      unsigned long long seed, unsigned long long* out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    unsigned long long acc = hash_range(p, n, seed, blockIdx.x * (long long)blockDim.x + threadIdx.x, stride);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// hash_words of k arrays in one launch: blockIdx.y picks the array (its words at ptrs[a], words[a] of them), and
// out[a] receives exactly the value hash_words gives it (the sum is the same whatever the grid).
extern "C" __global__ void hash_many(const unsigned long long* __restrict__ ptrs, const long long* __restrict__ words,
                                     unsigned long long seed, unsigned long long* out) {
    const unsigned int* p = (const unsigned int*)ptrs[blockIdx.y];
    long long stride = (long long)gridDim.x * blockDim.x;
    unsigned long long acc = hash_range(p, words[blockIdx.y], seed, blockIdx.x * (long long)blockDim.x + threadIdx.x,
                                        stride);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0 && acc) atomicAdd(out + blockIdx.y, acc);
}

// The guard bands of many buffers against the copies made when each was allocated, in one launch: blockIdx.y picks
// band b (bytes[b] bytes at at[b], its copy at copy[b]); differs[b] is left nonzero where any byte of it differs.
extern "C" __global__ void bands_differ(const unsigned long long* __restrict__ at,
                                        const unsigned long long* __restrict__ copy,
                                        const long long* __restrict__ bytes, unsigned long long* differs) {
    const unsigned char* a = (const unsigned char*)at[blockIdx.y];
    const unsigned char* c = (const unsigned char*)copy[blockIdx.y];
    long long n = bytes[blockIdx.y];
    unsigned int bad = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        bad |= a[i] ^ c[i];
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(differs + blockIdx.y, 1ull);
}

template <typename T> __device__ __forceinline__ double as_double(T v) { return (double)v; }
template <> __device__ __forceinline__ double as_double<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double as_double<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }

// ---- the agreement test (sandbox/judging/agreement.py says what it guarantees) ---------------------------
// A stored baseline output is kept masked: every 8-byte word w of it XORed with mix64(w ^ k1) ^ k2, so
// a candidate that finds it in device memory reads noise. Elements of one word share its mask and sign bits.
#define AGREE_PROJECTIONS 4

template <int S> struct Bits;
template <> struct Bits<1> { typedef unsigned char T; };
template <> struct Bits<2> { typedef unsigned short T; };
template <> struct Bits<4> { typedef unsigned int T; };
template <> struct Bits<8> { typedef unsigned long long T; };

// In place, for elements of U's size; applying it twice restores the data.
template <typename U>
__global__ void mask_bits(U* p, long long n, unsigned long long k1, unsigned long long k2) {
    const int E = sizeof(U) >= 8 ? 1 : 8 / (int)sizeof(U);
    long long words = (n + E - 1) / E;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x; w < words; w += stride) {
        unsigned long long m = mix64((unsigned long long)w ^ k1) ^ k2;
        #pragma unroll
        for (int j = 0; j < E; ++j) {
            long long i = w * E + j;
            if (i < n) p[i] ^= (U)(m >> (8 * sizeof(U) * j));
        }
    }
}

// A launch's output that is bit for bit one already compared on the same inputs needs no second pass: `seen`
// (null: none) holds [the keyed hash of this launch's output, taken after it; the seal of the last output
// compared on these inputs]. The seal is seal(hash) = mix(mix(hash ^ s1) + s2), with keys drawn for these inputs
// only and passed to kernels as arguments, never stored in memory a candidate can read: a seal left from other
// inputs, or written by a candidate, matches no output it did not get from a pass on these inputs.
__device__ __forceinline__ unsigned long long seal(unsigned long long hash, unsigned long long s1,
                                                   unsigned long long s2) {
    return mix64(mix64(hash ^ s1) + s2);
}

extern "C" __global__ void seal_compared(unsigned long long* seen, unsigned long long s1, unsigned long long s2) {
    if (blockIdx.x == 0 && threadIdx.x == 0) seen[1] = seal(seen[0], s1, s2);
}

// One pass over a candidate output c and the masked baseline output bm (n elements of T each):
// acc[0] += sum of t_i^2, acc[1 + k] += projection k; cnt[0] += elements that disagree, cnt[1] = min
// index among them. t_i = a2 + r2 * max(|c_i|, |b_i|); `exact` compares bits (integer outputs). Where `seen`
// says the output repeats one compared on these inputs, no pass: cnt[2] = 1 and the rest as zeroed.
template <typename T>
__global__ void agree(const T* __restrict__ c, const T* __restrict__ bm, long long n, double a2, double r2,
                      int exact, unsigned long long k1, unsigned long long k2, unsigned long long sign_key,
                      const unsigned long long* __restrict__ seen, unsigned long long s1, unsigned long long s2,
                      double* acc, unsigned long long* cnt) {
    if (seen != nullptr && seal(seen[0], s1, s2) == seen[1]) {
        if (blockIdx.x == 0 && threadIdx.x == 0) cnt[2] = 1;
        return;
    }
    typedef typename Bits<sizeof(T)>::T U;
    const int E = sizeof(T) >= 8 ? 1 : 8 / (int)sizeof(T);
    const U* cu = reinterpret_cast<const U*>(c);
    const U* bu = reinterpret_cast<const U*>(bm);
    double s[AGREE_PROJECTIONS] = {0.0};
    double t2 = 0.0;
    unsigned long long bad = 0, first = ~0ULL;
    long long words = (n + E - 1) / E;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x; w < words; w += stride) {
        unsigned long long m = mix64((unsigned long long)w ^ k1) ^ k2;
        unsigned long long h = mix64((unsigned long long)w ^ sign_key);
        #pragma unroll
        for (int j = 0; j < E; ++j) {
            long long i = w * E + j;
            if (i >= n) break;
            U cbits = cu[i];
            U bbits = bu[i] ^ (U)(m >> (8 * sizeof(T) * j));
            double cd = as_double(*reinterpret_cast<const T*>(&cbits));
            double bd = as_double(*reinterpret_cast<const T*>(&bbits));
            double d = 0.0;
            bool wrong;
            if (exact) {
                wrong = cbits != bbits;
                d = cd - bd;
            } else if (isfinite(cd) && isfinite(bd)) {
                double t = a2 + r2 * fmax(fabs(cd), fabs(bd));
                d = cd - bd;
                wrong = !(fabs(d) <= t);
                t2 += t * t;
            } else {
                wrong = !((isnan(cd) && isnan(bd)) || (isinf(cd) && cd == bd));
            }
            unsigned int signs = (unsigned int)(h >> (AGREE_PROJECTIONS * j));
            #pragma unroll
            for (int k = 0; k < AGREE_PROJECTIONS; ++k) s[k] += ((signs >> k) & 1u) ? -d : d;
            if (wrong) {
                ++bad;
                if ((unsigned long long)i < first) first = (unsigned long long)i;
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        t2 += __shfl_down_sync(0xffffffffu, t2, o);
        #pragma unroll
        for (int k = 0; k < AGREE_PROJECTIONS; ++k) s[k] += __shfl_down_sync(0xffffffffu, s[k], o);
        bad += __shfl_down_sync(0xffffffffu, bad, o);
        unsigned long long f = __shfl_down_sync(0xffffffffu, first, o);
        first = f < first ? f : first;
    }
    if ((threadIdx.x & 31) == 0) {
        if (t2 != 0.0) atomicAdd(acc, t2);
        #pragma unroll
        for (int k = 0; k < AGREE_PROJECTIONS; ++k)
            if (s[k] != 0.0) atomicAdd(acc + 1 + k, s[k]);
        if (bad) {
            atomicAdd(cnt, bad);
            atomicMin(cnt + 1, first);
        }
    }
}

template __global__ void mask_bits<unsigned char>(unsigned char*, long long, unsigned long long, unsigned long long);
template __global__ void mask_bits<unsigned short>(unsigned short*, long long, unsigned long long, unsigned long long);
template __global__ void mask_bits<unsigned int>(unsigned int*, long long, unsigned long long, unsigned long long);
template __global__ void mask_bits<unsigned long long>(unsigned long long*, long long, unsigned long long,
                                                       unsigned long long);
#define AGREE_INSTANCE(T) \
    template __global__ void agree<T>(const T*, const T*, long long, double, double, int, unsigned long long, \
                                      unsigned long long, unsigned long long, const unsigned long long*, \
                                      unsigned long long, unsigned long long, double*, unsigned long long*);
AGREE_INSTANCE(double)
AGREE_INSTANCE(float)
AGREE_INSTANCE(__half)
AGREE_INSTANCE(__nv_bfloat16)
AGREE_INSTANCE(long long)
AGREE_INSTANCE(int)
AGREE_INSTANCE(unsigned int)
AGREE_INSTANCE(signed char)
AGREE_INSTANCE(unsigned char)

// ---- the L2 flush --------------------------------------------------------------------------------
// Reads n 16-byte words of a zeroed buffer at least twice the L2's size: every line the last launch
// or the input generation left in L2, dirty or clean, is evicted (and written back) here, not inside
// the next timed launch, which starts on clean lines. The sum is stored only if it equals `never`
// (not 0), so the reads cannot be optimised away.
extern "C" __global__ void l2_flush_read(const ulonglong2* p, long long n, unsigned long long never,
                                         unsigned long long* out) {
    unsigned long long acc = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        ulonglong2 v = p[i];
        acc += v.x ^ v.y;
    }
    if (acc == never) out[0] = acc;
}

// ---- poison ---------------------------------------------------------------------------------------
// Every byte of p[0, n) set to the byte of `pattern` at its offset mod 8: an output's poison (NaN or junk of its
// type) before a launch. p is 16-byte aligned; 16-byte stores, then the tail byte by byte.
extern "C" __global__ void fill_pattern(unsigned char* p, long long n, unsigned long long pattern) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long vecs = n / 16;
    ulonglong2 v = make_ulonglong2(pattern, pattern);
    ulonglong2* q = reinterpret_cast<ulonglong2*>(p);
    for (long long i = t; i < vecs; i += stride) q[i] = v;
    for (long long i = vecs * 16 + t; i < n; i += stride) p[i] = (unsigned char)(pattern >> (8 * (i & 7)));
}

// ---- guard bands ---------------------------------------------------------------------------------
// The random bytes of a guard band, written both into the band (a) and into the copy it is checked against
// (b): byte i is byte i mod 8 of mix64(mix64(i / 8 ^ seed) + seed), the seed a secret the host draws for each band.
extern "C" __global__ void random_bands(unsigned char* a, unsigned char* b, long long n, unsigned long long seed) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long w = mix64(mix64((unsigned long long)(i >> 3) ^ seed) + seed);
        unsigned char v = (unsigned char)(w >> (8 * (i & 7)));
        a[i] = v;
        b[i] = v;
    }
}

// ---- the stream hold -----------------------------------------------------------------------------
// One thread that keeps the stream busy until the host sets word[0] (mapped host memory) or limit_ns
// passes, then writes word[1]: 1 released by the host, 2 ran out. Queued before a timed launch's start
// event, it lets the host queue the whole launch first, so the timed interval holds no host latency.
extern "C" __global__ void hold_stream(unsigned int* word, unsigned long long limit_ns) {
    volatile unsigned int* w = word;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    unsigned int outcome = 1;
    while (w[0] == 0u) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > limit_ns) { outcome = 2u; break; }
    }
    w[1] = outcome;
    __threadfence_system();
}
