"""The candidate launches of the timing stage kept for the full comparison with the float64 reference, drawn per
kind of launch (``draw.PhaseDraw``: one of the warm-up, one of the untimed launches, the rest of the timed rounds,
each uniformly among the launches of its kind, decided after each launch). A copy kept on the device is hashed when
kept and checked before the hand-over (``harness.hand_over``); one in host memory is out of every kernel's reach."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..wire import KeptLaunch
from .checks import Violation
from .draw import PhaseDraw
from .guards import Fence
from .harness import hand_over


@dataclass
class Kept:
    """A launch the draw holds: what it ran on (``record``, its files not yet handed over), its outputs' copies, and
    their hashes where they are on the device."""

    record: KeptLaunch
    out: dict
    hashes: dict


class KeptOutputs:
    """A check of the launcher (``launcher.Launcher``): each candidate launch is offered to the draw when queued;
    ``save`` hands the kept ones over. ``on_host``: where the memory plan keeps the copies."""

    part = "output checks"

    def __init__(self, h, draw: PhaseDraw, hash_seed: int, primary: str):
        self.h, self.draw, self.seed, self.primary = h, draw, hash_seed, primary
        self.on_host = False
        self.kept: dict[int, Kept] = {}  # slot -> a candidate launch the draw holds

    def queue(self, launch):
        if launch.kernel is None or launch.name == self.primary:
            return None
        slot = self.draw.offer(launch.phase)
        if slot is None:
            return None
        if slot not in self.kept:
            self.kept[slot] = Kept(None, {n: self._empty(b.view) for n, b in launch.outs.items()}, {})
        out = self.kept[slot].out
        for n, b in launch.outs.items():
            if self.on_host:
                b.view.get(out=out[n])
            else:
                self.h.cp.copyto(out[n], b.view)
        hashes = {} if self.on_host else {n: self.h.hash_array(a, self.seed) for n, a in out.items()}
        inputs = launch.inputs
        self.kept[slot] = Kept(KeptLaunch(launch.number, launch.phase, inputs.seed, inputs.variant, {}), out, hashes)
        return None

    def read(self, launch, queued, values: list) -> None:
        """Nothing to read: a copy is checked once, before the hand-over (``save``)."""

    def _empty(self, like):
        """Where a kept output lives: on the device, or where the memory plan says so, in host memory."""
        if self.on_host:
            return np.empty(like.shape, like.dtype)
        return self.h.cp.empty_like(like)

    def save(self, data_dir: Path, ipc: bool) -> list[KeptLaunch]:
        """The kept launches, in launch order, their outputs handed over, once their copies on the device are seen
        to be as kept."""
        kept = self.kept.values()
        arrays = {f"the copy of output {n!r} of launch {k.record.launch} kept for the reference": a
                  for k in kept for n, a in k.out.items() if n in k.hashes}
        check = Fence(self.h, self.seed)
        check.raise_(arrays, [d for k in kept for d in k.hashes.values()])
        problems = check.broken("a launch wrote outside its own buffers after it was kept")
        if problems:
            raise Violation("candidate", problems)
        full = []
        for k in sorted(kept, key=lambda k: k.record.launch):
            files = {n: hand_over(self.h, a, data_dir / f"timed-{k.record.launch}-{n}.npy", ipc and not self.on_host)
                     for n, a in k.out.items()}
            full.append(dataclasses.replace(k.record, files=files))
        return full
