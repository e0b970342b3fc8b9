"""``FakeSandbox``: real compiles, simulated runs. For CPU-only machines, CI, demos and notebooks.

It compiles every candidate for real (NVRTC, through ``CompileOnlySandbox``), resolves its launch plan at
every check size and the benchmark size (a plan that cannot launch is a ``launch_error``, as on a GPU),
and then, instead of running anything, returns a deterministic simulated result. Every such result says
so: ``Result.env.simulated is True``, its checks carry the note ``simulated``, and the device and
ceilings are named as simulated. Nothing here is a measurement.

The model, per candidate:
- the task's floor time is its roofline: ``max(bytes / 4.0 TB/s, flops / ceiling)`` at the benchmark size,
  with the fixed simulated ceilings in ``SIM_CEILINGS``;
- the baseline takes ``floor / 0.5`` (it runs at half the simulated roofline); a task imported from PyTorch
  has PyTorch eager there instead, and torch.compile at ``COMPILE_GAIN`` (1.25) times eager's speed;
- a candidate takes ``baseline / s`` (eager's time for such a task). ``s`` is 1.0 for the task's own baseline (same source, flags and
  default knobs); else, from a ``// fake: speedup=X`` annotation in the source; else derived from a hash
  of the machine code (``CompileInfo.code_hash``) and the resolved launch plan, uniform in [0.8, 1.2). Knob
  values that change the binary or the launch geometry therefore change the simulated time; identical builds
  never do, in any process;
- 20 paired rounds with 1% Gaussian noise (``// fake: noise=0.05`` changes it) from a generator seeded
  by the same hash; medians and intervals come from ``sandbox.judging.stats`` like real ones;
- as on a GPU (``sandbox.host.floor``), a time below the floor divided by 1.5 is flagged and triggers the stronger
  check (every check and held-out size; ``// fake: heldout_wrong`` fails it), and a time below the outputs' bytes
  at the copy bandwidth divided by 1.5 is ``rejected`` (faster than the hardware allows).

Annotations script failures: ``// fake: wrong``, ``// fake: crashed``, ``// fake: timeout``,
``// fake: rejected`` (several may share a line, separated by commas or spaces), ``// fake: alone=X`` (the speedup
``evaluate_alone`` finds, where the first measurement's company flattered it), and ``// fake: check_wrong``:
wrong at the first check size only, so it passes screening (``screen``, simulated with the same model and
early stops as ``GPUSandbox.screen``) and fails the full evaluation; ``// fake: heldout_wrong``: wrong at the
task's held-out sizes only (right at every check size and the benchmark).

At a size other than the benchmark (a held-out size, ``sizes=``), a build keeps its speedup on the work but not
on a fixed launch cost (``LAUNCH_MS``, the same for every build): with ``w(s)`` the baseline's simulated work at
size ``s`` and ``share(s) = w(s) / (w(s) + LAUNCH_MS)``, its speedup there is
``1 + (s_bench - 1) * share(s) / share(bench)``, drawn towards 1.0 at small sizes, and its noise is drawn afresh
for that size. A gain never turns into a loss by this model, so a held-out re-check flags a simulated winner
only where an annotation says so (``heldout_wrong``, or ``speedup`` below 1.0).

``sanitize`` compiles for real and resolves the plan, then simulates compute-sanitizer's verdict (marked
``simulated``): clean, unless ``// fake: out_of_bounds`` (a memcheck error), ``// fake: race`` (a racecheck
error) or ``// fake: sanitizer_fails`` (no verdict from any tool).

A ModelNew candidate (``sandbox.host.modelnew_host``) is not built here (that needs nvcc and a CUDA build of
torch): its build is simulated (``compiled``, or ``// fake: compile_error``), its time drawn by the same model from
the hash of its source, its format verdicts ``not run``, and it is not sanitized; the annotations above script it
wherever they appear in its file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np

from ..candidates.candidate import Candidate, strip_plan, load_candidate
from ..candidates.plan import PlanError, resolve
from ..judging import stats
from ..judging.environment import Ceilings, Environment
from ..judging.result import Check, Cost, Mismatch, Result, Status, Timing, Verdict
from ..judging.sanitizer_report import DEFAULT_TOOLS, SanitizeReport, ToolVerdict, overall
from ..tasks.task import Task, describe_sizes
from . import modelnew_host
from .compile_only import CompileOnlySandbox, new_result
from .config import SandboxConfig
from .floor import judge_floors, stronger_sizes
from .sanitizer import sanitize_sizes
from .screener import Screened

SIM_CEILINGS = Ceilings(copy_bytes_per_s=4.0e12, fp32_flops=6.0e13, fp16_tensor_flops=8.0e14,
                        method="simulated: fixed numbers of the FakeSandbox, not measured")
BASELINE_EFFICIENCY = 0.5
COMPILE_GAIN = 1.25
ROUNDS = 20
DEFAULT_NOISE = 0.01
REJECT_FACTOR = 1.5
LAUNCH_MS = 0.004   # a launch's fixed simulated cost, which no build of the kernel changes
SCREEN_MIN_ROUNDS, SCREEN_MARGIN = 6, 1.1   # as GPUSandbox.screen's defaults
_ANNOTATION = re.compile(r"//\s*fake:\s*(.+)$", re.M)
SIM_FAULTS = {"memcheck": ("out_of_bounds", "Invalid __global__ write of size 4 bytes"),
              "racecheck": ("race", "Error: Race reported between Write access and Read access")}
_FAILURES = {"wrong": Status.wrong, "crashed": Status.crashed, "timeout": Status.timeout, "rejected": Status.rejected}


def annotations(source: str) -> dict[str, str]:
    """``// fake: wrong, speedup=1.3`` -> {"wrong": "", "speedup": "1.3"}."""
    out: dict[str, str] = {}
    for line in _ANNOTATION.findall(source):
        for token in re.split(r"[,\s]+", line.strip()):
            if token:
                key, _, value = token.partition("=")
                out[key.lower()] = value
    return out


