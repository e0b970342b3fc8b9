"""The GPU sandbox: the orchestrating side of a full evaluation. It never touches CUDA: compiles run in a
compile worker, candidate kernels in a GPU worker, the reference in a separate trusted worker.

``GPUSandbox`` holds a ``Builder`` (compiles), the GPU and reference workers, a ``Profiler`` (ncu), a
``Screener`` (cheap sweeps) and a ``Sanitizer`` (compute-sanitizer on winners). ``evaluate`` runs the
correctness stage (every check size and the benchmark size, every listed input distribution at each, two
runs per trial, poisoned outputs, guard bands, input hashes) and the timing stage (``sandbox.worker.timing``:
interleaved A/B rounds against the baseline and the vendor library, or for a task imported from PyTorch
without a CUDA baseline against PyTorch eager (the baseline there) and torch.compile; every launch of the
candidate compared on the device with the baseline's output for the same inputs; launches drawn at random
after the fact compared in full with the reference).
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..candidates import compiler
from ..candidates.candidate import Candidate, load_candidate
from ..candidates.plan import PlanError
from ..judging.agreement import DEVICE_NAMES
from ..judging.environment import Ceilings as CeilingRates, Environment
from ..judging.result import BelowRoofline, Check, CompileInfo, Cost, Result, Status
from ..judging.sanitizer_report import DEFAULT_TOOLS, SanitizeReport
from ..plumbing.files import cache_dir
from ..tasks.inputs import distribution_count, input_specs, output_specs, structural
from ..tasks.keyed import new_seed
from ..tasks.task import Task, TaskError, describe_sizes
from ..wire import CheckTrials, Checked, CompareTrial, DeviceInfo, HarnessCode, MeasureCeilings, MeasuredCeilings, \
    RunOutputs, StageFailed, Timed, Trial, TrialRun, WorkerError
from . import prestart
from .ceilings import cached_ceilings
from .compile_only import CompileOnlySandbox, labelled_sizes, new_result
from .config import SandboxConfig
from .floor import EXTRA_TRIALS, judge_floors, stronger_sizes
from .pool import WorkerDied, WorkerProcess, WorkerTimeout, expect
from .referee import Referee, mismatch_text
from .sanitizer import Sanitizer
from .screener import Screened, Screener
from .timing import kept_trials, sanity, timing_env, timing_record, timing_request

HARNESS_SOURCE = Path(__file__).resolve().parents[1] / "worker" / "harness.cu"


class GPUSandbox(CompileOnlySandbox):
    """The full sandbox on a CUDA device (``screen`` for cheap sweeps: ``sandbox.host.screener``)."""

    kind = "gpu"
    can_screen = True

    def __init__(self, config: SandboxConfig | None = None):
        config = config or SandboxConfig()
        # started at the process's start, beside its imports (``sandbox.host.prestart``), or now
        started = prestart.take() or prestart.start(config.compile_timeout_s)
        self.data_dir, self._gpu, self._ref, compiles = started.data_dir, started.gpu, started.ref, started.compiles
        try:
            hello = started.gpu_hello.result()
        except BaseException:
            self._give_up(compiles)
            raise
        if isinstance(hello, WorkerError):
            self._give_up(compiles)
            raise RuntimeError(f"no usable CUDA device: {hello.error}")
        info = expect(hello, DeviceInfo).info
        arch = config.arch or info["arch"]
        harness_cubin, harness_names = compile_harness(arch)
        self._gpu.trust(harness_cubin)
        super().__init__(config, arch=arch, harness_cubin=harness_cubin)
        self.builder.adopt(compiles)
        self.device = info
        self.harness = HarnessCode(self.arch, harness_cubin, harness_names)
        self.screener = Screener(self.builder.build, self.baseline, self._gpu, self.harness, self.config.check_timeout_s,
                                 ready=self.builder.ready)
        self.sanitizer = Sanitizer(self.builder.build, self.arch, harness_cubin)
        self.referee = Referee(self._gpu, self._ref, self.harness, self.config.compare_timeout_s)
        self.referee.probe_ahead()   # the workers' first use (harness kernels, an IPC handle) beside the caller's set-up
        self._baselines: dict[str, tuple[Candidate, CompileInfo, bytes]] = {}
        self._baseline_checks: dict[str, _Checked] = {}   # task fingerprint -> the baseline's correctness stage
        self._ceilings: CeilingRates | None = None
        self._rng = random.SystemRandom()
        self.check_split_s: dict[str, float] = {}  # the correctness stage's seconds per part in the GPU worker,
                                                   # summed over this sandbox's life (the reference's: referee)

    def _give_up(self, compiles: WorkerProcess) -> None:
        """Close what an opening that failed had started."""
        for worker in (self._gpu, self._ref, compiles):
            worker.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # ---- public ------------------------------------------------------------------------------

    @property
    def ceilings(self) -> CeilingRates:
        if self._ceilings is None:
            self._ceilings = cached_ceilings(self.device, self._measure_ceilings)
        return self._ceilings

    def _measure_ceilings(self) -> dict:
        return dict(expect(self._gpu.call_ok(MeasureCeilings(), 600), MeasuredCeilings).values)

    def screen(self, task: Task, candidates: list[Candidate], rounds: int = 15, batch: int = 16,
               timeout_s: float = 10.0, best: float | None = None) -> list[Screened]:
        """Screen ``candidates`` against the baseline at the benchmark size (``Screener.screen``); their
        compiles start side by side first and the GPU screens each batch as soon as it is compiled. ``best``: the best time relative to the baseline known so far
        (candidates surely slower than it by 10% stop early)."""
        if not task.has_baseline:
            raise ValueError(f"screening compares every run with the task's CUDA baseline, and {task.name} has none")
        self.builder.prefetch(task, candidates)
        return self.screener.screen(task, candidates, rounds, batch, timeout_s, best=best)

    def sanitize(self, task: Task, candidate: Candidate, tools=DEFAULT_TOOLS, check_sizes: int = 2,
                 timeout_s: float = 300.0) -> SanitizeReport:
        """compute-sanitizer's tools on ``candidate`` at the smallest check sizes (``sandbox.host.sanitizer``)."""
        return self.sanitizer.sanitize(task, candidate, tools, check_sizes, timeout_s)

    def warm_sanitizer(self, tools: tuple[str, ...] = DEFAULT_TOOLS) -> None:
        """Start each tool's run ahead of the next ``sanitize`` (``Sanitizer.start_ahead``)."""
        self.sanitizer.start_ahead(tools)

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None, timing: bool = True) -> Result:
        """Check and time ``candidate`` at ``sizes`` (default: the task's benchmark size)."""
        t0 = time.perf_counter()
        try:
            return self._evaluate(task, candidate, sizes or task.spec.sizes.benchmark, timing, t0)
        finally:
            for p in self.data_dir.iterdir():
                p.unlink(missing_ok=True)

    def close(self) -> None:
        """End every process the sandbox holds side by side: a worker with a CUDA context takes a while to be
        torn down once killed, and one after the other those whiles add up at the end of every run."""
        parts = (super().close, self._gpu.close, self._ref.close, self.sanitizer.close)
        with ThreadPoolExecutor(len(parts), thread_name_prefix="close") as pool:
            for done in [pool.submit(part) for part in parts]:
                done.result()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # ---- stages ------------------------------------------------------------------------------

    def _evaluate(self, task: Task, cand: Candidate, bench: dict[str, int], timing: bool, t0: float) -> Result:
        compiled, info, cubin = self.builder.build(task, cand)
        if compiled.status is not Status.compiled:
            return compiled
        cost = compiled.cost
        base = dict(compile=info, env=Environment.model_validate(self.device), cost=cost)
        labelled = labelled_sizes(task, bench)
        try:
            plans = self.plans(task, cand, info, labelled)
        except PlanError as exc:
            return new_result(task, cand, Status.launch_error, error=str(exc), **base)
        baseline = self.baseline(task) if task.has_baseline else None  # a PyTorch task may have none

        checks = self._checked_as_baseline(task, info, labelled, plans, cost)
        if checks is not None:
            status, error, detail = Status.ok, "", ""
        else:
            status, checks, error, detail = self._correctness(task, cubin, labelled, plans, cost)
        if status is not Status.ok or not timing:
            cost.wall_s = time.perf_counter() - t0
            return new_result(task, cand, status, checks=checks, error=error, detail=detail, **base)

        bench_label = labelled[-1][0]
        status, rec, env, more_checks, error, detail = self._timing(task, bench, cubin, plans[bench_label], baseline,
                                                                    cost)
        if status is Status.ok and rec is not None and rec.below_roofline is not None:
            status, stronger, error = self._stronger_check(task, cand, info, cubin, bench, rec.below_roofline, cost)
            more_checks = more_checks + stronger
        cost.wall_s = time.perf_counter() - t0
        base["env"] = Environment.model_validate({**self.device, **env})
        return new_result(task, cand, status, checks=checks + more_checks, timing=rec, error=error, detail=detail, **base)

    def baseline(self, task: Task) -> tuple[Candidate, CompileInfo, bytes]:
        """The task's starting kernel, compiled and checked once per sandbox."""
        key = task.fingerprint
        if key not in self._baselines:
            cand = load_candidate(task.baseline_path)
            cand = dataclasses.replace(cand, label="baseline")
            res, info, cubin = self.builder.build(task, cand)
            if res.status is not Status.compiled:
                raise TaskError(f"{task.baseline_path}: the baseline does not compile: {res.error}")
            self._gpu.trust(cubin)   # the task's own code: running it keeps the worker's kernels harvested
            labelled = labelled_sizes(task, task.spec.sizes.benchmark)
            try:
                plans = self.plans(task, cand, info, labelled)
            except PlanError as exc:
                raise TaskError(f"{task.baseline_path}: {exc}") from None
            cost = Cost()
            status, checks, error, detail = self._correctness(task, cubin, labelled, plans, cost)
            if status is not Status.ok:
                raise TaskError(f"{task.baseline_path}: the baseline is {status.value}: {error}\n{detail}")
            self._baselines[key] = (cand, info, cubin)
            self._baseline_checks[key] = _Checked(info.code_hash or info.cubin_sha256, labelled, plans, checks, cost)
        return self._baselines[key]

    def _checked_as_baseline(self, task: Task, info: CompileInfo, labelled, plans, cost: Cost) -> list[Check] | None:
        """The baseline's correctness stage, for a candidate that is the baseline: the same machine code and
        the same launch plans at the same sizes, checked in this sandbox already (every check size, every
        distribution, two runs each), so it is not run a second time. Its GPU and reference seconds are
        charged to the first evaluation that takes it over. None for any other candidate."""
        done = self._baseline_checks.get(task.fingerprint)
        if done is None or done.code != (info.code_hash or info.cubin_sha256) or done.labelled != labelled \
                or done.plans != plans:
            return None
        if done.cost is not None:
            cost.check_gpu_s += done.cost.check_gpu_s
            cost.reference_s += done.cost.reference_s
            done.cost = None
        note = "checked once in this sandbox as the task's baseline (the same machine code and launch plans)"
        return [c.model_copy(update={"note": f"{c.note}; {note}" if c.note else note}) for c in done.checks]

    def _stronger_check(self, task: Task, cand: Candidate, info: CompileInfo, cubin: bytes, bench: dict,
                        flag: BelowRoofline, cost: Cost) -> tuple[Status, list[Check], str]:
        """The check a time below the naive roofline triggers (``sandbox.host.floor``): every check, held-out and
        the benchmark size, ``EXTRA_TRIALS`` times the distributions each. Its trials' labels go into ``flag``."""
        labelled, skipped = [], []
        for label, sizes in stronger_sizes(task, bench):
            try:
                self.plans(task, cand, info, [(label, sizes)])
                labelled.append((label, sizes))
            except PlanError as exc:
                skipped.append(f"{label}: {exc}")
        plans = self.plans(task, cand, info, labelled)
        count = EXTRA_TRIALS * distribution_count(task)
        status, checks, error, _ = self._correctness(task, cubin, labelled, plans, cost, per_size=count)
        flag.note = "; ".join(f"not run at {s}" for s in skipped)
        if status is not Status.ok:
            return status, checks, f"{flag.line()}; the stronger check it triggered failed: {error}"
        flag.rechecked = sorted({c.label.rsplit(" ", 1)[0] for c in checks})   # the trials, not their two runs
        return Status.ok, checks, ""

    def _correctness(self, task: Task, cubin: bytes, labelled, plans, cost: Cost, per_size: int | None = None):
        """``per_size``: the trials at every size (default: ``trial_count``'s)."""
        trials = []
        for label, sizes in labelled:
            count = per_size or trial_count(task, label, self.config.trials_per_check_size)
            for k in range(count):
                specs = input_specs(task, sizes, k)
                if label == "benchmark" and structural(specs) and count > 1:
                    continue   # structure-adversarial rows at the check and held-out sizes, not at the timed one
                trials.append(Trial(label=label if count == 1 else f"{label}#{k}", sizes=sizes, plan=plans[label],
                                    inputs=specs, outputs=output_specs(task, sizes), seed=new_seed()))
        hash_seed = self._rng.getrandbits(63)
        req = CheckTrials(harness=self.harness, cubin=cubin, trials=trials, data_dir=str(self.data_dir),
                          hash_seed=hash_seed, ipc=self.referee.ipc)
        try:
            reply = expect(self._gpu.call_ok(req, self.config.check_timeout_s), Checked)
        except WorkerTimeout as exc:
            return Status.timeout, [], f"correctness stage: {exc}", ""
        except WorkerDied as exc:
            return Status.crashed, [], str(exc), exc.tail
        checks: list[Check] = []
        by_label = {t.label: t for t in trials}
        ran: list[tuple[CompareTrial, TrialRun]] = []
        failed = None
        for tr in reply.trials:
            cost.check_gpu_s += tr.gpu_s
            for part, seconds in tr.split_s.items():
                self.check_split_s[part] = self.check_split_s.get(part, 0.0) + seconds
            trial = by_label[tr.label]
            if tr.status != "ran":
                failed = (Status(tr.status), f"{_where(trial)}: {tr.error}", tr.detail)
                break
            ran.append((CompareTrial(label=trial.label, sizes=trial.sizes, inputs=trial.inputs, outputs=trial.outputs,
                                     seed=trial.seed, runs=[RunOutputs(r, f) for r, f in sorted(tr.files.items())],
                                     input_hashes=tr.input_hashes), tr))
        for (trial, tr), found in zip(ran, self.referee.compare(task, [t for t, _ in ran], hash_seed, cost)):
            if not tr.identical:
                for c in found:
                    c.note = (c.note + "; " if c.note else "") + "the two runs on the same inputs differ bitwise"
            checks += found
            bad = [c for c in found if not c.passed]
            if bad:
                c = bad[0]
                again = " on the second run (a race or state kept between launches?)" if "run2" in c.label else ""
                return Status.wrong, checks, f"{_where(trial)}: output {c.output!r} is wrong{again}: {mismatch_text(c)}", ""
        if failed:
            return failed[0], checks, failed[1], failed[2]
        return Status.ok, checks, "", ""

    def _timing(self, task: Task, bench: dict, cubin: bytes, plan: dict, baseline, cost: Cost):
        """(status, Timing or None, what the environment adds, checks of kept launches, error, detail)."""
        req = timing_request(task, bench, cubin, plan, baseline, self.config, self._rng, self.harness,
                             self.referee.ipc, str(self.data_dir))
        try:
            reply = self._gpu.call_ok(req, self.config.time_timeout_s)
        except WorkerTimeout as exc:
            return Status.timeout, None, {}, [], f"timing stage: {exc}", ""
        except WorkerDied as exc:
            return Status.crashed, None, {}, [], f"timing stage: {exc}", exc.tail
        if isinstance(reply, StageFailed):
            if reply.status == "infrastructure":
                raise RuntimeError(f"the {reply.impl} broke a rule while being timed: {reply.error}")
            return Status(reply.status), None, {}, [], f"timing stage ({reply.impl}): {reply.error}", reply.detail
        reply = expect(reply, Timed)
        cost.time_gpu_s += reply.gpu_s
        checks: list[Check] = []
        kept = kept_trials(task, bench, req, reply)
        for trial, found in zip(kept, self.referee.compare(task, kept, cost=cost)):
            checks += found
            bad = [c for c in found if not c.passed]
            if bad:
                return (Status.wrong, None, {}, checks,
                        f"{trial.label}: output {bad[0].output!r} is wrong: {mismatch_text(bad[0])}", "")
        ceilings = self.ceilings
        timing = timing_record(task, bench, reply, ceilings, self.config.torch_tf32)
        status, error = sanity(timing)
        if status is Status.ok:
            status, error, timing.below_roofline = judge_floors(task, timing, ceilings,
                                                                self.config.roofline_reject_factor)
        return status, timing, timing_env(reply, ceilings), checks, error, ""


