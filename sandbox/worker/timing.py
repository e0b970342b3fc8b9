"""A/B timing in the GPU worker, where no launch of the candidate goes unobserved.

- Warm-up on one input set: the baseline, the vendor, then the candidate, each at least 3 launches and
  20 ms of its device time (at most 200); a kernel's launches queued in batches, checks behind each, read once a
  batch (``TimingStage._warm_up_queued``). The baseline and the vendor, where this worker timed them at these sizes in a stage
  that ended less than ``WARM_AGAIN_S`` before, are warmed up with the 3 launches only (``Recent``): their code,
  the GPU's clocks and this process are warm from that stage. The candidate always gets the whole warm-up.
- Rounds: fresh inputs every round (every listed distribution in turn) in rotating buffer sets larger
  than the L2, at least three where the device memory holds them; each set has its own output buffers for
  every implementation, so a kernel's time is measured in several placements of everything it reads and
  writes, and the result says which set each round used (``set_of_round``: the speedup's interval
  resamples placements, ``sandbox.judging.stats``); the candidate, the baseline and the vendor in a shuffled order, each after an L2 flush
  (a read: clean lines), CUDA events around the whole plan, which is queued in full behind a stream hold
  before its start event runs (``guards.StreamHold``: no host latency in a device time; a library call that
  waits for the device inside itself is timed as called). After ``min_rounds``, rounds stop once both
  medians are settled, the candidate has used its time budget, the wall cap is reached, or at the round
  cap, fixed before the first round from the budget and the baseline's warm-up time: a noisy candidate
  gets no more rounds than a steady one could.
- Then untimed launches of the candidate on the last round's inputs until its launch count reaches
  ``launches_to``, a count the host drew at random: no count of launches tells a kernel that the stage
  is over.
- Every launch of the candidate (warm-up, timed, untimed) is compared on the device with the baseline's
  output for the same inputs (``sandbox.judging.agreement``); the first that disagrees ends the stage, ``wrong``.
  A warm-up or untimed launch whose output is, bit for bit, the last one compared on these inputs is not compared
  again (``guards.Repeats``: a keyed hash and a seal drawn with each stored baseline output); a timed one always is.
  The candidate and the baseline write separate buffers; the baseline's is masked as soon as it is
  written, its scratch and the vendor's outputs wiped, so nothing the candidate can read holds an answer.
- After each timed launch, NVML's SM and memory clocks, temperature and power are read: the result's
  environment says what the rounds ran at (median, min, max), not what an idle GPU showed at the start.
- ``full_checks`` launches of the candidate are handed over (``harness.hand_over``) for a full comparison with
  the float64 reference, drawn per kind of launch (``PhaseDraw``): one of the warm-up, one of the untimed
  launches, the rest (at least one) of the timed rounds, each uniformly among the launches of its kind
  (reservoir sampling, decided after each launch). An error that the comparison with the baseline misses
  (under twice the tolerance) and that a kernel makes in every timed round is therefore always caught.
- Writes outside a launch's own buffers: every rotating set's inputs are hashed when generated, checked after
  each candidate launch on them and again before they are generated anew and at the end of the rounds; over
  the warm-up and over the untimed launches every buffer the stage holds that is idle there (the other sets'
  inputs and outputs, every implementation's outputs and the baseline's scratch) is fenced (``guards.Fence``);
  the outputs kept for the reference are hashed when kept and checked before the hand-over. A change is the
  candidate's rule broken, ``rejected``, naming the buffer.
- The baseline is the request's ``primary`` implementation: the task's starting kernel, or for a task
  imported from PyTorch the module run eagerly, whose outputs are copied into the baseline's buffers
  (after its timed region) and masked there; ``torch.compile`` is timed beside it, compiled by an untimed
  first call, and left out (with the reason) where it cannot compile.

This module keeps the order of the stage. Every launch goes through ``launcher.Launcher`` and its checks in one
order: ``launch_guards`` (guard bands, inputs, fences), ``baseline_agreement``, ``kept`` (the draw for the
reference), ``stage_clocks``; the buffers are ``stage_memory``'s, the rules of how long it runs ``rounds``'.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from pathlib import Path

from ..tasks.inputs import round_seed
from ..tasks.task_reference import load_reference
from ..wire import Impl, StageFailed, Time, Timed
from .baseline_agreement import BaselineAgreement, Disagreement
from .checks import Violation
from .draw import PhaseDraw
from .harness import Harness, LaunchFailed, generate_into
from .kept import KeptOutputs
from .launch_guards import LaunchGuards
from .launcher import GIVE_UP_HOLDS, Launcher, wipe
from .memory_plan import gib, is_out_of_memory, torch_peak
from .persisting_l2 import ResetAfterCandidate
from .rounds import (RECENT, UNTIMED_BATCH, WARM_AGAIN_S, WARM_UP_MAX, WARM_UP_MIN, WARM_UP_MS, Recent, enough,
                     round_cap, warm_up_batch, warming)
from .stage_clocks import ClockSampling
from .stage_memory import Inputs, StageMemory, TooLarge
from .stopwatch import Stopwatch

__all__ = ["GIVE_UP_HOLDS", "UNTIMED_BATCH", "WARM_AGAIN_S", "WARM_UP_MAX", "WARM_UP_MIN", "WARM_UP_MS", "Disagreement",
           "Recent", "TimingStage", "TooLarge", "round_cap", "run_timing", "warm_up_batch", "warming"]


def run_timing(h: Harness, req: Time) -> Timed | StageFailed:
    loaded = {}
    for name, spec in req.impls.items():
        if spec.cubin is not None:
            try:
                loaded[name] = h.load(spec.cubin, spec.plan)
            except LaunchFailed as exc:
                return StageFailed("launch_error", name, str(exc))
    reply = _run_stage(h, req, loaded)
    h.release_cached()
    return reply


def _run_stage(h: Harness, req: Time, loaded: dict) -> Timed | StageFailed:
    try:
        return TimingStage(h, req, loaded, RECENT).run()
    except TooLarge as exc:
        return StageFailed("too_large", "all", str(exc))
    except Violation as v:
        status = "rejected" if v.impl == "candidate" else "infrastructure"
        return StageFailed(status, v.impl, v.problems[0], "\n".join(v.problems))
    except LaunchFailed as exc:
        return StageFailed("launch_error", "candidate", str(exc))
    except Disagreement as exc:
        return StageFailed("wrong", "candidate", str(exc))
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        error = f"the device ran out of memory in the timing stage ({type(exc).__name__}: {first})"
    h.release_cached()  # out of the except block, whose traceback held the stage and its buffers
    return StageFailed("too_large", "all", f"{error}; {gib(h.free_bytes())} free once its buffers were released")


class TimingStage:
    """The order of the stage; each launch goes through the ``launcher`` and its checks, in this order: guard
    bands, inputs and fences (``guards``), the agreement with the baseline (``agreement``), the draw of launches
    kept for the reference (``kept``), persisting L2 lines reset after a candidate launch (``l2_reset``), the
    clocks (``clocks``)."""

    def __init__(self, h: Harness, req: Time, loaded: dict, recent: Recent | None = None):
        self.h, self.req, self.cp = h, req, h.cp
        self.recent = recent or Recent()   # a stage of its own: every implementation gets the whole warm-up
        self.keys = {name: Recent.key(name, spec, req.sizes, req.scalars) for name, spec in req.impls.items()
                     if name != "candidate"}
        self.warm_up_launches: dict[str, int] = {}
        self.rng = random.Random(req.order_seed)
        self.loaded, self.primary = loaded, req.primary
        self.callables = {name: _callable(spec, req.sizes) for name, spec in req.impls.items() if spec.cubin is None}
        base = req.impls.get(self.primary)
        # eager timed with TF32: the outputs the candidate is checked against are computed again with it off
        exact = (_callable(dataclasses.replace(base, tf32="off"), req.sizes)
                 if base is not None and base.tf32 != "off" else None)
        self.names = list(req.impls)
        self.unavailable: dict[str, str] = {}
        self.peaks: dict[str, int] = {}  # what each PyTorch implementation's first call allocated
        self.memory = StageMemory(h, req, loaded, {*loaded, self.primary}, self.names)
        self.guards = LaunchGuards(h, req.hash_seed)
        self.agreement = BaselineAgreement(h, req, self.memory, exact, self.rng)
        self.kept = KeptOutputs(h, PhaseDraw(req.full_checks, self.rng), req.hash_seed, self.primary)
        self.l2_reset, self.clocks = ResetAfterCandidate(h.persisting_l2, self.primary), ClockSampling()
        self.watch = Stopwatch(h.sync)  # where the stage's seconds go (inputs, launches, output checks, ...)
        self.launcher = Launcher(h, req, loaded, self.callables, self.memory,
                                 [self.guards, self.agreement, self.kept, self.l2_reset, self.clocks], self.watch)
        self.launches = self.launcher.launches

    def run(self) -> Timed:
        req, limits = self.req, self.req.limits
        self.clocks.begin()
        t_begin = time.perf_counter()
        inputs = self._generate(req.seed, 0, 0)
        self._first_calls(inputs)
        self._fit()
        samples = {n: [] for n in self.names}
        walls = {n: [] for n in self.names}
        set_of_round, orders = [], []
        self.guards.raise_fence(self.memory.idle(inputs, every_writer=True))
        baseline_ms = self._warm_up(inputs)
        self.guards.check_fence("during the warm-up")
        cap = round_cap(limits.budget_ms, baseline_ms, limits.min_rounds, limits.max_rounds)
        r, variants = 0, len(req.input_variants)
        while True:
            index = (r // variants) % self.memory.n_sets  # every set sees every distribution
            with self.watch("inputs"):
                inputs = self._generate(round_seed(req.seed, r), r % variants, index)
            set_of_round.append(index)
            order = self.names[:]
            self.rng.shuffle(order)
            orders.append(order)
            for name in order:
                ms, wall = self.launcher.timed(name, inputs, f"timed round {r}")
                samples[name].append(ms)
                walls[name].append(wall)
            if self.agreement.pending:
                raise RuntimeError("a candidate output of the round was left unchecked")
            r += 1
            if r >= limits.min_rounds and enough(limits, samples, cap, time.perf_counter() - t_begin, self.primary):
                break
        self.guards.check_inputs(self.memory.sets[:self.memory.n_sets], "during the timed rounds")
        self.guards.raise_fence(self.memory.idle(inputs, every_writer=False))
        with self.watch("untimed launches"):
            self._untimed(inputs)
        self.guards.check_fence("during the untimed launches")
        self.guards.lower_fence()
        inputs = None
        self.memory.release()
        self.h.release_cached()  # the sets' memory back to the device before the hand-over's copies are made
        with self.watch("hand-over"):
            full = self.kept.save(Path(req.data_dir), req.ipc)
        self.recent.finished([self.keys[n] for n in self.names if n in self.keys], time.monotonic())
        return Timed(rounds=r, round_cap=cap, sets=self.memory.n_sets, set_of_round=set_of_round,
                     flush_bytes=self.launcher.flush_bytes, samples=samples, walls=walls, full=full,
                     launches=self.launches["candidate"], repeated=self.agreement.repeated,
                     warm_up=dict(self.warm_up_launches), clocks=self.clocks.record(), orders=orders,
                     persisting_l2=self.l2_reset.record(),
                     gpu_s=time.perf_counter() - t_begin, unavailable=self.unavailable,
                     launch_hold=self.launcher.hold_record(self.names),
                     split_s=self.watch.report(time.perf_counter() - t_begin), memory=self.memory.memory)

    def _generate(self, seed: int, variant: int, index: int) -> Inputs:
        buffers = self.memory.sets[index]
        self.guards.note_inputs(index, buffers)   # before the evidence is overwritten
        generate_into(self.h, buffers, self.req.input_variants[variant], seed)
        return Inputs(buffers, self.guards.generated(index, buffers), seed, variant, index)

    def _first_calls(self, inputs: Inputs) -> None:
        """One untimed call of every PyTorch implementation (torch.compile compiles here); one that fails is
        left out with the reason, unless it is the baseline the candidate is checked against."""
        for name, fn in list(self.callables.items()):
            if self.req.impls[name].torch is None:
                continue
            peak: list[int] = []
            try:
                with torch_peak(peak):
                    produced = fn(self.cp, **{n: b.view for n, b in inputs.buffers.items()}, **self.req.sizes,
                                  **self.req.scalars)
                wipe(self.h, produced.values(), inputs.buffers)  # as after every call: no answer left to read
                self.h.sync()
                self.peaks[name] = peak[0]
            except Exception as exc:
                if name == self.primary:
                    if is_out_of_memory(exc):
                        raise TooLarge(f"the baseline {name} ran out of device memory at this size: "
                                       f"{(str(exc).strip().splitlines() or [''])[0][:300]}") from None
                    raise
                self.names.remove(name)
                self.unavailable[name] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"

    def _fit(self) -> None:
        """The memory plan from the first calls' measured memory (``StageMemory.fit``): what it leaves out is not
        timed, with the reason."""
        for name, why in self.memory.fit(self.names, self.peaks).items():
            if name in self.names:
                self.names.remove(name)
                self.callables.pop(name, None)
                self.unavailable[name] = why
        self.kept.on_host = self.memory.kept_on_host

    def _warm_up(self, inputs: Inputs) -> float:
        """Every implementation, the baseline first (its output is what the candidate's are checked
        against), each at least ``WARM_UP_MIN`` launches and ``WARM_UP_MS`` of its own device time (at most
        ``WARM_UP_MAX`` launches); returns the baseline's median warm-up time. A baseline or vendor this worker timed
        at these sizes in a stage that ended less than ``WARM_AGAIN_S`` ago gets ``WARM_UP_MIN`` launches only
        (``Recent``); the candidate always gets the whole warm-up. A kernel of the stage (the candidate, a CUDA
        baseline) is warmed up in queued batches (``_warm_up_queued``), a library call one call at a time."""
        order = [self.primary] + [n for n in self.names if n not in (self.primary, "candidate")] + ["candidate"]
        now = time.monotonic()
        baseline_ms: list[float] = []
        for name in order:
            ms = 0.0 if name in self.keys and self.recent.warm(self.keys[name], now) else WARM_UP_MS
            if name in self.loaded:
                with self.watch("warm-up, queued"):
                    times = self._warm_up_queued(name, inputs, ms)
            else:
                times = []
                while warming(times, ms):
                    times.append(self.launcher.timed(name, inputs, "warm-up")[0])
            self.warm_up_launches[name] = len(times)
            if name == self.primary:
                baseline_ms = times
        return statistics.median(baseline_ms)

    def _warm_up_queued(self, name: str, inputs: Inputs, ms: float = WARM_UP_MS) -> list[float]:
        """The warm-up of a kernel of the stage (at least ``WARM_UP_MIN`` launches and ``ms`` of device time), in
        batches of launches between events, queued with their checks and read in one transfer each; a batch's events
        then say how much warm-up is still wanted (``warm_up_batch``). No stream hold: these times only count the
        warm-up and fix the round cap (``round_cap``), which a host's launch latency does not move where it could
        matter. Returns each launch's device time, in milliseconds."""
        if name != self.primary and self.agreement.base_for is not inputs:
            raise RuntimeError("the candidate's warm-up has no baseline output for its inputs")
        times: list[float] = []
        while warming(times, ms):
            events = self.launcher.events(warm_up_batch(times, ms))
            self.launcher.read([self.launcher.launch(name, inputs, "warm-up", pair) for pair in events])
            times += [self.cp.cuda.get_elapsed_time(start, end) for start, end in events]
        return times

    def _untimed(self, inputs: Inputs) -> None:
        """Untimed launches of the candidate on the last round's inputs until its launch count reaches
        ``launches_to``: no L2 flush, stream hold or event between them, their checks read ``UNTIMED_BATCH``
        launches at a time in one transfer. The first launch with a problem ends the stage, named as a checked
        launch is."""
        if self.agreement.base_for is not inputs:
            raise RuntimeError("the untimed launches have no baseline output for their inputs")
        phase, batch = "untimed, after the timed rounds", []
        while self.launches["candidate"] < self.req.launches_to:
            batch.append(self.launcher.launch("candidate", inputs, phase))
            if len(batch) == UNTIMED_BATCH or self.launches["candidate"] >= self.req.launches_to:
                self.launcher.read(batch)
                batch = []


def _callable(spec: Impl, sizes: dict):
    """A vendor implementation (reference.py's vendor()), or PyTorch eager or torch.compile of the task's module
    in the TF32 mode it is timed in."""
    if spec.torch is not None:
        from ..pytorch.runtime import runtime_for

        return runtime_for(spec.task_folder).baseline(spec.torch, sizes, tf32_mode=spec.tf32)
    return load_reference(Path(spec.task_folder) / "reference.py").vendor
