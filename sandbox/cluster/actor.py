"""What runs on the cluster: one ``SandboxActor`` per GPU, and ``compile_on_cpu`` for compiles.

Ray gives each actor one GPU (``num_gpus=1``: it sets ``CUDA_VISIBLE_DEVICES``, which the sandbox's worker
processes inherit), and the actor owns one sandbox there, with its worker processes, caches and ceilings. A
full evaluation runs inside that one sandbox, so the baseline and the candidate of every A/B timing share one
GPU and one worker process, exactly as without Ray. Every result an actor returns names where it was measured
(``Result.env["measured_on"]``: host, GPU model, its UUID or, for the fake sandbox, Ray's GPU number).

Nothing here imports Ray at module level: the driver wraps these in ``ray.remote`` (``sandbox.cluster.pool``).
Expected failures come back as values; an infrastructure failure (a worker that broke twice on one candidate,
a broken baseline) comes back as ``{"failure": reason}`` for the driver to end the run with.
"""

from __future__ import annotations

import platform

from ..candidate import Candidate, CandidateError
from ..host.config import SandboxConfig
from ..result import Result
from ..task import TaskError
from .ship import PackedTask, TaskShelf


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

    def hello(self) -> dict:
        return {"kind": self.sandbox.kind, "device": self.sandbox.device, "where": self.where,
                "can_screen": callable(getattr(self.sandbox, "screen", None))}

    def evaluate(self, packed: PackedTask, candidate: Candidate, sizes: dict | None = None, timing: bool = True) -> dict:
        """``{"result": Result JSON}``, or ``{"failure": reason}`` when the sandbox itself failed twice (a worker
        that broke is retried once, as ``agent.loop.judge`` does without Ray) or the task is broken."""
        try:
            task = self.shelf.get(packed)
        except TaskError as exc:
            return {"failure": str(exc).splitlines()[0]}
        for attempt in (1, 2):
            try:
                result = self.sandbox.evaluate(task, candidate, sizes, timing)
            except CandidateError as exc:
                return {"invalid": str(exc)}
            except TaskError as exc:
                return {"failure": str(exc).splitlines()[0]}
            except RuntimeError as exc:
                if attempt == 2:
                    return {"failure": str(exc).splitlines()[0]}
                continue
            result.env["measured_on"] = self.where
            return {"result": result.model_dump(mode="json")}
        raise AssertionError("unreachable")

    def profile(self, packed: PackedTask, candidate: Candidate, result: dict | None, parent_profile: dict | None) -> dict:
        """The profile, and the result as the profiler left it (profiling seconds in its cost, the profile in it)."""
        res = Result.model_validate(result) if result is not None else None
        prof = self.sandbox.profile(self.shelf.get(packed), candidate, result=res, parent_profile=parent_profile)
        return {"profile": prof, "result": res.model_dump(mode="json") if res is not None else None}

    def sanitize(self, packed: PackedTask, candidate: Candidate, kwargs: dict):
        return self.sandbox.sanitize(self.shelf.get(packed), candidate, **kwargs)

    def screen(self, packed: PackedTask, candidates: list[Candidate], kwargs: dict) -> list:
        return self.sandbox.screen(self.shelf.get(packed), candidates, **kwargs)

    def close(self) -> None:
        self.sandbox.close()
        self.shelf.close()


def compile_on_cpu(packed: PackedTask, candidate: Candidate, arch: str, device: dict, config: dict) -> dict:
    """A compile on any CPU of the cluster (a Ray task): ``{"result": Result JSON}`` (``compiled``, a compile
    error, a plan that cannot launch on ``device``) or ``{"invalid": reason}``."""
    sandbox = _PER_PROCESS.compiler(arch, device, config)
    try:
        result = sandbox.compile(_PER_PROCESS.shelf.get(packed), candidate)
    except CandidateError as exc:
        return {"invalid": str(exc)}
    return {"result": result.model_dump(mode="json")}


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
