"""How much of the device the timing stage may take, decided before it allocates (``plan_memory``).

The stage wants several rotating input sets (each with an output buffer per implementation that writes into
the harness's buffers), the candidate's scratch, copies of the candidate outputs kept for the full comparison
with the reference, the L2-flush buffer, the inputs' generation, and the working memory of every library
implementation (PyTorch eager, torch.compile, the vendor). Where the device cannot hold all of that, the plan
gives up, in this order: keeping the sampled candidate outputs on the device (they go to host memory: it
costs only untimed copies), rotating sets (down to one), then optional implementations (``optional``, in that
order; never the candidate or the baseline it is checked against). Where even the least of it cannot fit, the
plan says so with the bytes needed and available, and the stage answers ``too_large`` instead of allocating.

``plan_memory`` is arithmetic only (tested on the CPU with made-up free memory); the device-side helpers below
it read the free memory and what PyTorch's allocator used.
"""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

GUARD_BYTES = 2 * 65536 + 512       # the most a guarded buffer adds to its data (harness.GUARD_MAX both sides)
MARGIN_FRACTION = 0.05              # of the free memory: allocator rounding and fragmentation, library workspaces
MARGIN_MIN = 512 << 20              # CUDA context growth, cuBLAS/cuDNN workspaces
MAX_SETS = 64
HELD_SHARE = 0.25                   # cache held unused above this share of the device's free memory is handed back


@dataclass(frozen=True)
class Needs:
    """What a timing stage holds on the device, in bytes."""

    input_bytes: int                 # one rotating set's inputs
    output_bytes: int                # one implementation's outputs
    input_buffers: int               # guarded buffers per set's inputs (each adds its guard bands)
    output_buffers: int              # guarded buffers per implementation's outputs
    writers: int                     # implementations writing into the harness's buffers (kernels and the baseline)
    l2_bytes: int
    scratch_bytes: int = 0           # the loaded kernels' scratch, all of them
    kept: int = 0                    # candidate outputs kept for the full comparison with the reference
    flush_bytes: int = 0             # the L2-flush buffer
    generation_bytes: int = 0        # transient memory of one input generation
    libraries: dict[str, int] = field(default_factory=dict)  # library implementation -> its working memory
    optional: tuple[str, ...] = ()   # library implementations that may be left out, the first to go first

    @property
    def set_bytes(self) -> int:
        """One rotating set: its inputs and every writer's outputs, with their guard bands."""
        return (self.input_bytes + self.input_buffers * GUARD_BYTES
                + self.writers * (self.output_bytes + self.output_buffers * GUARD_BYTES))

    def wanted_sets(self) -> int:
        """Enough sets that their inputs are twice the L2, at least three placements of every buffer."""
        return min(MAX_SETS, max(3, math.ceil(2 * self.l2_bytes / max(self.input_bytes, 1))))

    def total(self, sets: int, kept_on_host: bool, libraries: dict[str, int]) -> int:
        kept = 0 if kept_on_host else self.kept * self.output_bytes
        return (sets * self.set_bytes + self.scratch_bytes + kept + self.flush_bytes + self.generation_bytes
                + sum(libraries.values()))


@dataclass(frozen=True)
class MemoryPlan:
    """What the stage allocates: ``sets`` rotating sets, the implementations in ``left_out`` not at all."""

    fits: bool
    sets: int
    kept_on_host: bool
    left_out: dict[str, str]        # implementation -> why it is not timed
    need_bytes: int                 # what the plan takes (or, where nothing fits, the least it would take)
    free_bytes: int                 # the device memory it was planned from
    budget_bytes: int               # of that, what the plan may use (the rest is the margin)
    message: str = ""               # where nothing fits: the bytes needed and available


def margin(free_bytes: int) -> int:
    return max(MARGIN_MIN, int(MARGIN_FRACTION * free_bytes))


