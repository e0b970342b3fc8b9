"""``kernelwright.evaluate``: one candidate judged by a sandbox, in one call.

Imports ``sandbox`` only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from sandbox.candidates.candidate import Candidate, load_candidate
from sandbox.host.config import SandboxConfig
from sandbox.host.open import open_sandbox
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import Task, load_task


def evaluate(task: str | Path | Task, candidate: str | Path | Candidate = "baseline", *, sandbox="auto",
             sizes: dict[str, int] | None = None, timing: bool = True, config: SandboxConfig | None = None) -> Result:
    """Check ``candidate`` against ``task``'s reference at every check size and the benchmark size, then time it
    A/B against the task's baseline (and vendor library), and return the sandbox's ``Result``.

    ``task``: a suite name, a task folder or a loaded ``Task``. ``candidate``: a ``.cu`` file, a loaded
    ``Candidate``, or ``"baseline"`` for the task's own starting kernel. ``sandbox``: ``"auto"`` (the GPU where a
    device answers, else compile-only), ``"gpu"``, ``"compile-only"``, ``"fake"`` (real compiles, simulated runs:
    its figures say SIMULATED), or an open sandbox to reuse (left open). ``sizes`` evaluates at those sizes only;
    ``timing=False`` checks without timing. A candidate that fails is a value: read ``result.status`` and
    ``result.error``. Bad input raises ``TaskError``, ``CandidateError`` or ``ValueError``. Where ``"auto"`` finds
    no GPU, the result is ``Status.compiled`` (nothing ran) and a ``UserWarning`` says so and why."""
    task = task if isinstance(task, Task) else load_task(task)
    if isinstance(candidate, Candidate):
        cand = candidate
    elif str(candidate) == "baseline" and not Path(candidate).exists():
        if not task.has_baseline:
            raise ValueError(f"task {task.name!r} has no CUDA baseline (a task from PyTorch): pass a .cu file")
        cand = load_candidate(task.baseline_path)
    else:
        cand = load_candidate(candidate)
    if not isinstance(sandbox, str):
        return sandbox.evaluate(task, cand, sizes=sizes, timing=timing)
    with open_sandbox(sandbox, config) as box:
        result = box.evaluate(task, cand, sizes=sizes, timing=timing)
    if result.status is Status.compiled:
        why = f"no GPU sandbox opened ({box.instead_of_gpu})" if getattr(box, "instead_of_gpu", "") else \
            f"sandbox={sandbox!r} runs nothing"
        warnings.warn(f"{why}: {task.name} was compiled only; nothing ran, so nothing was checked or timed "
                      "(result.speedup() is None). sandbox='fake' simulates a run; sandbox='gpu' needs a CUDA device.",
                      stacklevel=2)
    return result
