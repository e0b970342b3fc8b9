"""The keyed generator behind every drawn input: values a kernel cannot derive from the ones it reads.

A draw's key is 128 bits: Philox-4x32-10's 64-bit key and the top half of its 128-bit counter. Each key comes from
the trial's seed (``new_seed``: 128 bits from the OS's CSPRNG, never shown to a candidate) and the draw's place (input,
chunk, part) through BLAKE2b, so two draws' keys share nothing a kernel could compute, whatever their seeds and
places: neither consecutive rounds, nor chunks, nor inputs. Inside a draw, block b of four 32-bit words is
Philox(counter = (b, key's counter half), key's Philox half); element i of one key bears no relation to element 0 of
another, and the words of one key give nothing of the key short of breaking Philox's ten rounds keyed by 64 secret bits
and 64 more in the counter (no attack is known).

Every kind of value is one definition with two runnings, bit for bit the same: NumPy arrays on the host (references,
tests) and CuPy arrays on a device, and a device kernel (``_DEVICE``) for the float32 inputs the timing stage draws in
place. Both use only operations IEEE 754 rounds exactly (integer arithmetic, +, -, *, / and sqrt, frexp), never a
library's exp, log or sin, and the kernel is compiled without FMA contraction:

- uniform: u = (w >> 8) * 2^-24 in [0, 1); value = (low + offset) + (high - low) * u in float64;
- normal: Box-Muller in float32 on two words per value pair, its log and its sine and cosine as short series
  (``_log``, ``_sincos``: float32 accuracy); value = offset + scale * z in float64;
- integers in [low, high): low + (a 64-bit word) mod (high - low).
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets

import numpy as np

SEED_BITS = 128
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF


def new_seed() -> int:
    """A trial's secret seed: ``SEED_BITS`` bits from the OS's CSPRNG."""
    return secrets.randbits(SEED_BITS)


def derive(seed: int, *place) -> tuple[int, int, int, int]:
    """The key (k0, k1, c2, c3: four 32-bit words) of the draw at ``place`` under ``seed``: BLAKE2b of both."""
    digest = hashlib.blake2b(repr((int(seed), *place)).encode(), digest_size=16, person=b"kw-inputs").digest()
    return tuple(int.from_bytes(digest[4 * j: 4 * j + 4], "little") for j in range(4))


def torch_seed(seed: int, *place) -> int:
    """A 63-bit seed for a generator that takes no wider one (PyTorch's), derived like a key."""
    k = derive(seed, "torch", *place)
    return ((k[0] << 32) | k[1]) & (2**63 - 1)


def philox(xp, c0, c1, key: tuple[int, int, int, int]):
    """Philox-4x32-10 of counters (c0, c1, key[2], key[3]) under (key[0], key[1]): four uint32 arrays."""
    u32, u64 = xp.uint32, xp.uint64
    c0, c1 = c0.astype(u32), c1.astype(u32)
    c2 = xp.full(c0.shape, key[2], dtype=u32)
    c3 = xp.full(c0.shape, key[3], dtype=u32)
    k0, k1 = key[0], key[1]
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0 = c0.astype(u64) * u64(_M0)
        p1 = c2.astype(u64) * u64(_M1)
        hi0, lo0 = (p0 >> u64(32)).astype(u32), p0.astype(u32)
        hi1, lo1 = (p1 >> u64(32)).astype(u32), p1.astype(u32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ u32(k0), lo1, hi0 ^ c3 ^ u32(k1), lo0
    return c0, c1, c2, c3


def words(xp, key, n: int):
    """The first ``n`` words of the draw ``key``: block b's four words are words 4b .. 4b + 3."""
    blocks = xp.arange(-(-n // 4), dtype=xp.uint64)
    out = philox(xp, blocks & xp.uint64(_MASK), blocks >> xp.uint64(32), key)
    return xp.stack(out, axis=1).reshape(-1)[:n]


def uniform01(xp, key, n: int):
    """float64 in [0, 1) on a 2^-24 grid, one word each."""
    return (words(xp, key, n) >> xp.uint32(8)).astype(xp.float64) * 2.0**-24


def uniform(xp, key, n: int, low: float, high: float, offset: float = 0.0):
    return float(low + offset) + float(high - low) * uniform01(xp, key, n)


def integers(xp, key, n: int, low: int, high: int):
    """int64 in [low, high) (high > low), one pair of words each (bias under (high - low) / 2^64)."""
    w = words(xp, key, 2 * n).reshape(n, 2).astype(xp.uint64)
    return ((w[:, 0] << xp.uint64(32) | w[:, 1]) % xp.uint64(high - low)).astype(xp.int64) + int(low)


def _f(x: float) -> np.float32:
    return np.float32(x)


LN2 = _f(math.log(2.0))
HALF_PI = _f(math.pi / 2)
SQRT_HALF = _f(math.sqrt(0.5))
LOG_SERIES = tuple(_f(1.0 / (2 * k + 1)) for k in range(5))               # 1, 1/3, ..., 1/9
SIN_SERIES = tuple(_f((-1) ** k / math.factorial(2 * k + 1)) for k in range(8))
COS_SERIES = tuple(_f((-1) ** k / math.factorial(2 * k)) for k in range(8))


def _horner(t, coefs):
    acc = t * coefs[-1]
    for c in reversed(coefs[1:-1]):
        acc = (acc + c) * t
    return acc + coefs[0]


def _log(xp, u):
    """log(u) for float32 u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1)/(m + 1))."""
    m, e = xp.frexp(u)
    low = m < SQRT_HALF
    m = xp.where(low, m * _f(2.0), m)
    e = (e - low.astype(e.dtype)).astype(xp.float32)
    s = (m - _f(1.0)) / (m + _f(1.0))
    return e * LN2 + _f(2.0) * s * _horner(s * s, LOG_SERIES)


def _sincos(xp, u):
    """(cos, sin) of 2 pi u for float32 u in [0, 1): the quadrant exactly, then series on [0, pi/2)."""
    t = u * _f(4.0)
    q = xp.floor(t)
    a = (t - q) * HALF_PI
    a2 = a * a
    c = _horner(a2, COS_SERIES)
    s = a * _horner(a2, SIN_SERIES)
    q = q.astype(xp.int32)
    cos = xp.where(q == 0, c, xp.where(q == 1, -s, xp.where(q == 2, -c, s)))
    sin = xp.where(q == 0, s, xp.where(q == 1, c, xp.where(q == 2, -s, -c)))
    return cos, sin


def normal32(xp, key, n: int):
    """float32 standard normals: words (w0, w1) and (w2, w3) of each block give two each by Box-Muller."""
    w = words(xp, key, 2 * n + (2 * n) % 4).reshape(-1, 2)
    u1 = ((w[:, 0] >> xp.uint32(8)) + xp.uint32(1)).astype(xp.float32) * _f(2.0**-24)   # (0, 1]
    u2 = (w[:, 1] >> xp.uint32(8)).astype(xp.float32) * _f(2.0**-24)                    # [0, 1)
    r = xp.sqrt(_f(-2.0) * _log(xp, u1))
    cos, sin = _sincos(xp, u2)
    return xp.stack((r * cos, r * sin), axis=1).reshape(-1)[:n]


def normal(xp, key, n: int, scale: float, offset: float = 0.0):
    return float(offset) + float(scale) * normal32(xp, key, n).astype(xp.float64)


def _lit(x: np.float32) -> str:
    return f"{float(x).hex()}f"


def _series(name: str, coefs) -> str:
    body = f"t * {_lit(coefs[-1])}"
    for c in reversed(coefs[1:-1]):
        body = f"({body} + {_lit(c)}) * t"
    return f"__device__ __forceinline__ float {name}(float t) {{ return {body} + {_lit(coefs[0])}; }}\n"


_DEVICE = r"""
__device__ __forceinline__ void kw_philox(unsigned long long b, const unsigned int* key, unsigned int* out) {
    unsigned int c0 = (unsigned int)b, c1 = (unsigned int)(b >> 32), c2 = key[2], c3 = key[3];
    unsigned int k0 = key[0], k1 = key[1];
    #pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        unsigned long long p0 = (unsigned long long)c0 * 0xD2511F53ull, p1 = (unsigned long long)c2 * 0xCD9E8D57ull;
        unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
        c1 = (unsigned int)p1; c3 = (unsigned int)p0; c0 = n0; c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
__device__ __forceinline__ float kw_log(float u) {
    int e;
    float m = frexpf(u, &e);
    if (m < SQRT_HALF) { m = m * 2.0f; e -= 1; }
    float s = (m - 1.0f) / (m + 1.0f);
    return (float)e * LN2 + 2.0f * s * kw_log_series(s * s);
}
__device__ __forceinline__ void kw_pair(unsigned int w0, unsigned int w1, float* z) {
    float u1 = (float)((w0 >> 8) + 1u) * 0x1p-24f, u2 = (float)(w1 >> 8) * 0x1p-24f;
    float r = sqrtf(-2.0f * kw_log(u1));
    float t = u2 * 4.0f, q = floorf(t), a = (t - q) * HALF_PI, a2 = a * a;
    float c = kw_cos_series(a2), s = a * kw_sin_series(a2);
    int k = (int)q;
    float cs = k == 0 ? c : k == 1 ? -s : k == 2 ? -c : s;
    float sn = k == 0 ? s : k == 1 ? c : k == 2 ? -s : -c;
    z[0] = r * cs; z[1] = r * sn;
}
extern "C" __global__ void kw_uniform_f32(float* out, long long n, unsigned int k0, unsigned int k1, unsigned int k2,
                                          unsigned int k3, double base, double span) {
    const unsigned int key[4] = {k0, k1, k2, k3};
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; 4 * b < n; b += stride) {
        unsigned int w[4];
        kw_philox((unsigned long long)b, key, w);
        #pragma unroll
        for (int j = 0; j < 4; ++j)
            if (4 * b + j < n) out[4 * b + j] = (float)(base + span * ((double)(w[j] >> 8) * 0x1p-24));
    }
}
extern "C" __global__ void kw_normal_f32(float* out, long long n, unsigned int k0, unsigned int k1, unsigned int k2,
                                         unsigned int k3, double offset, double scale) {
    const unsigned int key[4] = {k0, k1, k2, k3};
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; 4 * b < n; b += stride) {
        unsigned int w[4];
        float z[4];
        kw_philox((unsigned long long)b, key, w);
        kw_pair(w[0], w[1], z);
        kw_pair(w[2], w[3], z + 2);
        #pragma unroll
        for (int j = 0; j < 4; ++j)
            if (4 * b + j < n) out[4 * b + j] = (float)(offset + scale * (double)z[j]);
    }
}
"""


def device_source() -> str:
    """The device kernels' CUDA source, their float32 constants written exactly as the NumPy definition's."""
    head = "".join(f"#define {name} {_lit(v)}\n" for name, v in (("LN2", LN2), ("HALF_PI", HALF_PI),
                                                                  ("SQRT_HALF", SQRT_HALF)))
    head += _series("kw_log_series", LOG_SERIES) + _series("kw_sin_series", SIN_SERIES)
    head += _series("kw_cos_series", COS_SERIES)
    return head + _DEVICE


@functools.cache
def _kernels(cp):
    mod = cp.RawModule(code=device_source(), options=("--fmad=false", "-std=c++17"), name_expressions=None)
    return mod.get_function("kw_uniform_f32"), mod.get_function("kw_normal_f32")


@functools.cache
def _sms(cp, device: int) -> int:
    return int(cp.cuda.Device(device).attributes["MultiProcessorCount"])


def device_float32(cp, dst, kind: str, key, a: float, b: float, sms: int | None = None) -> None:
    """``dst`` (flat, contiguous float32 on the device) drawn in place: ``uniform`` with (a, b) = (low + offset,
    high - low), ``normal`` with (a, b) = (offset, scale); the bits ``uniform`` / ``normal`` give, rounded to float32."""
    n = int(dst.size)
    if n == 0:
        return
    uni, nor = _kernels(cp)
    blocks = -(-n // 4)
    if sms is None:
        sms = _sms(cp, cp.cuda.Device().id)
    grid = max(1, min(-(-blocks // 256), sms * 32))
    args = (dst, np.int64(n), *(np.uint32(k) for k in key), np.float64(a), np.float64(b))
    (uni if kind == "uniform" else nor)((grid,), (256,), args)
