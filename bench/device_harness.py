"""The sandbox's device harness (``sandbox.worker.harness.Harness``) in this process, for the benchmarks that time
its own steps on a GPU."""

from __future__ import annotations


def device_harness():
    """(the Harness, (arch, cubin, lowered names) of harness.cu) on the current CUDA device; raises without CuPy or
    a device (the benchmarks print one error and exit 3)."""
    import cupy as cp

    from sandbox.host.gpu import compile_harness
    from sandbox.worker.harness import Harness

    arch = f"sm_{cp.cuda.Device().compute_capability}"
    compiled = (arch, *compile_harness(arch))
    return Harness(*compiled), compiled
