"""A/B timing in the GPU worker, where no launch of the candidate goes unobserved.

- Warm-up on one input set: the baseline, the vendor, then the candidate, each at least 3 launches and
  20 ms of its device time (at most 200); a kernel's launches queued in batches, checks behind each, read once a
  batch (``_warm_up_queued``). The baseline and the vendor, where this worker timed them at these sizes in a stage
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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..judging.compare import spread_atol
from ..judging.stats import settled
from ..plumbing.envinfo import ClockSampler, clocks
from ..tasks.dtypes import np_dtype
from ..tasks.task_reference import load_reference
from ..wire import Clocks, Impl, KeptLaunch, RoundLimits, StageFailed, Time, Timed
from .checks import Violation, queue_violations, violations, violations_in
from .draw import PhaseDraw
from .guards import Fence, overwritten
from .harness import Harness, LaunchFailed, generate_into, hand_over, poison_outputs
from .memory_plan import Needs, gib, is_out_of_memory, plan_memory, torch_peak
from .stopwatch import Stopwatch

UNTIMED_BATCH = 16  # untimed (and queued warm-up) launches whose checks are read from the device in one transfer
WARM_UP_MIN, WARM_UP_MS, WARM_UP_MAX = 3, 20.0, 200   # each implementation's warm-up: launches, and device ms
WARM_AGAIN_S = 1.0   # a baseline or vendor timed in a stage that ended this recently is warmed up with the minimum
GIVE_UP_HOLDS = 3  # holds of the stage's own kernels that ran out (each a 50 ms wait) before timing goes on without


class TooLarge(Exception):
    """The stage does not fit in the device's memory at the task's size (the message names the bytes)."""


class Disagreement(Exception):
    """A candidate launch whose output disagrees with the baseline's for the same inputs."""


@dataclass
class Inputs:
    """One generated input set: its buffers, their hashes, and what generated it."""

    buffers: dict
    before: dict
    seed: int
    variant: int
    index: int  # which rotating set: the buffers of the inputs and of every implementation's outputs


class Recent:
    """When this worker last finished a timing stage with each implementation other than the candidate, by what
    was timed (its code or library call, and the sizes): a baseline or vendor timed in a stage that ended less
    than ``WARM_AGAIN_S`` ago needs only the minimum warm-up (``TimingStage._warm_up``)."""

    def __init__(self):
        self.ended: dict[str, float] = {}

    @staticmethod
    def key(name: str, spec: Impl, sizes: dict, scalars: dict) -> str:
        h = hashlib.sha256(repr((name, spec.task_folder, spec.torch, spec.tf32, sorted(sizes.items()),
                                 sorted(scalars.items()), json.dumps(spec.plan, sort_keys=True, default=str))).encode())
        h.update(spec.cubin or b"")
        return h.hexdigest()

    def warm(self, key: str, now: float) -> bool:
        return now - self.ended.get(key, -math.inf) < WARM_AGAIN_S

    def finished(self, keys, now: float) -> None:
        self.ended.update({k: now for k in keys})


