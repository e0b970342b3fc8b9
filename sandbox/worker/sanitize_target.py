"""The program compute-sanitizer runs: ``python -m sandbox.worker.sanitize_target REQUEST.json``, or, started
ahead of its request, ``python -m sandbox.worker.sanitize_target --wait SPARE.json`` (``wait_then_run``).

Like a GPU worker, it runs only trusted host code. Unlike one, it gives every array its own
``cudaMalloc`` (CuPy's memory pool is off) of exactly its size rounded up to 256 bytes, with no
guard bands: memcheck knows the bounds of each allocation, so an access past an array is out of
bounds for it (a vectorized read that stays within the array's last 256-byte block is not). For each
requested size it generates the inputs from the seed, poisons outputs and scratch, runs the resolved
plan once and synchronizes. It writes its status as JSON to ``status_file``: ``ran``,
``launch_error`` or ``crashed``, with the error, and where its seconds went (``split_s``: imports, CUDA context
and harness, module load, inputs, launches; the rest of a tool's run is the tool's own start-up and end).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .stopwatch import Stopwatch

ROUND = 256


class Exact:
    """An array in an allocation of its own: the sanitizer's bounds are the array's."""

    def __init__(self, cp, dtype: str, shape: tuple[int, ...]):
        from ..tasks.dtypes import np_dtype

        self.cp = cp
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype(dtype).itemsize
        self.raw = cp.empty(max(ROUND, -(-self.nbytes // ROUND) * ROUND), dtype=cp.uint8)
        self.view = self.raw[:self.nbytes].view(np_dtype(dtype)).reshape(shape)

    def fill(self, value) -> None:
        self.view.fill(value)

    def memset(self, byte: int) -> None:
        self.cp.cuda.runtime.memset(self.raw.data.ptr, byte, self.nbytes)


def run(req: dict) -> dict:
    """The request in one go: start up (imports, the CUDA context and the harness under the tool), then its cases."""
    watch = Stopwatch()
    h = _start(req, watch)
    if isinstance(h, dict):
        return h
    return _cases(h, req, watch)


def wait_then_run(spare: dict) -> dict:
    """A run started ahead (``sandbox.host.sanitizer``'s spares): start up, then wait for the request
    (``ahead.wait_for_request``: the cubin, the cases and the seed) and run its cases. Its parts are those from the
    request on, and how long the request waited for the start-up."""
    from .ahead import wait_for_request

    h = _start(spare, Stopwatch())
    if isinstance(h, dict):
        return h
    req, late = wait_for_request(spare)
    if req is None:
        return {"status": "unused"}
    watch = Stopwatch()
    watch.seconds["start-up still running"] = late
    return _cases(h, req, watch)


def _start(req: dict, watch):
    """The harness with its CUDA context up (CuPy's memory pool off), or the status of a context that broke."""
    with watch("imports"):
        import cupy as cp

        from .harness import Harness, Poisoned

    cp.cuda.set_allocator(None)
    try:
        with watch("context"):   # the CUDA context and the harness module, under the tool
            h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
            h.sync()
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return h


def _cases(h, req: dict, watch) -> dict:
    """Each case of the request: its plan at its sizes, on exact allocations, once."""
    from .harness import LaunchFailed, Poisoned, generate_into, poison_outputs

    cp = h.cp
    try:
        cubin = Path(req["cubin"]).read_bytes()
        loaded = None
        for case in req["cases"]:
            with watch("load"):
                loaded = h.load(cubin, case["plan"]) if loaded is None else loaded.with_plan(case["plan"])
            with watch("inputs"):
                ins = {s["name"]: Exact(cp, s["dtype"], tuple(s["shape"])) for s in case["inputs"]}
                outs = {s["name"]: Exact(cp, s["dtype"], tuple(s["shape"])) for s in case["outputs"]}
                scratch = {s["name"]: Exact(cp, s["dtype"], (s["count"],)) for s in case["plan"]["scratch"]}
                generate_into(h, ins, case["inputs"], req["seed"])
                poison_outputs(outs, case["outputs"], second=False)
                loaded.poison_scratch(scratch)
                h.sync()
            with watch("launches"):
                loaded.launch({n: b.view for n, b in {**ins, **outs}.items()}, scratch)
                h.sync()
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return {"status": "ran", "cases": len(req["cases"]),
            "split_s": {part: round(seconds, 4) for part, seconds in watch.seconds.items()}}


def main(argv: list[str]) -> int:
    from .harness import serve_request

    if argv[:1] == ["--wait"]:   # a run started ahead: its file names the status file too
        return serve_request(argv[1:], wait_then_run)
    return serve_request(argv, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
