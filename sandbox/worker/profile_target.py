"""The program Nsight Compute profiles: ``python -m sandbox.worker.profile_target REQUEST.json``, or, started
ahead of its request, ``python -m sandbox.worker.profile_target --wait SPARE.json`` (``ahead.serve``).

Like a GPU worker, it runs only trusted host code: it loads the candidate's cubin, allocates guarded
inputs and outputs at the requested sizes, generates the inputs from a seed, runs the resolved plan
``warmup`` times and then once more (the run ncu profiles): a ``wire.ProfileLaunches``. It writes a
``wire.TargetRan`` to its ``status_file``: ``ran``, ``launch_error`` or ``crashed``, with the error, and where its
seconds went (``split_s``: imports, CUDA context and harness, module load, guarded buffers, inputs, launches).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..wire import ProfileLaunches, TargetRan, TargetStart
from .ahead import harness_up, ran, serve
from .stopwatch import Stopwatch


def start(begin: TargetStart, watch: Stopwatch):
    """Up to the CUDA context and the harness (``ahead.harness_up``)."""
    return harness_up(begin, watch)


def profiled(h, req: ProfileLaunches, watch: Stopwatch, ahead: bool) -> TargetRan:
    """Load the cubin, allocate guarded buffers, generate the inputs, run the plan ``warmup`` times and once more;
    ``watch`` holds the seconds of the parts so far. On a run started ahead (``ahead``: ncu knew no kernel names
    when it started) that last run is between ``cudaProfilerStart`` and ``cudaProfilerStop``; a request in one go is
    profiled by ``-k`` and ``--launch-skip``."""
    from .harness import generate_into

    with watch("load"):
        loaded = h.load(Path(req.cubin).read_bytes(), req.plan)
    with watch("buffers"):
        ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.inputs}
        outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.outputs}
        scratch = loaded.alloc_scratch()
        h.sync()
    with watch("inputs"):
        generate_into(h, ins, req.inputs, req.seed)
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        h.sync()
        # the generator's temporaries go back to the device: ncu saves and restores the process's device memory
        # around every replay pass of the profiled kernel, and memory the pool merely holds would be copied too
        h.cp.get_default_memory_pool().free_all_blocks()
    with watch("launches"):
        for _ in range(req.warmup):
            loaded.launch(arrays, scratch)
        if ahead:
            h.sync()
            h.cp.cuda.profiler.start()
        loaded.launch(arrays, scratch)
        h.sync()
        if ahead:
            h.cp.cuda.profiler.stop()
    return ran(watch, launches=(req.warmup + 1) * len(req.plan["launches"]))


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], start, profiled, ProfileLaunches))