class FakeSandbox(CompileOnlySandbox):
    """Compiles for real; every run, check and time is simulated and marked ``simulated``."""

    kind = "fake"
    can_screen = True

    def __init__(self, config: SandboxConfig | None = None, arch: str | None = None):
        super().__init__(config, arch)
        self.device = {"gpu": "simulated GPU (FakeSandbox: no measurements)", "arch": self.arch, "sms": 132,
                       "l2_bytes": 60 * 2**20, "memory_bytes": 96 * 2**30, "shared_per_block_optin": 227 * 1024,
                       "shared_per_sm": 228 * 1024, "simulated": True}
        self.screen_best: dict[str, float] = {}   # as Screener.best: the best ratio screened per task

    def compile(self, task: Task, candidate: Candidate) -> Result:
        if modelnew_host.is_modelnew(candidate):
            return self._modelnew_compiled(task, candidate)
        return super().compile(task, candidate)

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None, timing: bool = True) -> Result:
        return self._evaluate(task, candidate, sizes, timing, alone=False)

    def evaluate_alone(self, task: Task, candidate: Candidate) -> Result:
        """``evaluate`` at the benchmark size with noise of its own (a second measurement, not a copy of the
        first), at the speedup a ``// fake: alone=X`` annotation gives (the figure a build shows when timed alone
        where its first one was flattered or hurt by what ran beside it)."""
        return self._evaluate(task, candidate, None, True, alone=True)

    def _evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None, timing: bool,
                  alone: bool) -> Result:
        if modelnew_host.is_modelnew(candidate):
            return self._modelnew_evaluated(task, candidate, sizes, timing, alone)
        compiled = self.compile(task, candidate)
        if compiled.status is not Status.compiled:
            return compiled
        bench = sizes or task.spec.sizes.benchmark
        labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)] + [("benchmark", bench)]
        env = Environment.model_validate({**self.device, "ceilings": SIM_CEILINGS})
        base = dict(compile=compiled.compile, env=env, cost=Cost(compile_s=compiled.cost.compile_s))
        try:
            plans = [resolve(task, candidate, compiled.compile, s) for _, s in labelled]
        except PlanError as exc:
            return new_result(task, candidate, Status.launch_error, error=str(exc), **base)
        notes = annotations(candidate.source)
        scripted = _scripted(task, candidate, notes, labelled, sizes, base)
        if scripted is not None:
            return scripted
        checks = [_check(s, label, t.name, True) for label, s in labelled for t in task.spec.outputs]
        if not timing:
            return new_result(task, candidate, Status.ok, checks=checks, **base)
        if sizes is not None and sizes != task.spec.sizes.benchmark:   # a build's simulated speed is one at every size
            plans = plans[:-1] + [resolve(task, candidate, compiled.compile, task.spec.sizes.benchmark)]
        digest = _digest(compiled.compile, plans)
        speed, digest = _where(task, self._speedup(task, candidate, notes, digest), digest, notes, sizes, alone)
        status, error, timed = self._timed(task, bench, speed, notes, digest, base)
        if status is Status.ok and timed.below_roofline is not None:   # the stronger check: every check and held-out size
            if "heldout_wrong" in notes and task.spec.sizes.heldout:
                status = Status.wrong
                error = (f"{timed.below_roofline.line()}; the stronger check it triggered failed: heldout[0] is "
                         "wrong (simulated by a '// fake: heldout_wrong' annotation)")
            else:
                timed.below_roofline.rechecked = [label for label, _ in stronger_sizes(task, bench)]
        return new_result(task, candidate, status, checks=checks, timing=timed, error=error, **base)

    def _modelnew_compiled(self, task: Task, solution) -> Result:
        """A ModelNew solution is not built here (a build needs nvcc and a CUDA build of torch): its build is
        simulated, ``compiled`` unless a ``// fake: compile_error`` annotation says otherwise."""
        modelnew_host.require_torch_task(task)
        failed = "compile_error" in annotations(solution.source)
        built = dict(ok=not failed, builds=[{"call": b} for b in solution.builders],
                     error="simulated compile error ('// fake: compile_error' annotation)" if failed else "")
        result = modelnew_host.compiled(task, solution, built, self.arch)
        result.env = Environment.model_validate({**self.device, "ceilings": SIM_CEILINGS})
        return result

    def _modelnew_evaluated(self, task: Task, solution, sizes: dict[str, int] | None, timing: bool,
                            alone: bool = False) -> Result:
        """The time model of ``evaluate`` for a ModelNew solution, drawn from the hash of its source (``alone``: a
        second draw, at a ``// fake: alone=X`` speedup where one is given); its own verdicts are ``not run``
        (nothing ran to decide them)."""
        from ..pytorch.modelnew_judge import CHECKS

        compiled = self._modelnew_compiled(task, solution)
        if compiled.status is not Status.compiled:
            return compiled
        bench = sizes or task.spec.sizes.benchmark
        labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)] + [("benchmark", bench)]
        base = dict(compile=compiled.compile, env=compiled.env, cost=Cost(),
                    verdicts=[Verdict(check=c, outcome="not run", line="simulated: the FakeSandbox runs nothing")
                              for c in CHECKS])
        notes = annotations(solution.source)
        scripted = _scripted(task, solution, notes, labelled, sizes, base)
        if scripted is not None:
            return scripted
        checks = [_check(s, label, t.name, True) for label, s in labelled for t in task.spec.outputs]
        if not timing:
            return new_result(task, solution, Status.ok, checks=checks, **base)
        digest = hashlib.sha256(f"modelnew:{solution.key}".encode()).digest()
        speed = float(notes["speedup"]) if notes.get("speedup") else _hashed_speedup(digest)
        speed, digest = _where(task, speed, digest, notes, sizes, alone)
        status, error, timed = self._timed(task, bench, speed, notes, digest, base)
        return new_result(task, solution, status, checks=checks, timing=timed, error=error, **base)

    def screen(self, task: Task, candidates: list[Candidate], rounds: int = 15, batch: int = 16,
               timeout_s: float = 10.0, best: float | None = None) -> list[Screened]:
        """Simulated screening (``GPUSandbox.screen``): the time model of ``evaluate`` with noise of its own,
        the same early stops (``sandbox.judging.stats.screening_stop``); annotations script failures at the benchmark
        size (``check_wrong`` is wrong at a check size only, which screening does not run: it passes)."""
        if rounds < 5:
            raise ValueError(f"screen: rounds must be at least 5 (got {rounds})")
        if not task.has_baseline:
            raise ValueError(f"screening compares every run with the task's CUDA baseline, and {task.name} has none")
        self.builder.prefetch(task, candidates)
        known = self.screen_best.get(task.fingerprint)
        best = known if best is None else best if known is None else min(best, known)
        labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)]
        labelled.append(("benchmark", task.spec.sizes.benchmark))
        out = []
        for cand in candidates:
            compiled = self.compile(task, cand)
            if compiled.status is not Status.compiled:
                out.append(Screened(compiled.status.value, error=compiled.error, compile_s=compiled.cost.compile_s))
                continue
            plans = [resolve(task, cand, compiled.compile, s) for _, s in labelled]
            notes = annotations(cand.source)
            failure = next((status for key, status in _FAILURES.items() if key in notes), None)
            if failure is not None:
                out.append(Screened(failure.value, error=f"simulated {failure.value} ('// fake: {failure.value}' "
                                    "annotation)", compile_s=compiled.cost.compile_s))
                continue
            digest = _digest(compiled.compile, plans)
            speed = self._speedup(task, cand, notes, digest)
            found = self._screen_one(task, speed, float(notes.get("noise") or DEFAULT_NOISE), digest, rounds, best)
            found.compile_s = compiled.cost.compile_s
            out.append(found)
            if found.ok and found.stopped != "slower":
                best = found.relative if best is None else min(best, found.relative)
        if best is not None:
            self.screen_best[task.fingerprint] = best
        return out

    def _screen_one(self, task: Task, speed: float, noise: float, digest: bytes, rounds: int,
                    best: float | None) -> Screened:
        base_ms = self._timing(task, task.spec.sizes.benchmark, speed, noise, digest)["impls"]["baseline"]["median_ms"]
        rng = np.random.default_rng(int.from_bytes(digest[16:24], "big"))
        cand = np.maximum(base_ms / speed * (1 + noise * rng.standard_normal(rounds)), 1e-6).tolist()
        base = np.maximum(base_ms * (1 + noise * rng.standard_normal(rounds)), 1e-6).tolist()
        stop_above, stopped, n = None if best is None else best * SCREEN_MARGIN, "", rounds
        for n in range(1, rounds):
            stopped = stats.screening_stop([c / b for c, b in zip(cand[:n], base[:n])], SCREEN_MIN_ROUNDS, 0.01, stop_above,
                                           noise * math.sqrt(2))   # a ratio of two times, each with this noise
            if stopped:
                break
        else:
            n = rounds
        cand, base = cand[:n], base[:n]
        _, lo, hi = stats.speedup_ci(base, cand)
        return Screened("ok", ms=float(np.median(cand)), baseline_ms=float(np.median(base)),
                        relative=stats.relative_time(cand, base),
                        relative_ci=(1.0 / hi, 1.0 / lo), gpu_s=(sum(cand) + sum(base)) / 1e3, samples=cand, rounds=n,
                        stopped=stopped)

    def sanitize(self, task: Task, candidate: Candidate, tools=DEFAULT_TOOLS, check_sizes: int = 2,
                 timeout_s: float = 300.0) -> SanitizeReport:
        """A simulated compute-sanitizer verdict, scripted by annotations (see the module's docstring)."""
        if modelnew_host.is_modelnew(candidate):
            return modelnew_host.sanitized()
        built = self.builder.build(task, candidate)
        sizes = sanitize_sizes(task, check_sizes)
        if built.result.status is not Status.compiled:
            return SanitizeReport(status="skipped", reason=f"{built.result.status.value}: {built.result.error}")
        try:
            for s in sizes:
                resolve(task, candidate, built.info, s)
        except PlanError as exc:
            return SanitizeReport(status="skipped", reason=f"plan: {exc}", sizes=sizes)
        notes = annotations(candidate.source)
        verdicts = []
        for tool in tools:
            fault, text = SIM_FAULTS.get(tool, ("", ""))
            if "sanitizer_fails" in notes:
                verdicts.append(ToolVerdict(tool=tool, status="failed", reason="simulated ('// fake: sanitizer_fails')"))
            elif fault and fault in notes:
                verdicts.append(ToolVerdict(tool=tool, status="errors", errors=1, kernel=candidate.launches[0].kernel,
                                            first_error=f"{text} (simulated by a '// fake: {fault}' annotation)"))
            else:
                verdicts.append(ToolVerdict(tool=tool, status="clean", errors=0))
        return SanitizeReport(status=overall(verdicts), sizes=sizes, tools=verdicts, simulated=True,
                              tool_version="simulated (FakeSandbox)")

    def _speedup(self, task: Task, candidate: Candidate, notes: dict, digest: bytes) -> float:
        if notes.get("speedup"):
            return float(notes["speedup"])
        baseline = load_candidate(task.baseline_path) if task.has_baseline else None
        if baseline is not None and (strip_plan(candidate.source).strip() == strip_plan(baseline.source).strip()
                and candidate.flags == baseline.flags and candidate.knob_values == baseline.knob_values):
            return 1.0
        return _hashed_speedup(digest)

    def _timed(self, task: Task, bench: dict, speed: float, notes: dict, digest: bytes,
               base: dict) -> tuple[Status, str, Timing]:
        """The simulated timing at ``bench`` (its GPU time added to ``base``'s cost), judged against the floors."""
        rec = self._timing(task, bench, speed, float(notes.get("noise") or DEFAULT_NOISE), digest)
        base["cost"].time_gpu_s = sum(sum(i["samples_ms"]) for i in rec["impls"].values()) / 1e3
        timed = Timing.model_validate(rec)
        status, error, timed.below_roofline = judge_floors(task, timed, SIM_CEILINGS, REJECT_FACTOR)
        if status is not Status.ok:
            error += " (simulated)"
        return status, error, timed

    def _timing(self, task: Task, bench: dict, speed: float, noise: float, digest: bytes) -> dict:
        peak = SIM_CEILINGS.peak_flops(task.spec.roofline.compute)
        t_mem = task.bytes(bench) / SIM_CEILINGS.copy_bytes_per_s
        t_cmp = task.flops(bench) / peak if peak else 0.0
        floor_ms = max(t_mem, t_cmp) * 1e3
        base_ms = max(floor_ms / BASELINE_EFFICIENCY, 0.005)
        rng = np.random.default_rng(int.from_bytes(digest[8:16], "big"))
        samples = {"candidate": base_ms / speed * (1 + noise * rng.standard_normal(ROUNDS))}
        for name in task.baselines:  # torch.compile simulated a fixed COMPILE_GAIN faster than eager
            ms = base_ms / COMPILE_GAIN if name == "compile" else base_ms
            samples[name] = ms * (1 + noise * rng.standard_normal(ROUNDS))
        impls = {}
        for name, s in samples.items():
            s = np.maximum(s, 1e-6).tolist()
            med, lo, hi = stats.median_ci(s)
            impls[name] = dict(samples_ms=s, median_ms=med, ci_ms=dict(value=med, low=lo, high=hi), wall_median_ms=med,
                               pct_of_roofline=100.0 * floor_ms / med if floor_ms else None)
        speedup = {}
        for name in task.baselines:
            v, lo, hi = stats.speedup_ci(impls[name]["samples_ms"], impls["candidate"]["samples_ms"])
            speedup[name] = dict(value=v, low=lo, high=hi)
        rec = dict(sizes=bench, rounds=ROUNDS, l2_flush_bytes=0, rotating_sets=1, impls=impls, speedup=speedup,
                   faster_than={k: v["low"] > 1.0 for k, v in speedup.items()}, primary=task.baselines[0],
                   roofline_ms=floor_ms or None, bound="memory" if t_mem >= t_cmp else "compute",
                   torch_tf32=self.config.torch_tf32 if task.spec.torch else None)
        return rec


