"""kernelwright's sandbox: everything that touches CUDA. Usable alone; imports nothing from agent.

The seam is one protocol, ``Sandbox`` (``sandbox.protocol``): ``compile``, ``evaluate``, ``profile``, ``sanitize``,
``screen``, ``close``, and the evaluation contract shared by one GPU and a cluster of them: ``submit_compile``,
``submit_evaluate``, ``wait`` and ``slots``, with outcomes typed in ``sandbox.jobs``.

Layout. At the top, only the three contracts a reader of the sandbox starts from: ``protocol`` (what the agent
may ask), ``jobs`` (what becomes of what it asked) and ``wire`` (every message between the host and a worker that ran
candidate code: the doorway of the security story, kept here because ``host/`` and ``worker/`` may not import each
other and both speak it). Below them, the vocabulary they are written in, one folder per side: ``candidates/`` (a
candidate's code: parsing, source rules, compiling, launch plans), ``tasks/`` (task folders, dtypes, expressions,
inputs, check strength), ``judging/`` (comparisons, statistics, the result record, sanitizer verdicts) and
``plumbing/`` (cache and temporary folders, child processes, host paths, the environment fingerprint). Then who
does the work: ``host/`` orchestrates (the sandboxes, worker processes, screener, profiler), ``worker/`` runs on the
device, ``profile/`` reads what Nsight Compute measured, ``pytorch/`` turns PyTorch problems into tasks,
``cluster/`` spreads the evaluation contract over a Ray cluster. Importing this package imports neither CuPy nor
CUDA bindings, nor any of its modules until one of its names is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The public names, each imported from its module on first use: a process that needs one part of the package (a
# GPU worker, the program Nsight Compute profiles) starts without importing the rest.
_EXPORTS = {"Candidate": ".candidates.candidate", "CandidateError": ".candidates.candidate",
            "load_candidate": ".candidates.candidate", "parse_candidate": ".candidates.candidate",
            "CompileOnlySandbox": ".host.compile_only", "SANDBOX_KINDS": ".host.config",
            "SandboxConfig": ".host.config", "SandboxKind": ".host.config", "FakeSandbox": ".host.fake",
            "GPUSandbox": ".host.gpu", "open_sandbox": ".host.open", "Result": ".judging.result",
            "Status": ".judging.result", "Sandbox": ".protocol", "SanitizeReport": ".judging.sanitizer_report",
            "Task": ".tasks.task", "TaskError": ".tasks.task", "load_task": ".tasks.task", "suite_names": ".tasks.task",
            "probe_device": ".host.probe", "confinement": ".host.probe", "NoDevice": ".host.probe"}

if TYPE_CHECKING:
    from .candidates.candidate import Candidate, CandidateError, load_candidate, parse_candidate
    from .host.compile_only import CompileOnlySandbox
    from .host.config import SANDBOX_KINDS, SandboxConfig, SandboxKind
    from .host.fake import FakeSandbox
    from .host.gpu import GPUSandbox
    from .host.open import open_sandbox
    from .host.probe import NoDevice, confinement, probe_device
    from .judging.result import Result, Status
    from .judging.sanitizer_report import SanitizeReport
    from .protocol import Sandbox
    from .tasks.task import Task, TaskError, load_task, suite_names


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = ["Sandbox", "Candidate", "CandidateError", "load_candidate", "parse_candidate", "CompileOnlySandbox",
           "GPUSandbox", "FakeSandbox", "SandboxConfig", "SandboxKind", "SANDBOX_KINDS", "open_sandbox", "Result",
           "SanitizeReport", "Status", "Task", "TaskError", "load_task", "suite_names"]
