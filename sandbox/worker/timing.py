"""A/B timing in the GPU worker, where no launch of the candidate goes unobserved.

- Warm-up on one input set: the baseline, the vendor, then the candidate, each at least 3 launches and
  20 ms (at most 200).
- Rounds: fresh inputs every round (every listed distribution in turn) in rotating buffer sets larger
  than the L2, at least three where the device memory holds them; each set has its own output buffers for
  every implementation, so a kernel's time is measured in several placements of everything it reads and
  writes, and the result says which set each round used (``set_of_round``: the speedup's interval
  resamples placements, ``sandbox.stats``); the candidate, the baseline and the vendor in a shuffled order, each after an L2 flush
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
  output for the same inputs (``sandbox.agreement``); the first that disagrees ends the stage, ``wrong``.
  The candidate and the baseline write separate buffers; the baseline's is masked as soon as it is
  written, its scratch and the vendor's outputs wiped, so nothing the candidate can read holds an answer.
- After each timed launch, NVML's SM and memory clocks, temperature and power are read: the result's
  environment says what the rounds ran at (median, min, max), not what an idle GPU showed at the start.
- ``full_checks`` launches of the candidate, drawn uniformly from all of them after each launch
  (reservoir sampling), are handed over (``harness.hand_over``) for a full comparison with the float64 reference.
- The baseline is the request's ``primary`` implementation: the task's starting kernel, or for a task
  imported from PyTorch the module run eagerly, whose outputs are copied into the baseline's buffers
  (after its timed region) and masked there; ``torch.compile`` is timed beside it, compiled by an untimed
  first call, and left out (with the reason) where it cannot compile.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..dtypes import np_dtype
from ..envinfo import ClockSampler, clocks
from ..stats import settled
from ..task_reference import load_reference
from .checks import Violation, violations
from .harness import Harness, LaunchFailed, generate_into, hand_over, poison_outputs
from .stopwatch import Stopwatch

GIVE_UP_HOLDS = 3  # holds of the stage's own kernels that ran out (each a 50 ms wait) before timing goes on without


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


def run_timing(h: Harness, req: dict) -> dict:
    loaded = {}
    for name, spec in req["impls"].items():
        if "cubin" in spec:
            try:
                loaded[name] = h.load(spec["cubin"], spec["plan"])
            except LaunchFailed as exc:
                return {"ok": True, "status": "launch_error", "impl": name, "error": str(exc)}
    stage = TimingStage(h, req, loaded)
    try:
        return stage.run()
    except Violation as v:
        status = "rejected" if v.impl == "candidate" else "infrastructure"
        return {"ok": True, "status": status, "impl": v.impl, "error": v.problems[0], "detail": "\n".join(v.problems)}
    except LaunchFailed as exc:
        return {"ok": True, "status": "launch_error", "impl": "candidate", "error": str(exc)}
    except Disagreement as exc:
        return {"ok": True, "status": "wrong", "impl": "candidate", "error": str(exc)}


class TimingStage:
    def __init__(self, h: Harness, req: dict, loaded: dict):
        self.h, self.req, self.cp = h, req, h.cp
        self.rng = random.Random(req["order_seed"])
        self.loaded = loaded
        self.primary = req.get("primary", "baseline")
        self.callables = {name: _callable(spec, req["sizes"]) for name, spec in req["impls"].items() if "cubin" not in spec}
        self.names = list(req["impls"])
        self.unavailable: dict[str, str] = {}
        self.variants = req["input_variants"]
        writers = {*loaded, self.primary}
        set_bytes = _nbytes(self.variants[0])
        self.n_sets = rotating_sets(set_bytes, set_bytes + len(writers) * _nbytes(req["outputs"]), h.l2_bytes,
                                    h.free_bytes())
        self.sets = [{s["name"]: h.alloc(s["dtype"], s["shape"]) for s in self.variants[0]} for _ in range(self.n_sets)]
        self.set_outs = [{n: {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]} for n in writers}
                         for _ in range(self.n_sets)]
        self.scratch = {n: impl.alloc_scratch() for n, impl in loaded.items()}
        self.tolerance = req["tolerance"]  # output name -> [atol, rtol]
        self.launches = {n: 0 for n in self.names}
        self.base_keys: dict = {}
        self.base_for = self.pending = None  # the inputs of the baseline's stored output; an unchecked candidate output
        self.reservoir = Reservoir(req["full_checks"], self.rng)
        self.kept: list[dict] = []  # the candidate outputs the reservoir holds, for the reference comparison
        self.start, self.end = self.cp.cuda.Event(), self.cp.cuda.Event()
        self.flush_bytes = 0
        self.watch = Stopwatch(h.sync)  # where the stage's seconds go (inputs, launches, output checks, ...)
        self.unheld: set[str] = set()  # implementations timed without the stream hold (they wait inside)
        self.hold = h.hold              # None where it cannot be set up: every launch timed after a synchronisation
        self._holds_before = (self.hold.held, self.hold.ran_outs) if self.hold else (0, 0)

    # ---- the stage ---------------------------------------------------------------------------

    def run(self) -> dict:
        req = self.req
        clocks_start, sampler = clocks(), ClockSampler()
        t_begin = time.perf_counter()
        inputs = self._generate(req["seed"], 0, 0)
        self._first_calls(inputs)
        samples = {n: [] for n in self.names}
        walls = {n: [] for n in self.names}
        set_of_round: list[int] = []
        baseline_ms = self._warm_up(inputs)
        cap = round_cap(req["budget_ms"], baseline_ms, req["min_rounds"], req["max_rounds"])
        r = 0
        while True:
            index = (r // len(self.variants)) % self.n_sets  # every set sees every distribution
            with self.watch("inputs"):
                inputs = self._generate((req["seed"] * 6364136223846793005 + r + 1) % 2**63,
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
            if r >= req["min_rounds"] and _enough(req, samples, cap, time.perf_counter() - t_begin, self.primary):
                break
        while self.launches["candidate"] < req["launches_to"]:
            self._launch("candidate", inputs, "untimed, after the timed rounds")
        with self.watch("hand-over"):
            full = self._save_kept(Path(req["data_dir"]), req.get("ipc", False))
        return {"ok": True, "status": "ran", "rounds": r, "round_cap": cap, "sets": self.n_sets, "set_of_round": set_of_round,
                "flush_bytes": self.flush_bytes, "samples": samples, "walls": walls, "full": full,
                "launches": self.launches["candidate"], "clocks_start": clocks_start, "clocks_end": clocks(),
                "clocks_timed": sampler.summary(), "gpu_s": time.perf_counter() - t_begin, "unavailable": self.unavailable,
                "launch_hold": self._hold_record(), "split_s": self.watch.report(time.perf_counter() - t_begin)}

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
            if "torch" not in self.req["impls"][name]:
                continue
            try:
                produced = fn(self.cp, **{n: b.view for n, b in inputs.buffers.items()}, **self.req["sizes"],
                              **self.req["scalars"])
                for array in produced.values():  # as after every call: nothing the candidate can read keeps an answer
                    if not _overlaps(array, inputs.buffers):
                        array.fill(0)
                self.h.sync()
            except Exception as exc:
                if name == self.primary:
                    raise
                self.names.remove(name)
                self.unavailable[name] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"

    def _warm_up(self, inputs: Inputs) -> float:
        """Every implementation, the baseline first (its output is what the candidate's are checked
        against); returns the baseline's median warm-up time."""
        order = [self.primary] + [n for n in self.names if n not in (self.primary, "candidate")] + ["candidate"]
        baseline_ms = []
        for name in order:
            spent, count = 0.0, 0
            while count < 3 or (spent < 20.0 and count < 200):
                ms, _ = self._launch(name, inputs, "warm-up")
                spent, count = spent + ms, count + 1
                if name == self.primary:
                    baseline_ms.append(ms)
        return statistics.median(baseline_ms)

    # ---- one launch ----------------------------------------------------------------------------

    def _generate(self, seed: int, variant: int, index: int) -> Inputs:
        buffers = self.sets[index]
        generate_into(self.h, buffers, self.variants[variant], seed)
        before = {n: b.data_hash(self.req["hash_seed"]) for n, b in buffers.items()}
        return Inputs(buffers, before, seed, variant, index)

    def _outs(self, inputs: Inputs) -> dict[str, dict]:
        """Every implementation's output buffers for these inputs (those of their set)."""
        return self.set_outs[inputs.index]

    def _launch(self, name: str, inputs: Inputs, phase: str) -> tuple[float, float]:
        outs = self._outs(inputs).get(name, {})
        if name in self.loaded:
            poison_outputs(outs, self.req["outputs"], second=False)
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
                                                **self.req["sizes"], **self.req["scalars"])
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
            if name == self.primary:  # untimed: the PyTorch baseline's outputs into the baseline's buffers
                for n, buf in outs.items():
                    buf.view[...] = produced[n].reshape(buf.view.shape)
                self._store_baseline(inputs)
            for array in produced.values():  # nothing the candidate can read keeps an answer
                if not _overlaps(array, inputs.buffers):
                    array.fill(0)
            if name == self.primary and self.pending and self.pending[0] is inputs:
                self._check(*self.pending)
            return ms, wall
        groups = {"input": inputs.buffers, "output": outs, "scratch": self.scratch[name]}
        problems = violations(h, groups, inputs.before, self.req["hash_seed"])
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
            self.base_keys[n] = checks.new_keys()
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
            atol, rtol = self.tolerance[n]
            found = checks.agree(buf.view, masked, keys, atol, rtol, self.rng.getrandbits(64))
            verdict = found.verdict()
            if verdict:
                where = f"launch {self.launches['candidate']} of the candidate in the timing stage ({phase})"
                value = ""
                if found.first is not None:
                    got = buf.view.reshape(-1)[found.first].item()
                    value = f": got {got}, the baseline {checks.unmasked(masked, keys, found.first)}"
                raise Disagreement(f"{where}: output {n!r} disagrees with the baseline's for the same inputs: "
                                   f"{verdict}{value}")

    # ---- the reservoir of outputs compared with the reference ----------------------------------

    def _keep(self, inputs: Inputs, phase: str) -> None:
        slot = self.reservoir.offer()
        if slot is None:
            return
        outs = self._outs(inputs)["candidate"]
        if slot == len(self.kept):
            self.kept.append({"out": {n: self.cp.empty_like(b.view) for n, b in outs.items()}})
        for n, b in outs.items():
            self.cp.copyto(self.kept[slot]["out"][n], b.view)
        self.kept[slot].update(launch=self.launches["candidate"], phase=phase, seed=inputs.seed, variant=inputs.variant)

    def _save_kept(self, data_dir: Path, ipc: bool) -> list[dict]:
        full = []
        for slot in sorted(self.kept, key=lambda s: s["launch"]):
            files = {n: hand_over(self.h, a, data_dir / f"timed-{slot['launch']}-{n}.npy", ipc)
                     for n, a in slot["out"].items()}
            full.append(dict(launch=slot["launch"], phase=slot["phase"], seed=slot["seed"], variant=slot["variant"],
                             files=files))
        return full


