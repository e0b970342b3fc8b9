"""The device's own ceilings, measured once per GPU: copy bandwidth and FP32 / FP16 matmul rates.

These are what "% of roofline" is relative to, and what the hardware-floor check uses. They are
measured with the vendor's own paths (device-to-device copy, cuBLAS through CuPy), median of
repeated timed runs after warm-up.
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


def measure() -> dict:
    """Run in a GPU worker. Returns bytes/s and FLOP/s (TF32 stays off: CuPy's default)."""
    import cupy as cp

    n = 1 << 28  # 1 GiB of float32 each way
    src = cp.ones(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    t_copy = _time(cp, lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, 0), 20)
    del src, dst
    m = 8192
    out = {"copy_bytes_per_s": 2 * (1 << 30) / t_copy}
    for label, dtype in (("fp32_flops", cp.float32), ("fp16_tensor_flops", cp.float16)):
        a = cp.random.standard_normal((m, m), dtype=cp.float32).astype(dtype)
        b = cp.random.standard_normal((m, m), dtype=cp.float32).astype(dtype)
        c = cp.empty((m, m), dtype=dtype)
        t = _time(cp, lambda: cp.matmul(a, b, out=c), 10)
        out[label] = 2 * m**3 / t
        del a, b, c
    cp.get_default_memory_pool().free_all_blocks()
    out["method"] = "D2D memcpy of 1 GiB (read+write bytes); cupy.matmul 8192^3 (cuBLAS), median of timed runs"
    return out
