"""The timing stage's buffers on the device, planned before they are allocated (``memory_plan.plan_memory``):
rotating input sets, each with output buffers of its own for every implementation that writes into the
harness's buffers, and the kernels' scratch. The plan is made twice: with estimates before anything is
allocated, then from what the libraries' first calls took (``StageMemory.fit``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tasks.dtypes import np_dtype
from ..wire import Time
from .memory_plan import Needs, plan_memory


class TooLarge(Exception):
    """The stage does not fit in the device's memory at the task's size (the message names the bytes)."""


@dataclass
class Inputs:
    """One generated input set: its buffers, their hashes, and what generated it."""

    buffers: dict
    before: dict
    seed: int
    variant: int
    index: int  # which rotating set: the buffers of the inputs and of every implementation's outputs


class StageMemory:
    """The rotating sets (``sets``: inputs; ``set_outs``: writer -> outputs) and the loaded kernels' scratch.
    ``memory``: what the result says of the plan; ``kept_on_host``: where the plan keeps the reference's copies."""

    def __init__(self, h, req: Time, loaded: dict, writers: set[str], names: list[str]):
        self.h, self.req, self.loaded, self.writers = h, req, loaded, writers
        plan = plan_memory(self.needs(names, {}), h.free_bytes())  # the least of the stage must fit before it allocates
        if not plan.fits:
            raise TooLarge(plan.message)
        self.n_sets, self.kept_on_host, self.sets, self.set_outs, self.memory = 0, False, [], [], {}
        self.scratch = {n: impl.alloc_scratch() for n, impl in loaded.items()}
        self.allocate(1)  # the rest once the libraries' first calls have said what they take (``fit``)

    def needs(self, names: list[str], peaks: dict[str, int]) -> Needs:
        """What the stage holds with these implementations, each library's working memory as measured (``peaks``)
        or estimated."""
        req, out_bytes, in_bytes = self.req, _nbytes(self.req.outputs), _nbytes(self.req.input_variants[0])
        libraries = {}
        for name in names:
            spec = req.impls[name]
            if name in self.loaded:
                continue
            # until measured: a PyTorch module holds an intermediate as large as its inputs and its outputs
            estimate = in_bytes + out_bytes if spec.torch is not None else 2 * out_bytes
            libraries[name] = peaks.get(name, estimate)
        scratch = sum(s["count"] * np_dtype(s["dtype"]).itemsize for impl in self.loaded.values()
                      for s in impl.plan["scratch"])
        return Needs(input_bytes=in_bytes, output_bytes=out_bytes, input_buffers=len(req.input_variants[0]),
                     output_buffers=len(req.outputs), writers=len(self.writers), l2_bytes=self.h.l2_bytes,
                     scratch_bytes=scratch, kept=req.full_checks, flush_bytes=2 * self.h.l2_bytes,
                     generation_bytes=2 * in_bytes, libraries=libraries,
                     optional=tuple(n for n in ("compile", "vendor", "eager") if n != req.primary))

    def fit(self, names: list[str], peaks: dict[str, int]) -> dict[str, str]:
        """Plan the stage from the free memory and the libraries' measured first calls (what the stage holds
        already counts as free: the plan includes it), allocate the other sets; returns what is left out, and why."""
        needs = self.needs(names, peaks)
        held = needs.set_bytes + needs.scratch_bytes
        plan = plan_memory(needs, self.h.free_bytes() + held)
        if not plan.fits:
            raise TooLarge(plan.message)
        self.kept_on_host = plan.kept_on_host
        self.allocate(plan.sets)
        self.memory = {"sets": plan.sets, "wanted_sets": needs.wanted_sets(), "kept_on_host": plan.kept_on_host,
                       "need_bytes": plan.need_bytes, "free_bytes": plan.free_bytes, "left_out": sorted(plan.left_out)}
        return plan.left_out

    def allocate(self, n: int) -> None:
        h, req = self.h, self.req
        while len(self.sets) < n:
            self.sets.append({s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.input_variants[0]})
            self.set_outs.append({w: {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.outputs}
                                  for w in self.writers})
        self.n_sets = n

    def release(self) -> None:
        """Let go of the sets (before the hand-over's copies are made)."""
        self.sets = self.set_outs = None

    def outs(self, inputs: Inputs) -> dict[str, dict]:
        """Every implementation's output buffers for these inputs (those of their set)."""
        return self.set_outs[inputs.index]

    def idle(self, inputs: Inputs, every_writer: bool) -> dict:
        """Every buffer the stage holds that no launch in the coming span may write, by label: the other sets'
        inputs and outputs, and the baseline's scratch; in the set in use, the outputs of every implementation
        but the candidate unless ``every_writer`` (all of them run in the warm-up)."""
        out = {}
        for i in range(self.n_sets):
            if i != inputs.index:
                out.update({f"input {n!r} of rotating set {i}": b.raw for n, b in self.sets[i].items()})
            for w, bufs in self.set_outs[i].items():
                if i != inputs.index or (not every_writer and w != "candidate"):
                    out.update({f"the {w}'s output {n!r} of rotating set {i}": b.raw for n, b in bufs.items()})
        if not every_writer:
            for w, bufs in self.scratch.items():
                if w != "candidate":
                    out.update({f"the {w}'s scratch {n!r}": b.raw for n, b in bufs.items()})
        return out


def _nbytes(specs: list[dict]) -> int:
    return sum(int(np.prod(s["shape"])) * np_dtype(s["dtype"]).itemsize for s in specs)
