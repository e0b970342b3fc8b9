"""``RaySandbox``: the sandbox seam (``sandbox.Sandbox``) over a Ray cluster.

One ``SandboxActor`` per GPU of one model (``sandbox.cluster.actor``; Ray places them), compiles as CPU tasks
anywhere in the cluster. The synchronous methods of the seam (``compile``, ``evaluate``, ``profile``,
``sanitize``, ``screen``) make any code written for one sandbox run on the cluster; the asynchronous ones let
the agent's loop keep every GPU busy:

    job = sandbox.submit_compile(task, candidate, tag)     # a CPU task, started at once
    job = sandbox.submit_evaluate(task, candidate, tag)    # waits for a free GPU actor, in order
    for job in sandbox.wait(timeout=0.5): ...              # finished jobs: job.tag, job.outcome (sandbox.jobs)

``screen`` spreads a batch of configurations over the free actors and returns their results in order; every
screened time is relative to the baseline timed in the same worker on the same GPU. ``profile`` runs on the
actor that measured the result where it is free. ``slots`` is the number of live actors.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..candidates.candidate import Candidate, CandidateError
from ..host.config import SandboxConfig
from ..jobs import Evaluated, Failed, Invalid, Job, Lost, Outcome
from ..judging.result import Result
from ..judging.result import Profile, Result
from ..protocol import Sandbox
from ..tasks.task import Task
from .connect import ClusterError, choose_group, connect, gpu_count, require_ray
from .jobs import ActorJob, GpuActors
from .ship import PackedTask, pack

HELLO_TIMEOUT_S = 600.0
KEEP_COMPILES = 4096


class RaySandbox(Sandbox):
    """See the module docstring. ``kind``: the sandbox each actor opens (``gpu``, ``fake`` or ``auto``: a GPU
    sandbox where the GPU answers). ``gpus``: at most this many actors (default: every GPU of the chosen
    model); ``gpu_model``: which model in a cluster that mixes them (default: the one with the most GPUs)."""

    def __init__(self, kind: str = "auto", config: SandboxConfig | None = None, address: str = "local",
                 gpus: int | None = None, gpu_model: str | None = None):
        if kind == "compile-only":
            raise ClusterError("a compile-only sandbox runs nothing on a GPU: there is nothing to spread over a cluster")
        self.ray = ray = require_ray()
        self.config = config or SandboxConfig()
        self.address = address
        self._owns_ray = connect(ray, address, fake_gpus=(gpus or 2) if kind == "fake" else None)
        try:
            self._start(kind, gpus, gpu_model)
        except BaseException:
            self._shutdown()
            raise
        self.opened = time.monotonic()

    def _start(self, kind: str, gpus: int | None, gpu_model: str | None) -> None:
        from .actor import SandboxActor, compile_on_cpu

        ray = self.ray
        total = gpu_count(ray)
        if total < 1:
            raise ClusterError(f"the Ray cluster ({self.address}) has no GPU resources: each sandbox actor needs one "
                               "(num_gpus=1)")
        lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError)
        remote_cls = ray.remote(SandboxActor).options(num_gpus=1, num_cpus=0, max_restarts=0)
        config = self.config.model_dump(mode="json")
        self._compile_remote = ray.remote(compile_on_cpu).options(num_cpus=1, max_retries=1)
        pool = GpuActors(ray, remote_cls, kind, config, (), lost)
        started = [pool.new_actor() for _ in range(min(gpus or total, total))]
        hellos, handles, errors = {}, {}, []
        for name, handle, ref in started:
            try:
                hellos[name], handles[name] = ray.get(ref, timeout=HELLO_TIMEOUT_S), handle
            except Exception as exc:  # no usable device there, a timeout: said below if no actor came up
                errors.append(f"{name}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__}")
                ray.kill(handle)
        if not hellos:
            raise ClusterError(f"no sandbox actor started on the cluster: {'; '.join(errors)}")
        model, names, self.left_out = choose_group(hellos, gpu_model)
        if model[0] == "compile-only":
            raise ClusterError("the actors found no usable CUDA device (their sandboxes are compile-only)")
        pool.model = model
        for name in hellos:
            if name in names:
                pool.add(name, handles[name], hellos[name])
            else:
                ray.kill(handles[name])
        self.pool = pool
        self.start_errors = errors
        first = hellos[names[0]]
        self.kind = first.kind
        self.device = dict(first.device)
        self.arch = self.device.get("arch")
        self.can_screen = all(hellos[n].can_screen for n in names)
        self._packed: dict[str, tuple[PackedTask, Any]] = {}
        self._compiles: dict[tuple[str, str], ActorJob] = {}
        self._compiling: dict[Any, ActorJob] = {}
        self._done: list[ActorJob] = []

    # ---- what the run records ----------------------------------------------------------------

    @property
    def slots(self) -> int:
        return len(self.pool.actors)

    @property
    def gpus(self) -> list[dict]:
        """Where each live actor measures (host, GPU model, UUID or Ray's GPU number)."""
        return [a.where for a in self.pool.actors.values()]

    def describe(self) -> dict:
        """For run.json and the summary: the cluster, its GPUs, what was left out, what was lost."""
        return {"address": self.address, "kind": self.kind, "model": self.device.get("gpu"), "gpus": self.gpus,
                "left_out": list(self.left_out), "start_errors": list(self.start_errors), "lost": list(self.pool.lost_log)}

    def usage(self) -> dict:
        """Seconds each actor was busy since the sandbox opened, and that wall time."""
        busy = {a.name: round(a.busy_s, 3) for a in self.pool.actors.values()}
        return {"wall_s": round(time.monotonic() - self.opened, 3), "busy_s": busy}

    # ---- asynchronous ------------------------------------------------------------------------

    def packed(self, task: Task) -> Any:
        """The task's files in Ray's object store, put once per fingerprint."""
        if task.fingerprint not in self._packed:
            p = pack(task)
            self._packed[task.fingerprint] = (p, self.ray.put(p))
        return self._packed[task.fingerprint][1]

    def submit_compile(self, task: Task, candidate: Candidate, tag: Any = None) -> ActorJob:
        """A compile on the cluster's CPUs. With a ``tag`` it is returned by ``wait`` when done (a compile that
        ``prefetch`` started is taken over); without one it is for ``compile`` and ``prefetch``."""
        key = (task.fingerprint, candidate.key)
        job = self._compiles.get(key)
        if job is not None and (tag is None or job.tag is None):
            if tag is not None:
                job.tag, job.sync = tag, False
                if job.done:
                    self._done.append(job)
            return job
        job = ActorJob("compile", tag=tag, sync=tag is None)
        ref = self._compile_remote.remote(self.packed(task), candidate, self.arch, self.device,
                                          self.config.model_dump(mode="json"))
        self._compiling[ref] = job
        self._compiles[key] = job
        while len(self._compiles) > KEEP_COMPILES:
            self._compiles.pop(next(iter(self._compiles)))
        return job

    def submit_evaluate(self, task: Task, candidate: Candidate, tag: Any = None, sizes: dict | None = None,
                        timing: bool = True) -> ActorJob:
        job = ActorJob("evaluate", tag=tag, args=(self.packed(task), candidate, sizes, timing))
        self.pool.submit(job)
        return job

    def wait(self, timeout: float = 0.5) -> list[Job]:
        """Jobs submitted with a tag that finished since the last call (at most ``timeout`` seconds of waiting)."""
        if not self._done:
            self._poll(timeout)
        done, self._done = self._done, []
        return done

    def _poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` for any GPU call, replacement actor or compile; take everything finished."""
        refs = self.pool.refs() + list(self._compiling)
        if not refs:
            return
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        self._done += [job for job in self.pool.collect(ready) if not job.sync]
        for ref in ready:
            job = self._compiling.pop(ref, None)
            if job is None:
                continue
            try:
                job.outcome = self.ray.get(ref)
            except Exception as exc:  # the task raised, or its worker died twice
                text = str(exc).strip()
                job.outcome = Failed(f"compile task: {text.splitlines()[-1][:300] if text else type(exc).__name__}")
            job.done = True
            if not job.sync:
                self._done.append(job)

    def _until(self, job: ActorJob) -> Any:
        while not job.done:
            self._poll(0.5)
        return job.outcome

    def _call(self, op: str, *args, prefer: str | None = None) -> Any:
        job = ActorJob(op, args=args, prefer=prefer, sync=True)
        self.pool.submit(job, front=True)
        return self._until(job)

    # ---- the Sandbox protocol ----------------------------------------------------------------

    def prefetch(self, task: Task, candidates: list[Candidate]) -> None:
        """Start compiling ``candidates`` on the cluster's CPUs; a later ``compile`` of one finds it under way."""
        for cand in candidates:
            self.submit_compile(task, cand)

    def compile(self, task: Task, candidate: Candidate) -> Result:
        return job_result(self._until(self.submit_compile(task, candidate)))

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None, timing: bool = True) -> Result:
        return job_result(self._call("evaluate", self.packed(task), candidate, sizes, timing))

    def evaluate_alone(self, task: Task, candidate: Candidate) -> Result:
        """``evaluate`` with nothing else running on any of the cluster's GPUs: the jobs waiting for an actor are held
        back, the calls under way finish (their jobs come back from ``wait`` as usual), then this evaluation runs on
        one actor, alone; the jobs held back are handed out again after it."""
        held = list(self.pool.queue)
        self.pool.queue.clear()
        try:
            while self.pool.running:
                self._poll(0.5)
            return self.evaluate(task, candidate)
        finally:
            self.pool.queue.extend(held)
            self.pool.dispatch()

    def profile(self, task: Task, candidate: Candidate, result: Result | None = None,
                parent_profile: Profile | None = None) -> Profile:
        """Nsight Compute on the GPU that measured ``result`` where it is free, else on another of the same model."""
        where = result.env.measured_by() if result is not None else None
        prefer = next((a.name for a in self.pool.actors.values() if a.where.get("id") == where), None)
        from .actor import Profiled

        out = self._call("profile", self.packed(task), candidate, result, parent_profile, prefer=prefer)
        if not isinstance(out, Profiled):
            raise RuntimeError(f"profiling on the cluster failed: {refusal(out)}")
        if result is not None and out.result is not None:
            result.profile, result.cost = out.result.profile, out.result.cost
        return out.profile

    def sanitize(self, task: Task, candidate: Candidate, **kwargs):
        out = self._call("sanitize", self.packed(task), candidate, kwargs)
        if isinstance(out, (Failed, Lost)):
            raise RuntimeError(f"compute-sanitizer on the cluster failed: {refusal(out)}")
        return out

    def close(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()
        self._shutdown()

    def _shutdown(self) -> None:
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
        self._owns_ray = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def screen(self, task: Task, candidates: list[Candidate], **kwargs) -> list:
        """Screen ``candidates`` in contiguous chunks, one per free actor, each against the baseline on its own
        GPU; the results in the order of ``candidates``. A chunk lost twice is screened as ``crashed``."""
        from ..host.screener import Screened

        if not self.can_screen:
            return super().screen(task, candidates, **kwargs)
        if not candidates:
            return []
        n = max(1, min(self.slots, len(candidates)))
        size = math.ceil(len(candidates) / n)
        chunks = [candidates[i:i + size] for i in range(0, len(candidates), size)]
        jobs = [ActorJob("screen", args=(self.packed(task), chunk, kwargs), sync=True) for chunk in chunks]
        for job in reversed(jobs):
            self.pool.submit(job, front=True)
        out = []
        for job, chunk in zip(jobs, chunks):
            found = self._until(job)
            if isinstance(found, Failed):
                raise RuntimeError(f"screening on the cluster failed: {found.reason}")
            if isinstance(found, Lost):
                found = [Screened("crashed", error=f"lost with its GPU actor: {refusal(found)}") for _ in chunk]
            out.extend(found)
        return out


def job_result(outcome: Outcome) -> Result:
    """The result a compile task or an actor returned; a CandidateError, or a RuntimeError when the sandbox failed
    or the job was lost twice (as a sandbox that breaks raises)."""
    match outcome:
        case Evaluated(result):
            return result
        case Invalid(reason):
            raise CandidateError(reason)
        case Failed() | Lost():
            raise RuntimeError(refusal(outcome))
    raise TypeError(f"not a job outcome: {outcome!r}")


def refusal(outcome: Failed | Lost) -> str:
    """Why a job came back without an answer, in words."""
    if isinstance(outcome, Lost):
        return "its GPU actor was lost twice: " + "; ".join(outcome.reasons)
    return outcome.reason
