"""kernelwright's sandbox: everything that touches CUDA. Usable alone; imports nothing from agent.

The seam, in one protocol::

    class Sandbox(Protocol):
        kind: str                      # "gpu", "compile-only" or "fake"
        device: dict                   # the environment fingerprint of the device (gpu None without one)
        def compile(self, task, candidate) -> Result       # status compiled / compile_error / rejected
        def evaluate(self, task, candidate, sizes=None, timing=True) -> Result
        def profile(self, task, candidate, result=None, parent_profile=None) -> dict   # ncu, or why not
        def sanitize(self, task, candidate) -> SanitizeReport   # compute-sanitizer, or why not
        def close(self) -> None

Layout: the shared vocabulary at the top (task with task_spec and task_reference, candidate, plan, expr,
dtypes, result, stats, compare, inputs, envinfo, cubin, compiler); ``host/`` orchestrates (the sandboxes, worker processes, screener),
``worker/`` runs on the device, ``profile/`` profiles with Nsight Compute. Importing this package
imports neither CuPy nor CUDA bindings.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .candidate import Candidate, CandidateError, load_candidate, parse_candidate
from .host.compile_only import CompileOnlySandbox
from .host.config import SANDBOX_KINDS, SandboxConfig, SandboxKind
from .host.fake import FakeSandbox
from .host.gpu import GPUSandbox
from .host.open import open_sandbox
from .result import Result, Status
from .sanitizer_report import SanitizeReport
from .task import Task, TaskError, load_task, suite_names


@runtime_checkable
class Sandbox(Protocol):
    kind: str
    device: dict

    def compile(self, task: Task, candidate: Candidate) -> Result: ...

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None,
                 timing: bool = True) -> Result: ...

    def profile(self, task: Task, candidate: Candidate, result: Result | None = None,
                parent_profile: dict | None = None) -> dict: ...

    def sanitize(self, task: Task, candidate: Candidate) -> SanitizeReport: ...

    def close(self) -> None: ...


__all__ = ["Sandbox", "Candidate", "CandidateError", "load_candidate", "parse_candidate", "CompileOnlySandbox",
           "GPUSandbox", "FakeSandbox", "SandboxConfig", "SandboxKind", "SANDBOX_KINDS", "open_sandbox", "Result",
           "SanitizeReport", "Status", "Task", "TaskError", "load_task", "suite_names"]