RECENT = Recent()   # this worker process's


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
    def __init__(self, h: Harness, req: Time, loaded: dict, recent: Recent | None = None):
        self.h, self.req, self.cp = h, req, h.cp
        self.recent = recent or Recent()   # a stage of its own: every implementation gets the whole warm-up
        self.keys = {name: Recent.key(name, spec, req.sizes, req.scalars) for name, spec in req.impls.items()
                     if name != "candidate"}
        self.warm_up_launches: dict[str, int] = {}
        self.rng = random.Random(req.order_seed)
        self.loaded = loaded
        self.primary = req.primary
        self.callables = {name: _callable(spec, req.sizes) for name, spec in req.impls.items() if spec.cubin is None}
        base = req.impls.get(self.primary)
        # eager timed with TF32: the outputs the candidate is checked against are computed again with it off
        self.exact = (_callable(dataclasses.replace(base, tf32="off"), req.sizes)
                      if base is not None and base.tf32 != "off" else None)
        self.names = list(req.impls)
        self.unavailable: dict[str, str] = {}
        self.variants = req.input_variants
        self.writers = {*loaded, self.primary}
        self.peaks: dict[str, int] = {}  # what each PyTorch implementation's first call allocated
        self.needs = self._needs()
        plan = plan_memory(self.needs, h.free_bytes())  # with estimates: the least of the stage must fit before it allocates
        if not plan.fits:
            raise TooLarge(plan.message)
        self.n_sets, self.kept_on_host, self.sets, self.set_outs, self.memory = 0, False, [], [], {}
        self.scratch = {n: impl.alloc_scratch() for n, impl in loaded.items()}
        self._allocate_sets(1)  # the rest once the libraries' first calls have said what they take (``_fit``)
        self.tolerance = req.tolerance  # output name -> wire.Tolerance
        self.spread_atols: dict[tuple, float] = {}  # (input variant, output) -> atol grown to the spread there
        self.launches = {n: 0 for n in self.names}
        self.base_keys: dict = {}
        self.repeats: dict = {}   # output -> guards.Repeats of the stored baseline output (new with each one)
        self.repeated = 0         # candidate launches whose every output repeated one compared on the same inputs
        self.base_for = self.pending = None  # the inputs of the baseline's stored output; an unchecked candidate output
        self.draw = PhaseDraw(req.full_checks, self.rng)
        self.kept: dict[int, dict] = {}  # slot -> a candidate output the draw holds, for the reference comparison
        self.fence = Fence(h, req.hash_seed)
        self.input_hashes: dict[int, dict] = {}  # rotating set -> its inputs' hashes, as last generated
        self.input_notes: list = []  # inputs hashed before a set was generated anew, compared at the end (_note_inputs)
        self.start, self.end = self.cp.cuda.Event(), self.cp.cuda.Event()
        self._events = None  # a queued warm-up batch's (start, end) event pairs, made at its first use
        self.flush_bytes = 0
        self.watch = Stopwatch(h.sync)  # where the stage's seconds go (inputs, launches, output checks, ...)
        self.unheld: set[str] = set()  # implementations timed without the stream hold (they wait inside)
        self.hold = h.hold              # None where it cannot be set up: every launch timed after a synchronisation
        self._holds_before = (self.hold.held, self.hold.ran_outs) if self.hold else (0, 0)

    # ---- the stage ---------------------------------------------------------------------------

    def run(self) -> Timed:
        req = self.req
        clocks_start, sampler = clocks(), ClockSampler()
        t_begin = time.perf_counter()
        inputs = self._generate(req.seed, 0, 0)
        self._first_calls(inputs)
        self._fit()
        samples = {n: [] for n in self.names}
        walls = {n: [] for n in self.names}
        set_of_round: list[int] = []
        self.fence.raise_(self._idle(inputs, every_writer=True))
        baseline_ms = self._warm_up(inputs)
        self._check_fence("during the warm-up")
        cap = round_cap(req.limits.budget_ms, baseline_ms, req.limits.min_rounds, req.limits.max_rounds)
        r = 0
        while True:
            index = (r // len(self.variants)) % self.n_sets  # every set sees every distribution
            with self.watch("inputs"):
                inputs = self._generate((req.seed * 6364136223846793005 + r + 1) % 2**63,
                                        r % len(self.variants), index)
            set_of_round.append(index)
            order = self.names[:]
            self.rng.shuffle(order)
            for name in order:
                ms, wall = self._launch(name, inputs, f"timed round {r}")
                with self.watch("clocks"):
                    sampler.sample()
                samples[name].append(ms)
                walls[name].append(wall)
            if self.pending:
                raise RuntimeError("a candidate output of the round was left unchecked")
            r += 1
            if r >= req.limits.min_rounds and _enough(req.limits, samples, cap, time.perf_counter() - t_begin,
                                                      self.primary):
                break
        self._check_inputs(range(self.n_sets), "during the timed rounds")
        self.fence.raise_(self._idle(inputs, every_writer=False))
        with self.watch("untimed launches"):
            self._untimed(inputs)
        self._check_fence("during the untimed launches")
        self.fence.raise_({}, [])
        inputs = self.sets = self.set_outs = None
        self.h.release_cached()  # the sets' memory back to the device before the hand-over's copies are made
        with self.watch("hand-over"):
            full = self._save_kept(Path(req.data_dir), req.ipc)
        self.recent.finished([self.keys[n] for n in self.names if n in self.keys], time.monotonic())
        return Timed(rounds=r, round_cap=cap, sets=self.n_sets, set_of_round=set_of_round, flush_bytes=self.flush_bytes,
                     samples=samples, walls=walls, full=full, launches=self.launches["candidate"],
                     repeated=self.repeated, warm_up=dict(self.warm_up_launches),
                     clocks=Clocks(clocks_start, clocks(), sampler.summary()), gpu_s=time.perf_counter() - t_begin,
                     unavailable=self.unavailable, launch_hold=self._hold_record(),
                     split_s=self.watch.report(time.perf_counter() - t_begin), memory=self.memory)

    def _hold_record(self) -> dict:
        """What the result's environment says of the stream hold in this stage."""
        if self.h.hold is None:
            return {"held": 0, "ran_out": 0, "unheld": sorted(self.names), "error": self.h.hold_error}
        rec = {"held": self.h.hold.held - self._holds_before[0], "ran_out": self.h.hold.ran_outs - self._holds_before[1],
               "unheld": sorted(self.unheld)}
        if self.hold is None:
            rec["error"] = f"given up after {rec['ran_out']} holds ran out"
        return rec

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
                for array in produced.values():  # as after every call: nothing the candidate can read keeps an answer
                    if not _overlaps(array, inputs.buffers):
                        self.h.fill(array, 0)
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
                    times.append(self._launch(name, inputs, "warm-up")[0])
            self.warm_up_launches[name] = len(times)
            if name == self.primary:
                baseline_ms = times
        return statistics.median(baseline_ms)

    def _warm_up_queued(self, name: str, inputs: Inputs, ms: float = WARM_UP_MS) -> list[float]:
        """The warm-up of a kernel of the stage (at least ``WARM_UP_MIN`` launches and ``ms`` of device time), in
        batches queued on the stream: per launch its outputs poisoned, the L2 flushed, events around the launch,
        then its checks queued behind it (guard bands and input hashes; for the candidate the agreement with the
        baseline's output for these inputs, for the baseline its output masked). Each batch is read in one
        transfer once queued (``_read_queued``), and its events then say how much warm-up is still wanted
        (``warm_up_batch``). No stream hold: these times only count the warm-up and fix the round cap
        (``round_cap``), which a host's launch latency does not move where it could matter. Returns each launch's
        device time, in milliseconds."""
        if name != self.primary and self.base_for is not inputs:
            raise RuntimeError("the candidate's warm-up has no baseline output for its inputs")
        if self._events is None:
            self._events = [(self.cp.cuda.Event(), self.cp.cuda.Event()) for _ in range(UNTIMED_BATCH)]
        times: list[float] = []
        while warming(times, ms):
            events = self._events[:warm_up_batch(times, ms)]
            batch = [self._queued_launch(name, inputs, "warm-up", pair) for pair in events]
            self._read_queued(name, batch, inputs, "warm-up")
            times += [self.cp.cuda.get_elapsed_time(start, end) for start, end in events]
        return times

    # ---- device memory (``memory_plan``) --------------------------------------------------------

    def _needs(self) -> Needs:
        req, out_bytes, in_bytes = self.req, _nbytes(self.req.outputs), _nbytes(self.variants[0])
        libraries = {}
        for name in self.names:
            spec = req.impls[name]
            if name in self.loaded:
                continue
            # until measured: a PyTorch module holds an intermediate as large as its inputs and its outputs
            estimate = in_bytes + out_bytes if spec.torch is not None else 2 * out_bytes
            libraries[name] = self.peaks.get(name, estimate)
        scratch = sum(s["count"] * np_dtype(s["dtype"]).itemsize for impl in self.loaded.values()
                      for s in impl.plan["scratch"])
        return Needs(input_bytes=in_bytes, output_bytes=out_bytes, input_buffers=len(self.variants[0]),
                     output_buffers=len(req.outputs), writers=len(self.writers), l2_bytes=self.h.l2_bytes,
                     scratch_bytes=scratch, kept=req.full_checks, flush_bytes=2 * self.h.l2_bytes,
                     generation_bytes=2 * in_bytes, libraries=libraries,
                     optional=tuple(n for n in ("compile", "vendor", "eager") if n != self.primary))

    def _fit(self) -> None:
        """Plan the stage from the free memory and the libraries' measured first calls (what the stage holds
        already counts as free: the plan includes it), leave out what does not fit, allocate the other sets."""
        self.needs = self._needs()
        held = self.needs.set_bytes + self.needs.scratch_bytes
        plan = plan_memory(self.needs, self.h.free_bytes() + held)
        if not plan.fits:
            raise TooLarge(plan.message)
        for name, why in plan.left_out.items():
            if name in self.names:
                self.names.remove(name)
                self.callables.pop(name, None)
                self.unavailable[name] = why
        self.kept_on_host = plan.kept_on_host
        self._allocate_sets(plan.sets)
        self.memory = {"sets": plan.sets, "wanted_sets": self.needs.wanted_sets(), "kept_on_host": plan.kept_on_host,
                       "need_bytes": plan.need_bytes, "free_bytes": plan.free_bytes, "left_out": sorted(plan.left_out)}

    def _allocate_sets(self, n: int) -> None:
        h, req = self.h, self.req
        while len(self.sets) < n:
            self.sets.append({s["name"]: h.alloc(s["dtype"], s["shape"]) for s in self.variants[0]})
            self.set_outs.append({w: {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.outputs}
                                  for w in self.writers})
        self.n_sets = n

    # ---- one launch ----------------------------------------------------------------------------

    def _generate(self, seed: int, variant: int, index: int) -> Inputs:
        buffers = self.sets[index]
        self._note_inputs(index)   # before the evidence is overwritten
        generate_into(self.h, buffers, self.variants[variant], seed)
        before = {n: b.data_hash(self.req.hash_seed) for n, b in buffers.items()}
        self.input_hashes[index] = before
        return Inputs(buffers, before, seed, variant, index)

    # ---- writes outside a launch's own buffers -------------------------------------------------

    def _note_inputs(self, index: int, when: str = "while another set was in use") -> None:
        """Hash the inputs of a set (one about to be generated anew, say), for ``_check_inputs`` to compare with
        their hashes as generated: queued on the device, nothing waited for here (a round pays no transfer)."""
        before = self.input_hashes.get(index)
        if before:
            now = self.h.hash_arrays([self.sets[index][n].view for n in before], self.req.hash_seed)
            self.input_notes.append((index, list(before), now, [d.ravel() for d in before.values()], when))

    def _check_inputs(self, indices, when: str) -> None:
        """The inputs of these rotating sets still hash as generated, and those of sets generated anew did just
        before (``_note_inputs``): each candidate launch on a set checked them after it ran; this sees a write
        from a launch on another set. One transfer for all of them."""
        for i in indices:
            self._note_inputs(i, when)
        notes, self.input_notes = self.input_notes, []
        if not notes:
            return
        labels = [(f"input {n!r} of rotating set {i}", said) for i, names, _, _, said in notes for n in names]
        cat = self.cp.concatenate
        problems = overwritten(labels, cat([now for _, _, now, _, _ in notes]),
                               cat([part for _, _, _, then, _ in notes for part in then]))
        if problems:
            raise Violation("candidate", problems)

    def _idle(self, inputs: Inputs, every_writer: bool) -> dict:
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

    def _check_fence(self, when: str) -> None:
        problems = self.fence.broken(f"a launch wrote outside its own buffers {when}")
        if problems:
            raise Violation("candidate", problems)

    def _outs(self, inputs: Inputs) -> dict[str, dict]:
        """Every implementation's output buffers for these inputs (those of their set)."""
        return self.set_outs[inputs.index]

    def _launch(self, name: str, inputs: Inputs, phase: str) -> tuple[float, float]:
        outs = self._outs(inputs).get(name, {})
        if name in self.loaded:
            poison_outputs(outs, self.req.outputs, second=False)
            self.loaded[name].poison_scratch(self.scratch[name])
        with self.watch("launches"):
            ms, wall, produced = self._timed_launch(name, inputs, outs)
        with self.watch("output checks"):
            return self._after_launch(name, inputs, phase, outs, produced, ms, wall)

    def _timed_launch(self, name: str, inputs: Inputs, outs: dict):
        """Flush the L2, then time one launch of ``name``: (event ms, host wall ms, what a library call returned)."""
        h, cp = self.h, self.cp
        produced = None
        self.flush_bytes = h.flush_l2()
        held = self.hold is not None and name not in self.unheld
        if held:
            self.hold.hold()  # the launch is queued in full before its start event runs (guards.StreamHold)
        else:
            h.sync()
        t0 = time.perf_counter()
        try:
            self.start.record(h.stream)
            if name in self.loaded:
                self.loaded[name].launch({n: b.view for n, b in {**inputs.buffers, **outs}.items()}, self.scratch[name])
            else:
                produced = self.callables[name](cp, **{n: b.view for n, b in inputs.buffers.items()},
                                                **self.req.sizes, **self.req.scalars)
            self.end.record(h.stream)
        finally:
            if held:
                self.hold.release()
        try:
            self.end.synchronize()
        except Exception as exc:
            raise h.classify(exc) from None
        if held and self.hold.ran_out():
            if name not in self.loaded:
                self.unheld.add(name)  # a library call that waits for the device inside: timed as called from now on
            elif self.hold.ran_outs - self._holds_before[1] >= GIVE_UP_HOLDS:
                self.hold = None       # a hold that keeps running out costs its limit each time: timed as before
        wall = (time.perf_counter() - t0) * 1e3
        return cp.cuda.get_elapsed_time(self.start, self.end), wall, produced

    def _after_launch(self, name: str, inputs: Inputs, phase: str, outs: dict, produced, ms: float, wall: float):
        """Count the launch and check what it left: outputs, guard bands, inputs (``_launch``)."""
        h = self.h
        self.launches[name] += 1
        if name not in self.loaded:
            arrays = list(produced.values())
            if name == self.primary:  # untimed: the PyTorch baseline's outputs into the baseline's buffers
                if self.exact is not None:
                    produced = self.exact(self.cp, **{n: b.view for n, b in inputs.buffers.items()},
                                          **self.req.sizes, **self.req.scalars)
                    arrays += produced.values()
                for n, buf in outs.items():
                    buf.view[...] = produced[n].reshape(buf.view.shape)
                self._store_baseline(inputs)
            for array in arrays:  # nothing the candidate can read keeps an answer
                if not _overlaps(array, inputs.buffers):
                    self.h.fill(array, 0)
            if name == self.primary and self.pending and self.pending[0] is inputs:
                self._check(*self.pending)
            return ms, wall
        groups = {"input": inputs.buffers, "output": outs, "scratch": self.scratch[name]}
        problems = violations(h, groups, inputs.before, self.req.hash_seed)
        if problems:
            raise Violation(name, problems)
        if name == self.primary:
            self._store_baseline(inputs)
        else:
            self._keep(inputs, phase)
            self.pending = (inputs, phase)
        if self.pending and self.pending[0] is inputs and self.base_for is inputs:
            self._check(*self.pending)
        return ms, wall

    def _store_baseline(self, inputs: Inputs) -> None:
        """Mask the baseline's fresh output in place and wipe its scratch before anything else runs."""
        checks = self.h.agreement
        self.base_keys = {}
        for n, buf in self._outs(inputs)[self.primary].items():
            tol = self.tolerance[n]
            if tol.spread and (inputs.variant, n) not in self.spread_atols:   # once per variant: one transfer
                self.spread_atols[(inputs.variant, n)] = spread_atol(self.cp, buf.view, tol.atol, tol.spread)
            self.base_keys[n] = checks.new_keys()
            self.repeats[n] = checks.repeats()
            checks.mask(buf.view, self.base_keys[n])
        if self.primary in self.loaded:
            self.loaded[self.primary].poison_scratch(self.scratch[self.primary], every=True)
        self.base_for = inputs

    def _check(self, inputs: Inputs, phase: str) -> None:
        checks = self.h.agreement
        self.pending = None
        outs = self._outs(inputs)
        for n, buf in outs["candidate"].items():
            masked, keys = outs[self.primary][n].view, self.base_keys[n]
            atol, rtol = self._tolerance(inputs, n)
            found = checks.agree(buf.view, masked, keys, atol, rtol, self.rng.getrandbits(64))   # no Repeats: in full
            self._raise_if_disagrees(found, inputs, n, self.launches["candidate"], phase, intact=True)

    def _tolerance(self, inputs: Inputs, name: str) -> tuple[float, float]:
        """(atol, rtol) of output ``name`` on these inputs: atol grown to the spread of the baseline's output."""
        tol = self.tolerance[name]
        return self.spread_atols.get((inputs.variant, name), tol.atol), tol.rtol

    def _raise_if_disagrees(self, found, inputs: Inputs, name: str, launch: int, phase: str, intact: bool) -> None:
        """``Disagreement`` naming the launch, where ``found`` (an ``Agreement``) says output ``name`` disagrees;
        ``intact``: the candidate's output buffer still holds that launch's output (its first bad value is shown)."""
        verdict = found.verdict()
        if not verdict:
            return
        value = ""
        if intact and found.first is not None:
            outs = self._outs(inputs)
            got = outs["candidate"][name].view.reshape(-1)[found.first].item()
            base = self.h.agreement.unmasked(outs[self.primary][name].view, self.base_keys[name], found.first)
            value = f": got {got}, the baseline {base}"
        raise Disagreement(f"launch {launch} of the candidate in the timing stage ({phase}): output {name!r} disagrees "
                           f"with the baseline's for the same inputs: {verdict}{value}")

    def _untimed(self, inputs: Inputs) -> None:
        """Untimed launches of the candidate on the last round's inputs until its launch count reaches
        ``launches_to``. Nothing is timed, so no L2 flush, stream hold or event comes between them; each launch's
        checks (guard bands, input hashes, agreement with the baseline's output for these inputs) are queued on the
        stream behind it, before the next launch poisons its outputs, and read ``UNTIMED_BATCH`` launches at a time
        in one transfer. The first launch with a problem ends the stage, named as a checked launch is."""
        if self.base_for is not inputs:
            raise RuntimeError("the untimed launches have no baseline output for their inputs")
        phase, batch = "untimed, after the timed rounds", []
        while self.launches["candidate"] < self.req.launches_to:
            batch.append(self._queued_launch("candidate", inputs, phase))
            if len(batch) == UNTIMED_BATCH or self.launches["candidate"] >= self.req.launches_to:
                self._read_queued("candidate", batch, inputs, phase)
                batch = []

    def _queued_launch(self, name: str, inputs: Inputs, phase: str, events=None) -> tuple:
        """One launch of a kernel of the stage with its checks queued behind it, nothing read: its outputs and
        scratch poisoned, (with ``events``, a (start, end) pair: the L2 flushed and the launch between them) the
        launch, then its guard bands and input hashes, and for the candidate the agreement with the baseline's
        output for these inputs (the launch offered to the reservoir), for the baseline its output masked. Returns
        ``(launch, guards, agreement rows)`` for ``_read_queued``."""
        h, req = self.h, self.req
        impl, scratch, outs = self.loaded[name], self.scratch[name], self._outs(inputs)[name]
        poison_outputs(outs, req.outputs, second=False)
        impl.poison_scratch(scratch)
        if events is not None:
            self.flush_bytes = h.flush_l2()
            events[0].record(h.stream)
        impl.launch({n: b.view for n, b in {**inputs.buffers, **outs}.items()}, scratch)
        if events is not None:
            events[1].record(h.stream)
        self.launches[name] += 1
        guards = queue_violations(h, {"input": inputs.buffers, "output": outs, "scratch": scratch}, inputs.before,
                                  req.hash_seed)
        rows = {}
        if name == self.primary:
            self._store_baseline(inputs)
        else:
            masked = self._outs(inputs)[self.primary]
            rows = {n: h.agreement.queue(b.view, masked[n].view, self.base_keys[n], *self._tolerance(inputs, n),
                                         self.rng.getrandbits(64), repeats=self.repeats.get(n))
                    for n, b in outs.items()}
            self._keep(inputs, phase)
        return self.launches[name], guards, rows

    def _read_queued(self, name: str, batch: list, inputs: Inputs, phase: str) -> None:
        """The queued checks of a batch of launches of ``name`` (``(launch, guards, agreement rows)`` each), in one
        transfer, looked at in launch order."""
        parts = [part for _, guards, rows in batch for part in (guards.values, *rows.values())]
        try:
            host = self.cp.concatenate(parts).get()
            self.h.sync()
        except Exception as exc:
            raise self.h.classify(exc) from None
        at, last = 0, batch[-1][0]
        for launch, guards, rows in batch:
            size = guards.values.size
            problems = violations_in(guards, host[at: at + size].tolist())
            at += size
            if problems:
                raise Violation(name, problems)
            repeated = bool(rows)
            for n, row in rows.items():
                found = self.h.agreement.read(int(self._outs(inputs)[name][n].view.size), host[at: at + row.size])
                at += row.size
                self._raise_if_disagrees(found, inputs, n, launch, phase, intact=launch == last)
                repeated = repeated and found.repeated
            self.repeated += repeated

    # ---- the reservoir of outputs compared with the reference ----------------------------------

    def _keep(self, inputs: Inputs, phase: str) -> None:
        slot = self.draw.offer(phase)
        if slot is None:
            return
        outs = self._outs(inputs)["candidate"]
        if slot not in self.kept:
            self.kept[slot] = {"out": {n: self._empty_kept(b.view) for n, b in outs.items()}}
        for n, b in outs.items():
            if self.kept_on_host:
                b.view.get(out=self.kept[slot]["out"][n])
            else:
                self.cp.copyto(self.kept[slot]["out"][n], b.view)
        # A copy in host memory is out of every kernel's reach; one on the device is hashed and checked at the end.
        seed = self.req.hash_seed
        hashes = {} if self.kept_on_host else {n: self.h.hash_array(a, seed) for n, a in self.kept[slot]["out"].items()}
        self.kept[slot].update(launch=self.launches["candidate"], phase=phase, seed=inputs.seed, variant=inputs.variant,
                               hashes=hashes)

    def _empty_kept(self, like):
        """Where a kept output lives: on the device, or where the memory plan says so, in host memory."""
        if self.kept_on_host:
            return np.empty(like.shape, like.dtype)
        return self.cp.empty_like(like)

    def _save_kept(self, data_dir: Path, ipc: bool) -> list[KeptLaunch]:
        kept = self.kept.values()
        arrays = {f"the copy of output {n!r} of launch {s['launch']} kept for the reference": a
                  for s in kept for n, a in s["out"].items() if n in s["hashes"]}
        check = Fence(self.h, self.req.hash_seed)
        check.raise_(arrays, [h for s in kept for h in s["hashes"].values()])
        problems = check.broken("a launch wrote outside its own buffers after it was kept")
        if problems:
            raise Violation("candidate", problems)
        full = []
        for slot in sorted(kept, key=lambda s: s["launch"]):
            files = {n: hand_over(self.h, a, data_dir / f"timed-{slot['launch']}-{n}.npy",
                                  ipc and not self.kept_on_host)
                     for n, a in slot["out"].items()}
            full.append(KeptLaunch(slot["launch"], slot["phase"], slot["seed"], slot["variant"], files))
        return full


def warming(times: list[float], ms: float = WARM_UP_MS) -> bool:
    """Whether an implementation with these warm-up times (ms, in launch order) is to be launched again, for a
    warm-up of at least ``ms`` of device time."""
    return len(times) < WARM_UP_MIN or (sum(times) < ms and len(times) < WARM_UP_MAX)


def warm_up_batch(times: list[float], ms: float = WARM_UP_MS) -> int:
    """Launches to queue next in a queued warm-up: the ones the minimum still wants, then as many as its median
    time says reach ``ms``, at least one and at most a batch (``UNTIMED_BATCH``) or what ``WARM_UP_MAX``
    leaves."""
    if len(times) < WARM_UP_MIN:
        return WARM_UP_MIN - len(times)
    wanted = math.ceil((ms - sum(times)) / max(statistics.median(times), 1e-3))
    return max(1, min(UNTIMED_BATCH, WARM_UP_MAX - len(times), wanted))


def _nbytes(specs: list[dict]) -> int:
    return sum(int(np.prod(s["shape"])) * np_dtype(s["dtype"]).itemsize for s in specs)


def round_cap(budget_ms: float, baseline_ms: float, min_rounds: int, max_rounds: int) -> int:
    """The most rounds a stage may run, fixed before the first from the budget and the baseline's
    warm-up time: nothing the candidate does moves it."""
    return int(min(max_rounds, max(min_rounds, math.ceil(budget_ms / max(baseline_ms, 1e-3)))))


def _enough(limits: RoundLimits, samples: dict[str, list[float]], cap: int, elapsed: float,
            primary: str = "baseline") -> bool:
    """Stop adding rounds: the round cap, the candidate's time budget or the wall cap is reached, or the
    candidate's and the baseline's medians are already known to within ``target_ci``."""
    if len(samples["candidate"]) >= cap or sum(samples["candidate"]) >= limits.budget_ms:
        return True
    if elapsed >= limits.wall_cap_s:
        return True
    return all(settled(samples[name], limits.target_ci) for name in ("candidate", primary))


def _callable(spec: Impl, sizes: dict):
    """A vendor implementation (reference.py's vendor()), or PyTorch eager or torch.compile of the task's module
    in the TF32 mode it is timed in."""
    if spec.torch is not None:
        from ..pytorch.runtime import runtime_for

        return runtime_for(spec.task_folder).baseline(spec.torch, sizes, tf32_mode=spec.tf32)
    return load_reference(Path(spec.task_folder) / "reference.py").vendor


def _overlaps(array, buffers: dict) -> bool:
    """Whether ``array`` lies in the memory of one of ``buffers`` (a vendor output that is an input view)."""
    lo = array.data.ptr
    hi = lo + array.nbytes
    return any(b.raw.data.ptr < hi and lo < b.raw.data.ptr + b.raw.nbytes for b in buffers.values())