def _hashed_speedup(digest: bytes) -> float:
    """A build's simulated speedup where no annotation gives one: in [0.8, 1.2), from the hash of what it is."""
    return 0.8 + 0.4 * int.from_bytes(digest[:8], "big") / 2**64


def _scripted(task: Task, candidate, notes: dict, labelled: list[tuple[str, dict]], sizes: dict[str, int] | None,
              base: dict) -> Result | None:
    """The Result an annotation scripts (wrong at the benchmark, at the first check size or at a held-out size; a
    crash, a timeout, a rejection), or None."""
    failure = next((status for key, status in _FAILURES.items() if key in notes), None)
    if failure is None and "heldout_wrong" in notes and sizes is not None and sizes in task.spec.sizes.heldout:
        failure = Status.wrong
    out = task.spec.outputs[0].name
    if failure is None and "check_wrong" in notes:
        label, first = labelled[0]
        return new_result(task, candidate, Status.wrong, checks=[_check(first, label, out, False)],
                          error=f"{label} ({describe_sizes(first)}): output {out!r} is wrong: 1 mismatches, first at "
                                "[0]: got 0.0, expected 1.0 (simulated by a '// fake: check_wrong' annotation)", **base)
    if failure is Status.wrong:
        bench = labelled[-1][1]
        checks = [_check(s, label, out, True) for label, s in labelled[:-1]] + [_check(bench, "benchmark", out, False)]
        return new_result(task, candidate, Status.wrong, checks=checks,
                          error=f"benchmark ({describe_sizes(bench)}): output {out!r} is wrong: 1 mismatches, first at "
                                "[0]: got 0.0, expected 1.0 (simulated by a '// fake: wrong' annotation)", **base)
    if failure is not None:
        return new_result(task, candidate, failure,
                          error=f"simulated {failure.value} ('// fake: {failure.value}' annotation)", **base)
    return None


