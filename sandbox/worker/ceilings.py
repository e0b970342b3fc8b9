"""The device's own ceilings, measured in a GPU worker once per GPU (``sandbox.host.ceilings`` caches them):
memory bandwidth and FP32 / FP16 matmul rates.

These are what "% of roofline" is relative to, and what the hardware-floor check uses. They are
measured with the vendor's own paths where there is one (device-to-device copy, cuBLAS through
CuPy), median of repeated timed runs after warm-up. A copy both reads and writes; a stream that only
reads (a reduction, a matrix-vector product) runs faster than that, so the bandwidth ceiling is the
higher of the copy rate and a read-only streaming kernel's rate: the memory floor of a task is then
a true lower bound whatever its mix of reads and writes.
"""

from __future__ import annotations

import statistics


def _time(cp, fn, reps: int) -> float:
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


# Reads n4 float4 values, four independent loads in flight per thread per step; the store is
# guarded by a value the sum never takes, so the loads cannot be optimised away.
_READ_SOURCE = r"""
extern "C" __global__ void read_stream(const float4* __restrict__ x, long long n4, float never, float* sink) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
        acc += (a.x + a.y + a.z + a.w) + (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) + (d.x + d.y + d.z + d.w);
    }
    for (; i < n4; i += stride) {
        float4 a = x[i];
        acc += a.x + a.y + a.z + a.w;
    }
    if (acc == never) sink[0] = acc;
}
"""


def measure() -> dict:
    """Run in a GPU worker. Returns bytes/s and FLOP/s (TF32 stays off: CuPy's default)."""
    import cupy as cp

    out = _bandwidths(cp)
    for label, dtype in (("fp32_flops", cp.float32), ("fp16_tensor_flops", cp.float16)):
        out[label] = _matmul_rate(cp, dtype)
    cp.get_default_memory_pool().free_all_blocks()
    out["method"] = ("D2D memcpy of 1 GiB (read+write bytes); a read-only float4 stream over the same 1 GiB; "
                     "cupy.matmul 8192^3 (cuBLAS); median of timed runs")
    return out


def _bandwidths(cp) -> dict:
    """Copy (read + write bytes) and read-only streaming rates over 1 GiB of float32."""
    n = 1 << 28
    src = cp.ones(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    t_copy = _time(cp, lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, 0), 20)
    read = cp.RawKernel(_READ_SOURCE, "read_stream")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    args = (src, cp.int64(n // 4), cp.float32(-1.0), cp.zeros(1, dtype=cp.float32))  # a sum of ones is never -1
    t_read = _time(cp, lambda: read((sms * 8,), (256,), args), 20)
    return {"copy_bytes_per_s": 2 * src.nbytes / t_copy, "read_bytes_per_s": src.nbytes / t_read}


def _matmul_rate(cp, dtype, m: int = 8192) -> float:
    a = cp.random.standard_normal((m, m), dtype=cp.float32).astype(dtype)
    b = cp.random.standard_normal((m, m), dtype=cp.float32).astype(dtype)
    c = cp.empty((m, m), dtype=dtype)
    return 2 * m**3 / _time(cp, lambda: cp.matmul(a, b, out=c), 10)
