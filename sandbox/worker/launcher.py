"""The one way the timing stage launches an implementation (``Launcher.launch``): a kernel's outputs and scratch
poisoned; where the launch is timed, the L2 flushed and the launch between two events, and where it is checked
alone, the stream held until the whole launch is queued (``guards.StreamHold``: no host latency in a device time;
a library call that waits for the device inside itself is timed as called); then every check queued behind the
launch, and read back with its batch in one transfer, in launch order. The checks own their state and are called
in one fixed order, each through two hooks: ``queue(launch)`` returns the device arrays to read back and a note, or
None where it has nothing to read; ``read(launch, note, values)`` gets those arrays' values and raises where the
launch broke a rule. A library
call's outputs are wiped once the checks have queued: nothing the candidate can read keeps an answer."""

from __future__ import annotations

import itertools
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

from .harness import poison_outputs

GIVE_UP_HOLDS = 3  # holds of the stage's own kernels that ran out (each a 50 ms wait) before timing goes on without


@dataclass
class Launch:
    """One launch of an implementation: ``number``, its count of launches with this one; ``kernel``: the loaded
    kernel, None for a library call (whose outputs are ``produced``); ``alone``: checked before anything else runs."""

    name: str
    inputs: object
    phase: str
    number: int
    alone: bool
    outs: dict
    scratch: dict
    kernel: object = None
    produced: dict | None = None
    wipe: list = field(default_factory=list)   # arrays a library call returned, wiped once the checks have queued
    queued: list = field(default_factory=list)  # per check: (device arrays to read back, its note) or None
    ms: float = 0.0
    wall: float = 0.0


