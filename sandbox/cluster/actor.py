"""What runs on the cluster: one ``SandboxActor`` per GPU, and ``compile_on_cpu`` for compiles.

Ray gives each actor one GPU (``num_gpus=1``: it sets ``CUDA_VISIBLE_DEVICES``, which the sandbox's worker
processes inherit), and the actor owns one sandbox there, with its worker processes, caches and ceilings. A
full evaluation runs inside that one sandbox, so the baseline and the candidate of every A/B timing share one
GPU and one worker process, exactly as without Ray. Every result an actor returns names where it was measured
(``Result.env.measured_on``: host, GPU model, its UUID or, for the fake sandbox, Ray's GPU number).

Nothing here imports Ray at module level: the driver wraps these in ``ray.remote`` (``sandbox.cluster.pool``).
Every reply is a record: ``Hello`` when an actor starts, a job outcome (``sandbox.jobs``) for a compile or an
evaluation (an infrastructure failure, a worker that broke twice on one candidate or a broken baseline, is
``Failed`` for the driver to end the run with), ``Profiled`` for a profile.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from ..candidates.candidate import Candidate
from ..host.config import SandboxConfig
from ..jobs import Evaluated, Failed, Invalid, compile_job, evaluate_job
from ..judging.environment import MeasuredOn
from ..judging.result import Profile, Result
from ..tasks.task import TaskError
from .ship import PackedTask, TaskShelf


@dataclass(frozen=True)
class Hello:
    """What an actor answers when it starts: its sandbox's kind and device, where it measures, whether it screens."""

    kind: str
    device: dict
    where: dict
    can_screen: bool


@dataclass(frozen=True)
class Profiled:
    """A profile, and the result as the profiler left it (profiling seconds in its cost, the profile in it)."""

    profile: Profile
    result: Result | None


def where_measured(device: dict) -> dict:
    """This process's GPU as results name it: host, Ray node, GPU model, UUID (a real GPU) or Ray's GPU number."""
    import ray

    ctx = ray.get_runtime_context()
    gpus = [str(g) for g in ray.get_gpu_ids()]
    host = platform.node()
    uuid = device.get("uuid")
    ident = f"{host}/{uuid}" if uuid else f"{host}/{ctx.get_node_id()[:8]}/gpu{','.join(gpus) or '?'}"
    return {"id": ident, "host": host, "node": ctx.get_node_id(), "gpu": device.get("gpu"), "uuid": uuid,
            "pci_bus_id": device.get("pci_bus_id"), "ray_gpus": gpus}


class SandboxActor:
    """One GPU's sandbox, driven by the driver's ``RaySandbox``; ``kind`` is ``gpu`` or ``fake``."""

    def __init__(self, kind: str, config: dict):
        from ..host.open import open_sandbox

        self.sandbox = open_sandbox(kind, SandboxConfig.model_validate(config))
        self.shelf = TaskShelf()
        self.where = where_measured(self.sandbox.device)

    def hello(self) -> Hello:
        return Hello(self.sandbox.kind, self.sandbox.device, self.where, self.sandbox.can_screen)

    def evaluate(self, packed: PackedTask, candidate: Candidate, sizes: dict | None = None,
                 timing: bool = True) -> Evaluated | Invalid | Failed:
        """The outcome of one evaluation (``sandbox.jobs.evaluate_job``: a worker that broke is retried once, as
        without Ray); its result names the GPU that measured it."""
        try:
            task = self.shelf.get(packed)
        except TaskError as exc:
            return Failed(str(exc).splitlines()[0])
        outcome = evaluate_job(self.sandbox, task, candidate, sizes, timing)
        if isinstance(outcome, Evaluated):
            outcome.result.env.measured_on = MeasuredOn.model_validate(self.where)
        return outcome

    def profile(self, packed: PackedTask, candidate: Candidate, result: Result | None,
                parent_profile: Profile | None) -> Profiled:
        prof = self.sandbox.profile(self.shelf.get(packed), candidate, result=result, parent_profile=parent_profile)
        return Profiled(prof, result)

    def sanitize(self, packed: PackedTask, candidate: Candidate, kwargs: dict):
        return self.sandbox.sanitize(self.shelf.get(packed), candidate, **kwargs)

    def screen(self, packed: PackedTask, candidates: list[Candidate], kwargs: dict) -> list:
        return self.sandbox.screen(self.shelf.get(packed), candidates, **kwargs)

    def close(self) -> None:
        self.sandbox.close()
        self.shelf.close()


def compile_on_cpu(packed: PackedTask, candidate: Candidate, arch: str, device: dict,
                   config: dict) -> Evaluated | Invalid:
    """A compile on any CPU of the cluster (a Ray task): its result (``compiled``, a compile error, a plan that
    cannot launch on ``device``) or ``Invalid``."""
    sandbox = _PER_PROCESS.compiler(arch, device, config)
    return compile_job(sandbox, _PER_PROCESS.shelf.get(packed), candidate)


class _ProcessCompilers:
    """What one Ray worker process keeps between compile tasks: a compile sandbox per arch and settings (its
    compile worker starts once, not per candidate) and the unpacked task folders. Ray reuses worker processes;
    the compile workers exit with theirs (their pipe closes) and their folders are swept by the next sandbox."""

    def __init__(self):
        self._compilers: dict = {}
        self._shelf: TaskShelf | None = None

    @property
    def shelf(self) -> TaskShelf:
        if self._shelf is None:
            self._shelf = TaskShelf()
        return self._shelf

    def compiler(self, arch: str, device: dict, config: dict):
        from ..host.compile_only import CompileOnlySandbox

        key = (arch, repr(sorted(config.items())))
        if key not in self._compilers:
            self._compilers[key] = CompileOnlySandbox(SandboxConfig.model_validate({**config, "arch": arch}))
        sandbox = self._compilers[key]
        sandbox.device = dict(device)  # plans resolve against the GPU's own shared-memory limit
        return sandbox


_PER_PROCESS = _ProcessCompilers()
