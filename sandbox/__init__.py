"""kernelwright's sandbox: everything that touches CUDA. Usable alone; imports nothing from agent.

The seam, in one protocol::

    class Sandbox(Protocol):
        kind: str                      # "gpu", "compile-only" or "fake"
        device: dict                   # the environment fingerprint of the device (gpu None without one)
        def compile(self, task, candidate) -> Result       # status compiled / compile_error / rejected
        def evaluate(self, task, candidate, sizes=None, timing=True) -> Result
        def close(self) -> None

Importing this package imports neither CuPy nor CUDA bindings.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .candidate import Candidate, CandidateError, load_candidate, parse_candidate
from .evaluate import CompileOnlySandbox, GPUSandbox, SandboxConfig, open_sandbox
from .result import Result, Status
from .task import Task, TaskError, load_task, suite_names


@runtime_checkable
class Sandbox(Protocol):
    kind: str
    device: dict

    def compile(self, task: Task, candidate: Candidate) -> Result: ...

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None,
                 timing: bool = True) -> Result: ...

    def close(self) -> None: ...


__all__ = ["Sandbox", "Candidate", "CandidateError", "load_candidate", "parse_candidate", "CompileOnlySandbox",
           "GPUSandbox", "SandboxConfig", "open_sandbox", "Result", "Status", "Task", "TaskError", "load_task",
           "suite_names"]
