"""The program Nsight Compute profiles: ``python -m sandbox.worker.profile_target REQUEST.json``, or, started
ahead of its request, ``python -m sandbox.worker.profile_target --wait SPARE.json`` (``wait_then_run``).

Like a GPU worker, it runs only trusted host code: it loads the candidate's cubin, allocates guarded
inputs and outputs at the requested sizes, generates the inputs from a seed, runs the resolved plan
``warmup`` times and then once more (the run ncu profiles), and writes its status as JSON to
``status_file``: ``ran``, ``launch_error`` or ``crashed``, with the error, and where its seconds went
(``split_s``: imports, CUDA context and harness, module load, guarded buffers, inputs, launches).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from .stopwatch import Stopwatch


def run(req: dict) -> dict:
    """The request in one go: start up, then profile (``profiled``)."""
    watch = Stopwatch()
    with watch("imports"):   # the harness module and CuPy, timed apart from the CUDA context
        importlib.import_module(f"{__package__}.harness")
    with watch("context"):
        h = _harness(req)
    if isinstance(h, dict):
        return h
    return profiled(h, req, watch, ranged=False)


def wait_then_run(spare: dict) -> dict:
    """A run started ahead (``sandbox.host.profiler``'s spare): up to the CUDA context and the harness, then wait
    for its request (``ahead.wait_for_request``), and profile it with the profiled launches between
    ``cudaProfilerStart`` and ``cudaProfilerStop`` (ncu knew no kernel names when it started). Its seconds are
    those from the request on."""
    from .ahead import wait_for_request

    h = _harness(spare)
    if isinstance(h, dict):
        return h
    req, late = wait_for_request(spare)
    if req is None:
        return {"status": "unused"}
    watch = Stopwatch()
    # a request that came before this run was up waited for its start-up: how long, in the profile's seconds
    watch.seconds["start-up still running"] = late
    return profiled(h, req, watch, ranged=True)


def _harness(req: dict):
    """The device harness of ``req["arch"]`` and ``req["harness_cubin"]`` with its CUDA context up, or the status
    of a context that broke."""
    from .harness import Harness, Poisoned

    try:
        h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
        h.sync()
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return h


def profiled(h, req: dict, watch: Stopwatch, ranged: bool) -> dict:
    """Load the cubin, allocate guarded buffers, generate the inputs, run the plan ``warmup`` times and once more
    (``ranged``: that last run inside a profiler range); ``watch`` holds the seconds of the parts so far."""
    from .harness import LaunchFailed, Poisoned, generate_into

    try:
        with watch("load"):
            loaded = h.load(Path(req["cubin"]).read_bytes(), req["plan"])
        with watch("buffers"):
            ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["inputs"]}
            outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
            scratch = loaded.alloc_scratch()
            h.sync()
        with watch("inputs"):
            generate_into(h, ins, req["inputs"], req["seed"])
            arrays = {n: b.view for n, b in {**ins, **outs}.items()}
            h.sync()
            # the generator's temporaries go back to the device: ncu saves and restores the process's device memory
            # around every replay pass of the profiled kernel, and memory the pool merely holds would be copied too
            h.cp.get_default_memory_pool().free_all_blocks()
        with watch("launches"):
            for _ in range(req["warmup"]):
                loaded.launch(arrays, scratch)
            if ranged:
                h.sync()
                h.cp.cuda.profiler.start()
            loaded.launch(arrays, scratch)
            h.sync()
            if ranged:
                h.cp.cuda.profiler.stop()
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return {"status": "ran", "launches": (req["warmup"] + 1) * len(req["plan"]["launches"]),
            "split_s": {part: round(seconds, 4) for part, seconds in watch.seconds.items()}}


def main(argv: list[str]) -> int:
    from .harness import serve_request

    if argv[:1] == ["--wait"]:   # a run started ahead: its file names the status file too
        return serve_request(argv[1:], wait_then_run)
    return serve_request(argv, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
