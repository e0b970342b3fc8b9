"""The program compute-sanitizer runs: ``python -m sandbox.worker.sanitize_target REQUEST.json``, or, started
ahead of its request, ``python -m sandbox.worker.sanitize_target --wait SPARE.json`` (``ahead.serve``).

Like a GPU worker, it runs only trusted host code. Unlike one, it gives every array its own
``cudaMalloc`` (CuPy's memory pool is off) of exactly its size rounded up to 256 bytes, with no
guard bands: memcheck knows the bounds of each allocation, so an access past an array is out of
bounds for it (a vectorized read that stays within the array's last 256-byte block is not). For each
requested size it generates the inputs from the seed, poisons outputs and scratch, runs the resolved
plan once and synchronizes: a ``wire.SanitizeCases``. It writes a ``wire.TargetRan`` to its ``status_file``:
``ran``, ``launch_error`` or ``crashed``, with the error, and where its seconds went (``split_s``: imports, CUDA
context and harness, module load, inputs, launches; the rest of a tool's run is the tool's own start-up and end).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..wire import SanitizeCases, TargetRan, TargetStart
from .ahead import harness_up, ran, serve
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


def start(begin: TargetStart, watch: Stopwatch):
    """Up to the CUDA context and the harness under the tool, CuPy's memory pool off (``ahead.harness_up``)."""
    return harness_up(begin, watch, pool=False)


def cases(h, req: SanitizeCases, watch: Stopwatch, ahead: bool) -> TargetRan:
    """Each case of the request: its plan at its sizes, on exact allocations, once (the same on a run started
    ``ahead``)."""
    from .harness import generate_into, poison_outputs

    cp = h.cp
    cubin = Path(req.cubin).read_bytes()
    loaded = None
    for case in req.cases:
        with watch("load"):
            loaded = h.load(cubin, case.plan) if loaded is None else loaded.with_plan(case.plan)
        with watch("inputs"):
            ins = {s["name"]: Exact(cp, s["dtype"], tuple(s["shape"])) for s in case.inputs}
            outs = {s["name"]: Exact(cp, s["dtype"], tuple(s["shape"])) for s in case.outputs}
            scratch = {s["name"]: Exact(cp, s["dtype"], (s["count"],)) for s in case.plan["scratch"]}
            generate_into(h, ins, case.inputs, req.seed)
            poison_outputs(outs, case.outputs, second=False)
            loaded.poison_scratch(scratch)
            h.sync()
        with watch("launches"):
            loaded.launch({n: b.view for n, b in {**ins, **outs}.items()}, scratch)
            h.sync()
    return ran(watch, cases=len(req.cases))


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:], start, cases, SanitizeCases))