class Launcher:
    """Launches the stage's implementations (``loaded`` kernels, library ``callables``) on ``memory``'s buffers,
    each launch's ``checks`` in their order; ``launches`` counts them per implementation."""

    def __init__(self, h, req, loaded: dict, callables: dict, memory, checks: list, watch):
        self.h, self.cp, self.req = h, h.cp, req
        self.loaded, self.callables, self.memory, self.checks, self.watch = loaded, callables, memory, checks, watch
        self.launches = {n: 0 for n in req.impls}
        self.start, self.end = self.cp.cuda.Event(), self.cp.cuda.Event()
        self._events: list = []   # (start, end) event pairs of queued launches, made at their first use
        self.flush_bytes = 0
        self.unheld: set[str] = set()  # implementations timed without the stream hold (they wait inside)
        self.hold = h.hold              # None where it cannot be set up: every launch timed after a synchronisation
        self._holds_before = (self.hold.held, self.hold.ran_outs) if self.hold else (0, 0)

    def timed(self, name: str, inputs, phase: str) -> tuple[float, float]:
        """One launch between the stage's events, held, checked alone: (event ms, host wall ms)."""
        launch = self.launch(name, inputs, phase, (self.start, self.end), alone=True)
        return launch.ms, launch.wall

    def events(self, n: int) -> list[tuple]:
        """``n`` (start, end) event pairs for queued launches (at most ``rounds.UNTIMED_BATCH``)."""
        while len(self._events) < n:
            self._events.append((self.cp.cuda.Event(), self.cp.cuda.Event()))
        return self._events[:n]

    def launch(self, name: str, inputs, phase: str, events: tuple | None = None, alone: bool = False) -> Launch:
        """The stage's one launch of an implementation (see the module's docstring). A launch ``alone`` is
        synchronised and its checks read before this returns; a queued one is read with its batch (``read``)."""
        h, kernel = self.h, self.loaded.get(name)
        outs, scratch = self.memory.outs(inputs).get(name, {}), self.memory.scratch.get(name, {})
        if kernel is not None:
            poison_outputs(outs, self.req.outputs, second=False)
            kernel.poison_scratch(scratch)
        with self.watch("launches") if alone else nullcontext():
            if events is not None:
                self.flush_bytes = h.flush_l2()
            held = alone and self.hold is not None and name not in self.unheld
            if held:
                self.hold.hold()  # the launch is queued in full before its start event runs (guards.StreamHold)
            elif alone:
                h.sync()
            t0 = time.perf_counter()
            produced = None
            try:
                if events is not None:
                    events[0].record(h.stream)
                if kernel is not None:
                    kernel.launch({n: b.view for n, b in {**inputs.buffers, **outs}.items()}, scratch)
                else:
                    produced = self.callables[name](self.cp, **{n: b.view for n, b in inputs.buffers.items()},
                                                    **self.req.sizes, **self.req.scalars)
                if events is not None:
                    events[1].record(h.stream)
            finally:
                if held:
                    self.hold.release()
            ms, wall = self._waited(name, events, held, t0) if alone else (0.0, 0.0)
        self.launches[name] += 1
        launch = Launch(name, inputs, phase, self.launches[name], alone, outs, scratch, kernel, produced,
                        list(produced.values()) if produced is not None else [], ms=ms, wall=wall)
        with self.watch("output checks") if alone else nullcontext():
            launch.queued = [check.queue(launch) for check in self.checks]
            wipe(h, launch.wipe, inputs.buffers)
            values = self._transfer([launch]) if alone else None
        if alone:
            self._read([launch], values, watched=True)
        return launch

    def _waited(self, name: str, events: tuple, held: bool, t0: float) -> tuple[float, float]:
        """Wait for a launch checked alone: (event ms, host wall ms). An implementation whose hold ran out is a
        library call that waits inside (timed as called from now on) or, for a kernel of the stage, a hold that
        keeps running out costs its limit each time: after ``GIVE_UP_HOLDS`` the stage times as before."""
        try:
            events[1].synchronize()
        except Exception as exc:
            raise self.h.classify(exc) from None
        if held and self.hold.ran_out():
            if name not in self.loaded:
                self.unheld.add(name)
            elif self.hold.ran_outs - self._holds_before[1] >= GIVE_UP_HOLDS:
                self.hold = None
        wall = (time.perf_counter() - t0) * 1e3
        return self.cp.cuda.get_elapsed_time(*events), wall

    def read(self, batch: list[Launch]) -> None:
        """The queued checks of a batch of launches, in one transfer, looked at in launch order."""
        self._read(batch, self._transfer(batch), watched=False)

    def _transfer(self, batch: list[Launch]):
        parts = [a for launch in batch for q in launch.queued if q is not None for a in q[0]]
        if not parts:
            return None
        try:
            host = self.cp.concatenate(parts).get()
            self.h.sync()
        except Exception as exc:
            raise self.h.classify(exc) from None
        return host

    def _read(self, batch: list[Launch], host, watched: bool) -> None:
        at = 0
        for launch in batch:
            calls = []
            for check, q in zip(self.checks, launch.queued):
                if q is None:
                    continue
                arrays, note = q
                values = []
                for a in arrays:
                    values.append(host[at: at + a.size])
                    at += a.size
                calls.append((check, note, values))
            for part, group in itertools.groupby(calls, key=lambda c: c[0].part):
                with self.watch(part) if watched else nullcontext():
                    for check, note, values in group:
                        check.read(launch, note, values)

    def hold_record(self, names: list[str]) -> dict:
        """What the result's environment says of the stream hold in this stage."""
        if self.h.hold is None:
            return {"held": 0, "ran_out": 0, "unheld": sorted(names), "error": self.h.hold_error}
        hold, (held, ran_out) = self.h.hold, self._holds_before
        rec = {"held": hold.held - held, "ran_out": hold.ran_outs - ran_out, "unheld": sorted(self.unheld)}
        if self.hold is None:
            rec["error"] = f"given up after {rec['ran_out']} holds ran out"
        return rec


def wipe(h, arrays, inputs: dict) -> None:
    """Zero what a library call returned, but for views of the inputs."""
    for array in arrays:
        if not _overlaps(array, inputs):
            h.fill(array, 0)


def _overlaps(array, buffers: dict) -> bool:
    """Whether ``array`` lies in the memory of one of ``buffers`` (a vendor output that is an input view)."""
    lo = array.data.ptr
    hi = lo + array.nbytes
    return any(b.raw.data.ptr < hi and lo < b.raw.data.ptr + b.raw.nbytes for b in buffers.values())