@dataclasses.dataclass
class _Checked:
    """The baseline's correctness stage in one sandbox: what was checked, the checks, their cost until charged."""

    code: str | None
    labelled: list
    plans: dict
    checks: list[Check]
    cost: Cost | None


def _where(trial: Trial | CompareTrial) -> str:
    dists = ", ".join(f"{spec['name']}: {spec['dist']}" for spec in trial.inputs)
    return f"{trial.label} ({describe_sizes(trial.sizes)}; {dists})"


def trial_count(task: Task, label: str, per_check_size: int) -> int:
    """Trials at one size: every listed distribution of every input at least once (``inputs.input_specs``
    rotates them), and at least ``per_check_size`` at a check size."""
    n = distribution_count(task)
    return n if label in ("benchmark", "size") else max(per_check_size, n)


HARNESS_NAMES = DEVICE_NAMES + ["hash_words", "hash_many", "bands_differ", "l2_flush_read", "hold_stream",
                                "fill_pattern", "seal_compared", "random_bands"]


def compile_harness(arch: str) -> tuple[bytes, dict[str, str]]:
    """harness.cu compiled for ``arch``: the cubin, and the lowered names of its kernels (``HARNESS_NAMES``). Kept
    in the cache folder by content (source, options, arch, NVRTC version), as candidates' compiles are: a
    sandbox opens without a second of NVRTC on its way."""
    source = HARNESS_SOURCE.read_text()
    options = [f"-arch={arch}", "-std=c++17", *[f"-I{d}" for d in compiler.include_dirs()]]
    entry = cache_dir() / "harness" / compiler.cache_key(source, options, arch, HARNESS_NAMES)
    cached = compiler.read_entry(entry)
    if cached is not None and cached[0].ok and set(HARNESS_NAMES) <= set(cached[0].lowered_names):
        return cached[1], cached[0].lowered_names
    info, cubin = compiler.nvrtc_compile(source, options, arch, HARNESS_NAMES)
    if not info.ok:
        raise RuntimeError(f"the harness kernels do not compile:\n{info.log}")
    compiler.write_entry(entry, info, cubin)
    return cubin, info.lowered_names
