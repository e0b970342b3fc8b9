"""Screening: many candidates timed against the baseline in one GPU process, at a fraction of an
evaluation's cost, for sweeps that measure every point of a space.

``GPUSandbox.evaluate`` checks each candidate against the reference at every check size, times it
and checks timed outputs again: about a second or more of fixed cost per candidate at benchmark
size (fresh buffers, reference recomputed, outputs moved through files). ``screen`` keeps the
benchmark-size inputs, the baseline's outputs and the process across a batch. Per candidate it times
interleaved A/B rounds with a cold L2 between a first run and a last run on other inputs, and compares
every run of the candidate on the device with the baseline's output for the same inputs (the test of
``sandbox.judging.agreement``; the baseline itself passed the full correctness stage first), guard bands and
input hashes checked. It does not compare with the reference at the check sizes: a screened winner is
only a winner once ``evaluate`` agrees.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field

from typing import Callable

from ..candidates.candidate import Candidate
from ..candidates.plan import PlanError, resolve
from ..judging import stats
from ..judging.result import Status
from ..tasks.inputs import input_specs, output_specs
from ..tasks.keyed import new_seed
from ..tasks.task import Task
from ..wire import (HarnessCode, Impl, Screen, ScreenBatch, ScreenCandidate, ScreenedRun, ScreenReady, ScreenSetup,
                    WorkerError, tolerances)
from .pool import WorkerDied, WorkerProcess, WorkerTimeout, expect


@dataclass
class Screened:
    """One candidate's screening: ``relative`` is its median time over the baseline's, paired by round.
    ``rounds``: the timed rounds it ran; ``stopped``: why before the last (``settled``: its ratio was known
    well enough; ``slower``: it was surely slower than the best so far by the margin), or empty."""

    status: str
    ms: float | None = None
    baseline_ms: float | None = None
    relative: float | None = None
    relative_ci: tuple[float, float] | None = None
    error: str = ""
    compile_s: float = 0.0
    gpu_s: float = 0.0
    samples: list[float] = field(default_factory=list)
    rounds: int = 0
    stopped: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Screener:
    """The host side of screening for one GPU sandbox. ``build(task, candidate)`` compiles (the sandbox's
    builder); ``baseline(task)`` gives the task's baseline, checked in full once: (candidate, compile info,
    cubin); ``gpu`` is the sandbox's GPU worker, which keeps the screening's state (``sandbox.worker.screening``)
    from one ``screen`` to the next while it runs nothing else; ``harness`` is the device harness every GPU
    request carries; ``setup_timeout_s`` limits the set-up; ``ready(candidate)`` says whether its compile is done.

    The GPU does not wait for compiles it could do without: the screening state is set up while the compiles
    (started by the sandbox before ``screen``) run, and a batch goes to the GPU as soon as it is full or the
    next candidate's compile is still running, so later compiles overlap earlier screenings."""

    def __init__(self, build: Callable, baseline: Callable, gpu: WorkerProcess, harness: HarnessCode,
                 setup_timeout_s: float, ready: Callable[[Candidate], bool] | None = None):
        self.build, self.baseline, self.gpu, self.harness = build, baseline, gpu, harness
        self.ready = ready                            # whether a candidate's compile is done (None: take every one
                                                      # as ready, so batches are always full)
        self.setup_timeout_s = setup_timeout_s
        self._setup: tuple[str, ScreenSetup] | None = None  # (task fingerprint, the set-up request) of the last one
        self._set_up_in = None                       # the worker process (its start count) holding that state
        self.setups = 0                               # set-ups sent to the worker (a cost worth seeing)
        self.setup_s = 0.0                            # and their wall seconds
        self.best: dict[str, float] = {}              # task fingerprint -> the best ratio screened so far
        self.noise: dict[str, float] = {}             # task fingerprint -> the spread of a paired ratio at its set-up

    def screen(self, task: Task, candidates: list[Candidate], rounds: int = 15, batch: int = 16,
               timeout_s: float = 10.0, best: float | None = None, min_rounds: int = 6, target: float = 0.01,
               margin: float = 1.1) -> list[Screened]:
        """Screen ``candidates`` at the task's benchmark size, in the order given.

        The GPU worker sets up the inputs and the baseline's outputs once per task (again only if it was
        restarted or ran something else in between); then batches of ``batch`` candidates share one request,
        each allowed ``timeout_s`` seconds. A candidate runs ``min_rounds`` to ``rounds`` timed rounds: it
        stops once its ratio to the baseline is settled within ``target``, or is surely above the best ratio
        known (``best``, or the best this screener measured for the task, in this call or an earlier one) times
        ``margin``; one far above that bar (by the noise measured at the set-up) stops after three rounds
        (``sandbox.judging.stats.screening_stop``). A batch whose
        worker dies or passes its limit is split and retried until the candidate responsible is alone; that
        candidate is ``crashed`` or ``timeout``."""
        if rounds < 5:
            raise ValueError(f"screen: rounds must be at least 5 (got {rounds})")
        out: list[Screened | None] = [None] * len(candidates)
        if candidates:
            self._worker_for(task)  # set up while the compiles run
        rng = random.SystemRandom()
        known = self.best.get(task.fingerprint)
        best = known if best is None else best if known is None else min(best, known)
        for batch_of in self._batches(task, candidates, batch, out):
            pending = [batch_of]
            while pending:
                group = pending.pop(0)
                batch_req = dict(candidates=[c for _, c, _ in group], rounds=rounds,
                                 min_rounds=min(min_rounds, rounds), target=target, margin=margin,
                                 stop_above=None if best is None else best * margin, order_seed=rng.getrandbits(62))
                try:
                    reply = self._call(task, batch_req, timeout_s * len(group))
                except (WorkerDied, WorkerTimeout) as exc:
                    if len(group) > 1:
                        half = len(group) // 2
                        pending[:0] = [group[:half], group[half:]]
                        continue
                    i, _, compile_s = group[0]
                    status = Status.timeout if isinstance(exc, WorkerTimeout) else Status.crashed
                    out[i] = Screened(status.value, error=str(exc).splitlines()[0], compile_s=compile_s)
                    continue
                for (i, _, compile_s), rec in zip(group, reply.results):
                    out[i] = _screened(rec, compile_s)
                    if out[i].ok and out[i].stopped != "slower":
                        best = out[i].relative if best is None else min(best, out[i].relative)
        if best is not None:
            self.best[task.fingerprint] = best
        return out  # type: ignore[return-value]

    def _batches(self, task: Task, candidates: list[Candidate], batch: int, out: list):
        """Batches of compiled candidates ``(index, ScreenCandidate, compile seconds)``, each yielded once it is full
        or the next candidate's compile is still running; a candidate that failed to compile or to plan gets its
        ``out`` entry here and joins no batch."""
        bench = task.spec.sizes.benchmark
        group: list = []
        for i, cand in enumerate(candidates):
            if group and (len(group) >= batch or (self.ready is not None and not self.ready(cand))):
                yield group
                group = []
            compiled, info, cubin = self.build(task, cand)
            if compiled.status is not Status.compiled:
                out[i] = Screened(compiled.status.value, error=compiled.error, compile_s=compiled.cost.compile_s)
                continue
            try:
                plan = resolve(task, cand, info, bench)
            except PlanError as exc:
                out[i] = Screened(Status.launch_error.value, error=str(exc), compile_s=compiled.cost.compile_s)
                continue
            group.append((i, ScreenCandidate(key=i, cubin=cubin, plan=plan), compiled.cost.compile_s))
        if group:
            yield group

    def _worker_for(self, task: Task) -> ScreenSetup:
        """The set-up request of ``task``'s screening, sent first to a GPU worker that does not hold it."""
        if self._setup is None or self._setup[0] != task.fingerprint:
            self._setup, self._set_up_in = (task.fingerprint, self._setup_request(task)), None
        setup = self._setup[1]
        if self._set_up_in is None or not self.gpu.alive or self.gpu.started != self._set_up_in:
            t0 = time.perf_counter()
            ready = expect(self.gpu.call_ok(setup, self.setup_timeout_s), ScreenReady)
            self.noise[task.fingerprint] = ready.noise
            self._set_up_in = self.gpu.started
            self.setups += 1
            self.setup_s += time.perf_counter() - t0
        return setup

    def _call(self, task: Task, batch: dict, timeout: float) -> ScreenBatch:
        """Send a screen request (``batch``: its fields but the set-up's id) to a worker that holds this task's
        screening state (set up first if not)."""
        for attempt in range(2):
            setup = self._worker_for(task)
            reply = self.gpu.call(Screen(setup_id=setup.setup_id, **batch), timeout)
            if isinstance(reply, WorkerError) and reply.setup_lost and attempt == 0:  # the worker ran another stage
                self._set_up_in = None                                                # since: set up again
                continue
            if isinstance(reply, WorkerError):
                raise RuntimeError(f"gpu worker: {reply.error}\n{reply.traceback}")
            return expect(reply, ScreenBatch)
        raise RuntimeError("gpu worker: the screening state was lost twice in a row")

    def _setup_request(self, task: Task) -> ScreenSetup:
        bench = task.spec.sizes.benchmark
        b_cand, b_info, b_cubin = self.baseline(task)
        rng = random.SystemRandom()
        return ScreenSetup(harness=self.harness, setup_id=rng.getrandbits(62),
                           baseline=Impl(cubin=b_cubin, plan=resolve(task, b_cand, b_info, bench)),
                           inputs=[input_specs(task, bench, k) for k in range(2)], outputs=output_specs(task, bench),
                           tolerance=tolerances(task), seed=new_seed(), hash_seed=rng.getrandbits(63))


def _screened(rec: ScreenedRun, compile_s: float) -> Screened:
    if rec.status != "ok":
        return Screened(rec.status, error=rec.error, compile_s=compile_s, gpu_s=rec.gpu_s)
    cand, base = rec.samples, rec.baseline_samples
    _, lo, hi = stats.speedup_ci(base, cand)
    return Screened("ok", ms=statistics.median(cand), baseline_ms=statistics.median(base),
                    relative=stats.relative_time(cand, base),
                    relative_ci=(1.0 / hi, 1.0 / lo), compile_s=compile_s, gpu_s=rec.gpu_s, samples=cand,
                    rounds=len(cand), stopped=rec.stopped)


__all__ = ["Screened", "Screener"]
