"""A ModelNew candidate (KernelBench's answer format, ``sandbox.pytorch.modelnew``) in a local sandbox: what each
verb of the ``Sandbox`` protocol does with one, so that the agent loop, the lineage and the claim handle it
through the same verbs as a ``.cu`` candidate.

- ``compile``: the solution is built, confined, into its cache (``modelnew_judge.prebuild``): ``compiled``, or a
  ``compile_error`` with the compiler's log;
- ``evaluate``: ``modelnew_judge.judge_modelnew`` (checks at every check size, the timed size, the format's own
  verdicts; timing interleaved with eager and ``torch.compile``); at another size (a held-out re-check) that size is
  checked and timed in place of the benchmark size;
- ``profile``: Nsight Compute is not attached to the confined PyTorch process, so there are no counters; the
  profile says so, and its diagnosis is the kernel census of the evaluation (which kernels ran, the share of GPU
  time in the solution's own);
- ``sanitize``: compute-sanitizer is not run on a module: the report says so (status ``skipped``).
"""

from __future__ import annotations

from ..candidates.candidate import CandidateError
from ..judging.result import CompileInfo, Profile, Result, Status
from ..judging.sanitizer_report import SanitizeReport
from ..tasks.task import Task

NOT_PROFILED = ("Nsight Compute does not profile a ModelNew solution: it runs inside the confined PyTorch process, "
                "which ncu is not attached to; the evaluation's kernel census names the kernels that ran instead")
NOT_SANITIZED = ("compute-sanitizer is not run on a ModelNew solution: it runs inside the confined PyTorch process, "
                 "which the sanitizer is not attached to; its correctness rests on the checks of its evaluation")


def is_modelnew(candidate) -> bool:
    return getattr(candidate, "format", "cuda") == "modelnew"


def require_torch_task(task: Task) -> None:
    """A ModelNew answer replaces a PyTorch module: a task without one cannot take it (a ``CandidateError``)."""
    if task.spec.torch is None:
        raise CandidateError(f"a ModelNew solution needs a task imported from PyTorch; {task.name} has no [torch] "
                             "table (answer with a .cu candidate)")


def options(task: Task, sizes: dict[str, int] | None, timing: bool, budget_s: float, device: str = "cuda"):
    """The judgement of one evaluation: the loop's at the benchmark size; a re-check's at ``sizes``. Held-out sizes
    are checked only when asked for by size (``agent.claims.heldout``), never during the search."""
    from ..pytorch.modelnew_judge import JudgeOptions

    bench = dict(sizes) if sizes and sizes != task.spec.sizes.benchmark else None
    return JudgeOptions(device=device, budget_s=budget_s, baselines=tuple(task.baselines), benchmark=bench,
                        heldout=False, timing=timing)


def compiled(task: Task, solution, built: dict, arch: str) -> Result:
    """The Result of a confined build (``modelnew_judge.prebuild``'s reply)."""
    info = CompileInfo(ok=bool(built.get("ok")), arch=arch, nvrtc_version="torch.utils.cpp_extension",
                       options=[b.get("call", "") for b in built.get("builds", [])],
                       log="" if built.get("ok") else str(built.get("error", "")),
                       seconds=float(built.get("seconds", 0.0)), code_hash=solution.key)
    status = Status.compiled if info.ok else Status.compile_error
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=solution.label,
                  candidate_key=solution.key, compile=info,
                  error="" if info.ok else f"the build failed: {_first_line(info.log)}")


def profile(result: Result | None) -> Profile:
    """No counters (``NOT_PROFILED``); the diagnosis is the evaluation's kernel census where it has one."""
    census = next((v.line for v in (result.verdicts if result else []) if v.check == "no_custom_kernel"), "")
    found = Profile(status="skipped", reason=NOT_PROFILED,
                    diagnosis=f"not profiled (ModelNew); kernel census: {census}" if census else "")
    if result is not None:
        result.profile = found
    return found


def sanitized() -> SanitizeReport:
    return SanitizeReport(status="skipped", reason=NOT_SANITIZED)


def _first_line(log: str) -> str:
    from ..pytorch.modelnew_judge import compiler_error

    return compiler_error(log) or "no log"