def _where(task: Task, speed: float, digest: bytes, notes: dict, sizes: dict[str, int] | None,
           alone: bool) -> tuple[float, bytes]:
    """A build's simulated speedup and the hash its noise is drawn from, at ``sizes`` (other than the benchmark
    size: ``_speedup_at``, noise drawn afresh) or timed alone (a second draw, at ``// fake: alone=X`` if given)."""
    if sizes is not None and sizes != task.spec.sizes.benchmark:
        speed = _speedup_at(task, speed, sizes)
        digest = hashlib.sha256(digest + json.dumps(sizes, sort_keys=True).encode()).digest()
    if alone:
        digest = hashlib.sha256(digest + b"alone").digest()
        speed = float(notes.get("alone") or speed)
    return speed, digest


def _work_ms(task: Task, sizes: dict) -> float:
    """The baseline's simulated time at ``sizes`` without a launch's fixed cost."""
    peak = SIM_CEILINGS.peak_flops(task.spec.roofline.compute)
    floor_s = max(task.bytes(sizes) / SIM_CEILINGS.copy_bytes_per_s, task.flops(sizes) / peak if peak else 0.0)
    return floor_s * 1e3 / BASELINE_EFFICIENCY


def _speedup_at(task: Task, speed: float, sizes: dict) -> float:
    """A build's simulated speedup at ``sizes`` from its speedup at the benchmark size (the module's docstring)."""
    def share(s: dict) -> float:
        work = _work_ms(task, s)
        return work / (work + LAUNCH_MS)

    bench = share(task.spec.sizes.benchmark)
    return 1.0 + (speed - 1.0) * share(sizes) / bench if bench > 0 else 1.0


def _digest(info, plans: list[dict]) -> bytes:
    """What the simulated time of a build derives from: its machine code's hash (the cubin's own bytes carry the
    compile's temporary paths, new in every process) and its plans at every size."""
    code = info.code_hash or info.cubin_sha256
    return hashlib.sha256(json.dumps([code, plans], sort_keys=True, default=str).encode()).digest()


def _check(sizes: dict, label: str, output: str, passed: bool) -> Check:
    mismatch = None if passed else Mismatch(index=[0], got=0.0, expected=1.0)
    return Check(sizes=sizes, label=label, output=output, distribution="simulated", passed=passed,
                 max_abs_error=0.0 if passed else 1.0, mismatches=0 if passed else 1, first_mismatch=mismatch,
                 note="simulated")


__all__ = ["FakeSandbox", "annotations", "SIM_CEILINGS"]
