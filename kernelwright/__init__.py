"""kernelwright: make CUDA kernels faster and prove it. The API for notebooks and scripts.

    import kernelwright as kw

    result = kw.evaluate("softmax", "my_softmax.cu")            # check, then time A/B against the baseline
    print(result.summary(), result.speedup("baseline"))         # an Interval(value, low, high), or None
    run = kw.optimize("softmax", sandbox="fake", iterations=4)  # a run of the loop; returns a Run
    run = kw.load_run("traces/20261129-141722-softmax-ab0c")    # a stored run: no GPU, no model
    kw.compare([run, other])                                    # their claims side by side

Functions: ``optimize``, ``evaluate``, ``load_run``, ``compare``, and ``load_task``, ``load_candidate``,
``open_sandbox`` for finer control. Results are typed: ``Run`` (a run's trace folder, lineage and summary),
``Entry`` (one candidate of a lineage), ``Result`` (a sandbox's verdict on one candidate, with ``Status``,
``Timing`` and ``Interval``), ``Comparison`` (runs side by side), ``Stop`` and ``StopReason`` (why a run ended).

No GPU? ``sandbox="fake"`` compiles every candidate with NVRTC and simulates its run (every figure says
SIMULATED); ``sandbox="compile-only"`` compiles and checks plans without running anything.

Importing this package imports neither CuPy nor the openai SDK; each name loads on first use. It holds the
facade only and may import ``agent`` and ``sandbox``, which it makes sure are kernelwright's own (see
``_packages``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from . import _packages

_packages.claim()

__version__ = "0.1.0"

_EXPORTS = {
    "optimize": "agent.api", "load_run": "agent.api", "Run": "agent.api",
    "Entry": "agent.protocols", "Stop": "agent.stops", "StopReason": "agent.stops",
    "evaluate": "kernelwright._evaluate", "compare": "kernelwright._compare", "Comparison": "kernelwright._compare",
    "RunRow": "kernelwright._compare",
    "Result": "sandbox.judging.result", "Status": "sandbox.judging.result", "Timing": "sandbox.judging.result",
    "Interval": "sandbox.judging.result",
    "Task": "sandbox.tasks.task", "load_task": "sandbox.tasks.task", "TaskError": "sandbox.tasks.task",
    "Candidate": "sandbox.candidates.candidate", "load_candidate": "sandbox.candidates.candidate",
    "CandidateError": "sandbox.candidates.candidate",
    "open_sandbox": "sandbox.host.open", "SandboxConfig": "sandbox.host.config",
}

if TYPE_CHECKING:
    from agent.api import Run, load_run, optimize
    from agent.stops import Stop, StopReason
    from agent.protocols import Entry
    from sandbox.candidates.candidate import Candidate, CandidateError, load_candidate
    from sandbox.host.config import SandboxConfig
    from sandbox.host.open import open_sandbox
    from sandbox.judging.result import Interval, Result, Status, Timing
    from sandbox.tasks.task import Task, TaskError, load_task

    from ._compare import Comparison, RunRow, compare
    from ._evaluate import evaluate

__all__ = ["optimize", "evaluate", "load_run", "compare", "Run", "Entry", "Result", "Status", "Timing", "Interval",
           "Comparison", "RunRow", "Stop", "StopReason", "Task", "TaskError", "load_task", "Candidate",
           "CandidateError", "load_candidate", "open_sandbox", "SandboxConfig"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelwright' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