def plan_memory(needs: Needs, free_bytes: int) -> MemoryPlan:
    """The most of the stage that fits in ``free_bytes`` of device memory (see the module's docstring)."""
    budget = max(0, free_bytes - margin(free_bytes))
    libraries = dict(needs.libraries)
    left_out: dict[str, str] = {}
    wanted = needs.wanted_sets()
    optional = [n for n in needs.optional if n in libraries]
    while True:
        for sets in range(wanted, 0, -1):
            for kept_on_host in (False, True):
                total = needs.total(sets, kept_on_host, libraries)
                if total <= budget:
                    return MemoryPlan(True, sets, kept_on_host, left_out, total, free_bytes, budget)
        if not optional:
            break
        name = optional.pop(0)
        left_out[name] = (f"left out: the device memory does not hold it beside one rotating set "
                          f"({gib(libraries[name])} of its own; {gib(budget)} usable of {gib(free_bytes)} free)")
        del libraries[name]
    least = needs.total(1, True, libraries)
    parts = [f"one rotating set {gib(needs.set_bytes)} (inputs {gib(needs.input_bytes)}, outputs "
             f"{gib(needs.output_bytes)} for each of {needs.writers} implementations)"]
    if libraries:
        parts.append("working memory of " + ", ".join(f"{n} {gib(b)}" for n, b in libraries.items()))
    if needs.scratch_bytes:
        parts.append(f"scratch {gib(needs.scratch_bytes)}")
    if needs.generation_bytes:
        parts.append(f"input generation {gib(needs.generation_bytes)}")
    message = (f"the timing stage does not fit in device memory at this size: it needs at least {gib(least)} "
               f"({'; '.join(parts)}) and {gib(budget)} of the {gib(free_bytes)} free can be used")
    return MemoryPlan(False, 0, True, left_out, least, free_bytes, budget, message)


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


# ---- on the device ------------------------------------------------------------------------------


def _torch_cuda():
    """torch.cuda where this process has already started it (importing torch costs seconds: never here)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return torch.cuda


def release_cached(cp) -> None:
    """Hand what CuPy's pool and PyTorch's caching allocator hold unused back to the device where it matters:
    the GPU and reference workers share the device, and what one holds cached the other cannot allocate. While
    the device has more than ``1 / HELD_SHARE`` times as much free, the cache stays and the next stage reuses
    it instead of asking the device again for each of its buffers. (Within the process nothing is lost either
    way: both allocators hand their cache back and retry when an allocation fails.)"""
    held = _cached_unused(cp)
    if held == 0 or held <= HELD_SHARE * int(cp.cuda.runtime.memGetInfo()[0]):
        return
    cp.get_default_memory_pool().free_all_blocks()
    cuda = _torch_cuda()
    if cuda is not None:
        cuda.empty_cache()


def _cached_unused(cp) -> int:
    """What CuPy's pool and PyTorch's caching allocator hold without using it."""
    cuda = _torch_cuda()
    torch_unused = int(cuda.memory_reserved()) - int(cuda.memory_allocated()) if cuda is not None else 0
    return int(cp.get_default_memory_pool().free_bytes()) + torch_unused


def free_device_bytes(cp) -> int:
    """Device memory this process could allocate: free on the device, and what its allocators hold unused."""
    return int(cp.cuda.runtime.memGetInfo()[0]) + _cached_unused(cp)


@contextmanager
def torch_peak(out: list):
    """Appends to ``out`` the most memory PyTorch allocated inside the block beyond what it held before."""
    cuda = _torch_cuda()
    before = 0
    if cuda is not None:
        before = int(cuda.memory_allocated())
        cuda.reset_peak_memory_stats()
    try:
        yield
    finally:
        cuda = _torch_cuda()   # the block may be where PyTorch started
        out.append(max(0, int(cuda.max_memory_allocated()) - before) if cuda is not None else 0)


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation, from CuPy, the CUDA runtime or PyTorch."""
    text = f"{type(exc).__name__}: {exc}"
    return ("OutOfMemoryError" in text or "cudaErrorMemoryAllocation" in text or "CUDA_ERROR_OUT_OF_MEMORY" in text
            or "out of memory" in text)