def _nbytes(specs: list[dict]) -> int:
    return sum(int(np.prod(s["shape"])) * np_dtype(s["dtype"]).itemsize for s in specs)


def rotating_sets(input_bytes: int, set_bytes: int, l2_bytes: int, free_bytes: int) -> int:
    """How many rotating sets a timing stage uses: enough that their inputs are twice the L2, at least three
    placements of every buffer (two where three would take over half the free device memory), at most 64."""
    n = min(64, max(3, math.ceil(2 * l2_bytes / max(input_bytes, 1))))
    while n > 2 and n * set_bytes > free_bytes / 2:
        n -= 1
    return n


def round_cap(budget_ms: float, baseline_ms: float, min_rounds: int, max_rounds: int) -> int:
    """The most rounds a stage may run, fixed before the first from the budget and the baseline's
    warm-up time: nothing the candidate does moves it."""
    return int(min(max_rounds, max(min_rounds, math.ceil(budget_ms / max(baseline_ms, 1e-3)))))


def _enough(req: dict, samples: dict[str, list[float]], cap: int, elapsed: float, primary: str = "baseline") -> bool:
    """Stop adding rounds: the round cap, the candidate's time budget or the wall cap is reached, or the
    candidate's and the baseline's medians are already known to within ``target_ci``."""
    if len(samples["candidate"]) >= cap or sum(samples["candidate"]) >= req["budget_ms"]:
        return True
    if elapsed >= req["wall_cap_s"]:
        return True
    return all(settled(samples[name], req["target_ci"]) for name in ("candidate", primary))


def _callable(spec: dict, sizes: dict):
    """A vendor implementation (reference.py's vendor()), or PyTorch eager or torch.compile of the task's module."""
    if "torch" in spec:
        from ..pytorch.runtime import runtime_for

        return runtime_for(spec["task_folder"]).baseline(spec["torch"], sizes)
    return load_reference(Path(spec["task_folder"]) / "reference.py").vendor


class Reservoir:
    """Reservoir sampling of k items from a stream of unknown length: offer() after each item says which
    slot to store it in (None: not kept). After any number of items, the kept ones are a uniform sample,
    and whether an item is kept is decided only after it exists."""

    def __init__(self, k: int, rng: random.Random):
        self.k, self.rng, self.seen = k, rng, 0

    def offer(self) -> int | None:
        self.seen += 1
        if self.seen <= self.k:
            return self.seen - 1
        s = self.rng.randrange(self.seen)
        return s if s < self.k else None


def _overlaps(array, buffers: dict) -> bool:
    """Whether ``array`` lies in the memory of one of ``buffers`` (a vendor output that is an input view)."""
    lo = array.data.ptr
    hi = lo + array.nbytes
    return any(b.raw.data.ptr < hi and lo < b.raw.data.ptr + b.raw.nbytes for b in buffers.values())
