"""The sandbox's device harness (``sandbox.worker.harness.Harness``) in this process, for the benchmarks that time
its own steps on a GPU."""

from __future__ import annotations

import sys


def device_harness():
    """(the Harness, (arch, cubin, lowered names) of harness.cu) on the current CUDA device; raises without CuPy or
    a device (the benchmarks print one error and exit 3)."""
    import cupy as cp

    from sandbox.host.gpu import compile_harness
    from sandbox.worker.harness import Harness

    arch = f"sm_{cp.cuda.Device().compute_capability}"
    compiled = (arch, *compile_harness(arch))
    return Harness(*compiled), compiled


def harness_or_say(script: str):
    """``device_harness()``, or None once the one error of a benchmark without CuPy or a device is printed (the
    benchmark then exits 3)."""
    try:
        return device_harness()
    except Exception as exc:  # no CuPy, no device
        print(f"error: {type(exc).__name__}: {exc}: {script} needs a CUDA device", file=sys.stderr)
        return None


def baseline_or_say(task, arch: str):
    """(the task's baseline candidate, its compile info, its cubin) for ``arch``, or None once its compile log is
    printed as the one error (the benchmark then exits 3)."""
    from sandbox import load_candidate
    from sandbox.candidates.compiler import compile_source

    cand = load_candidate(task.baseline_path)
    info, cubin = compile_source(cand, arch)
    if cubin is None:
        print(f"error: {task.baseline_path} does not compile:\n{info.log}", file=sys.stderr)
        return None
    return cand, info, cubin
