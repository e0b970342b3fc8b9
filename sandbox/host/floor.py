"""The two floors a measured time is judged against, and what each does.

- The *naive roofline floor*: ``max(bytes / bandwidth, FLOPs / peak)`` with the task's ``[roofline]`` counts (for an
  imported task, the FLOPs of the module as written and every tensor read and written once). An algebraic
  rewrite does less work than that (the column sums of a matmul are one matrix-vector product; a sum of weights
  can be taken first), so a time below it is a **flag** with its evidence, and it triggers a stronger check
  (``stronger_sizes``: every check size and every held-out size, more trials each), never a rejection. A kernel
  that passes the stronger check is ``ok`` with the flag in its result.
- The *written floor*: the bytes of the outputs, which every kernel must write, at the measured memory bandwidth
  (the higher of copy and read-only streaming). Nothing computes an output faster than it can store it, so a time below it (divided by the same factor) is
  ``rejected``, on every task: a timer that stopped early, work left on another stream.

Hand-written suite tasks follow the same rule: their counts are the naive computation's too, and a rewrite that
beats them is what the search is for. The bytes a kernel must *read* are no floor: a rewrite may need only part
of an input (a max after a monotone step, a reduction that cancels), so only the outputs' bytes are certain.
"""

from __future__ import annotations

from ..judging.environment import Ceilings
from ..judging.result import BelowRoofline, Status, Timing
from ..tasks.dtypes import itemsize
from ..tasks.task import Task
from .ceilings import FLOOR_NOTE

EXTRA_TRIALS = 2   # the stronger check's trials per size, as a multiple of the distributions a trial rotates


def written_bytes(task: Task, sizes: dict[str, int]) -> int:
    """The bytes of every output at ``sizes``: what a kernel must store whatever it computes."""
    total = 0
    for out in task.spec.outputs:
        n = 1
        for d in task.shape(out, sizes):
            n *= int(d)
        total += n * itemsize(out.dtype)
    return total


def written_floor_ms(task: Task, sizes: dict[str, int], ceilings: Ceilings) -> float | None:
    bw = ceilings.memory_bandwidth()
    return written_bytes(task, sizes) / bw * 1e3 if bw else None


def judge_floors(task: Task, timing: Timing, ceilings: Ceilings, factor: float) -> tuple[Status, str, BelowRoofline | None]:
    """``rejected`` below the written floor / ``factor``; else ``ok``, with a ``BelowRoofline`` flag where the
    candidate's median is below the naive roofline floor / ``factor``."""
    med = timing.impls["candidate"].median_ms
    written = written_floor_ms(task, timing.sizes, ceilings)
    if written and med < written / factor:
        return Status.rejected, (f"{FLOOR_NOTE}: {med:.4g} ms is below the time to write the outputs "
                                 f"({written_bytes(task, timing.sizes):,} bytes at the measured memory bandwidth: "
                                 f"{written:.4g} ms) / {factor}"), None
    floor = timing.roofline_ms
    if not floor or med >= floor / factor:
        return Status.ok, "", None
    return Status.ok, "", BelowRoofline(
        median_ms=med, floor_ms=floor, factor=factor, flops=int(task.flops(timing.sizes)),
        bytes=int(task.bytes(timing.sizes)), bandwidth_bytes_per_s=ceilings.memory_bandwidth(),
        peak_flops_per_s=ceilings.peak_flops(task.spec.roofline.compute), written_floor_ms=written)


def stronger_sizes(task: Task, bench: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """The sizes of the stronger check: every check size and held-out size, and the benchmark size."""
    labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)]
    labelled += [(f"heldout[{i}]", s) for i, s in enumerate(task.spec.sizes.heldout)]
    return labelled + [("benchmark", bench)]
