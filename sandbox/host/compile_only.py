"""``CompileOnlySandbox`` (any machine, no GPU, no driver): a ``Builder`` (``sandbox.host.builder``: NVRTC in a
pool of compile workers) plus a profiler and a ``sanitize`` that say there is no GPU to run on. The GPU and
fake sandboxes build on it."""

from __future__ import annotations

from pathlib import Path

from ..candidates import compiler
from ..candidates.candidate import Candidate
from ..candidates.plan import PlanError, resolve, shared_limit
from ..judging.environment import Environment
from ..judging.result import CompileInfo, Profile, Result, Status
from ..judging.sanitizer_report import DEFAULT_TOOLS, SanitizeReport
from ..plumbing import tempdirs
from ..protocol import Sandbox
from ..tasks.task import Task
from .builder import Builder, new_result
from .config import SandboxConfig
from .profiler import Profiler


def labelled_sizes(task: Task, bench: dict[str, int]) -> list[tuple[str, dict[str, int]]]:
    """Every check size, then the timed size: ``benchmark``, or ``size`` when another was asked for."""
    labelled = [(f"check[{i}]", s) for i, s in enumerate(task.spec.sizes.check)]
    labelled.append(("benchmark" if bench == task.spec.sizes.benchmark else "size", bench))
    return labelled


class CompileOnlySandbox(Sandbox):
    """Compile and resource reports only: works on machines with no GPU and no driver. One slot, as every local
    sandbox (``sandbox.protocol``)."""

    kind = "compile-only"
    instead_of_gpu = ""   # set by open_sandbox("auto") where no GPU sandbox opened: why not

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
            result.env = Environment.model_validate(self.device)
            try:
                self.plans(task, candidate, built.info, labelled_sizes(task, task.spec.sizes.benchmark))
            except PlanError as exc:
                result.status, result.error = Status.launch_error, str(exc)
        return result

    def compile_many(self, task: Task, candidates: list[Candidate]) -> list[Result]:
        """``compile`` for each candidate, the compiles run side by side in the builder's pool."""
        self.builder.prefetch(task, candidates)
        return [self.compile(task, c) for c in candidates]

    def prefetch(self, task: Task, candidates: list[Candidate]) -> int:
        """Start compiling ``candidates`` in the background (``Builder.prefetch``); a later ``compile``,
        ``evaluate`` or ``screen`` of one of them waits only for what is left of its compile."""
        return self.builder.prefetch(task, candidates)

    def warm(self) -> None:
        """Start every compile worker in the background (``Builder.warm``)."""
        self.builder.warm()

    def warm_profiler(self) -> None:
        """Start a profiling run ahead of the first profile (``Profiler.start_ahead``; nothing without a GPU)."""
        self.profiler.start_ahead()

    def plans(self, task: Task, candidate: Candidate, info: CompileInfo, labelled) -> dict[str, dict]:
        """The plan resolved at each labelled size, within this device's (or target's) shared memory per block."""
        limit = shared_limit(self.device, self.arch)
        return {label: resolve(task, candidate, info, s, limit) for label, s in labelled}

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None, timing: bool = True) -> Result:
        """Without a GPU, evaluation is compilation: the status is ``compiled`` on success."""
        return self.compile(task, candidate)

    def profile(self, task: Task, candidate: Candidate, result: Result | None = None, parent_profile: Profile | None = None,
                sizes: dict[str, int] | None = None, save_to: Path | None = None) -> Profile:
        """Profile and diagnose ``candidate`` (``sandbox.host.profiler.Profiler.profile``)."""
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
