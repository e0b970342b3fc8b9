"""Compiling on the host side: ``Builder`` runs NVRTC in a compile worker after the static checks, and
``CompileOnlySandbox`` (any machine, no GPU, no driver) is a builder plus a profiler and a ``sanitize``
that say there is no GPU to run on. The GPU and fake sandboxes build on it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

from .. import compiler
from ..candidate import Candidate, static_problems, validate_for_task
from ..plan import PlanError, resolve, shared_limit
from ..profile.profiler import Profiler
from ..result import CompileInfo, Cost, Result, Status
from ..sanitizer_report import DEFAULT_TOOLS, SanitizeReport
from ..task import Task
from .config import SandboxConfig
from . import tempdirs
from .pool import WorkerDied, WorkerProcess, WorkerTimeout


class Built(NamedTuple):
    """A candidate after compiling: its result so far (``compiled`` or why not), the compiler's report and the cubin."""

    result: Result
    info: CompileInfo | None
    cubin: bytes | None


def new_result(task: Task, candidate: Candidate, status: Status, **kw) -> Result:
    """A Result for ``candidate`` on ``task``, naming both."""
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                  candidate_key=candidate.key, knobs=candidate.defines(), flags=list(candidate.flags), **kw)


def labelled_sizes(task: Task, bench: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """Every check size, then the timed size: ``benchmark``, or ``size`` when another was asked for."""
    labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)]
    labelled.append(("benchmark" if bench == task.spec.sizes.benchmark else "size", bench))
    return labelled


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return (log.strip().splitlines() or ["compile failed"])[0][:300]


class Builder:
    """Static checks, then NVRTC in a compile worker process (its compiles are cached by content)."""

    def __init__(self, config: SandboxConfig, arch: str):
        self.config, self.arch = config, arch
        self._worker = WorkerProcess("compile")

    def build(self, task: Task, candidate: Candidate) -> Built:
        validate_for_task(candidate, task)
        problems = static_problems(candidate, task)
        if problems:
            return Built(new_result(task, candidate, Status.rejected, error=problems[0], detail="\n".join(problems)),
                         None, None)
        req = dict(source=candidate.source, flags=list(candidate.flags), knobs=candidate.defines(), arch=self.arch)
        t0 = time.perf_counter()
        try:
            reply = self._worker.call(req, timeout=self.config.compile_timeout_s)
        except WorkerTimeout as exc:
            return Built(new_result(task, candidate, Status.timeout, error=f"compile: {exc}",
                                    cost=Cost(compile_s=time.perf_counter() - t0)), None, None)
        except WorkerDied as exc:
            return Built(new_result(task, candidate, Status.compile_error, error=f"the compiler process died: {exc}",
                                    detail=exc.tail, cost=Cost(compile_s=time.perf_counter() - t0)), None, None)
        if not reply["ok"]:
            raise RuntimeError(f"compile worker failed: {reply['error']}\n{reply.get('traceback', '')}")
        info = CompileInfo.model_validate(reply["info"])
        cost = Cost(compile_s=time.perf_counter() - t0, wall_s=time.perf_counter() - t0)
        if not info.ok:
            return Built(new_result(task, candidate, Status.compile_error, error=_first_error(info.log), detail=info.log,
                                    compile=info, cost=cost), info, None)
        return Built(new_result(task, candidate, Status.compiled, compile=info, cost=cost), info, reply["cubin"])

    def close(self) -> None:
        self._worker.close()


class CompileOnlySandbox:
    """Compile and resource reports only: works on machines with no GPU and no driver."""

    kind = "compile-only"

    def __init__(self, config: SandboxConfig | None = None, arch: str | None = None,
                 harness_cubin: bytes | None = None):
        tempdirs.sweep()  # what killed runs left behind
        self.config = config or SandboxConfig()
        self.arch = self.config.arch or arch or compiler.DEFAULT_ARCH
        self.device: dict = {"gpu": None, "arch": self.arch}
        self.builder = Builder(self.config, self.arch)
        self.profiler = Profiler(self.builder.build, self.kind, self.arch, harness_cubin)

    def compile(self, task: Task, candidate: Candidate) -> Result:
        """Compile, then resolve the plan at every check size and the benchmark size against the kernels as
        compiled (arguments, shared memory limit): a plan that cannot launch is a ``launch_error``."""
        built = self.builder.build(task, candidate)
        result = built.result
        if result.status is Status.compiled:
            result.env = dict(self.device)
            try:
                self.plans(task, candidate, built.info, labelled_sizes(task, task.spec.sizes.benchmark))
            except PlanError as exc:
                result.status, result.error = Status.launch_error, str(exc)
        return result

    def plans(self, task: Task, candidate: Candidate, info: CompileInfo, labelled) -> dict[str, dict]:
        """The plan resolved at each labelled size, within this device's (or target's) shared memory per block."""
        limit = shared_limit(self.device, self.arch)
        return {label: resolve(task, candidate, info, s, limit) for label, s in labelled}

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None, timing: bool = True) -> Result:
        """Without a GPU, evaluation is compilation: the status is ``compiled`` on success."""
        return self.compile(task, candidate)

    def profile(self, task: Task, candidate: Candidate, result: Result | None = None, parent_profile: dict | None = None,
                sizes: dict[str, int] | None = None, save_to: Path | None = None) -> dict:
        """Profile and diagnose ``candidate`` (``sandbox.profile.profiler.Profiler.profile``)."""
        return self.profiler.profile(task, candidate, result, parent_profile, sizes, save_to)

    def sanitize(self, task: Task, candidate: Candidate, tools=DEFAULT_TOOLS, check_sizes: int = 2,
                 timeout_s: float = 300.0) -> SanitizeReport:
        """compute-sanitizer runs kernels: without a GPU the report says that nothing was sanitized."""
        return SanitizeReport(status="unavailable", reason=f"{self.kind} sandbox: no GPU")

    def close(self) -> None:
        self.builder.close()
        self.profiler.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
