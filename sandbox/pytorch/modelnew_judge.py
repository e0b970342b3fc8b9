"""A ModelNew solution judged on an imported task, from the host: ``judge_modelnew`` runs
``sandbox.pytorch.modelnew_run.judge`` in the confined problem process (sandbox.pytorch.confined: no network,
scrubbed environment, private home, Landlock) with what a build and a GPU need and nothing more: read access to the
C++/CUDA toolchain and the task's folder, write access to the solution's own build cache (keyed by its source's
hash) and, on a GPU, the NVIDIA device files. Its JSON reply becomes a ``Result`` with one ``Verdict`` per check
of this format.
"""

from __future__ import annotations

import glob
import os
import re
import statistics
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..judging.environment import Environment
from ..judging.result import Check, CompileInfo, Cost, ImplTiming, Interval, Result, Status, Timing, Verdict
from ..judging.stats import median_ci, speedup_ci
from .confined import ProblemCodeError, call
from .modelnew import ModelNewSolution, toolchain

TOOLCHAIN_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/etc/ld.so.cache", "/etc/alternatives", "/proc",
                  "/sys", "/dev/urandom")
CHECKS = ("silent_fallback", "no_custom_kernel", "inputs_written", "state_across_calls", "outside_timed_region",
          "precision", "sizes", "parameters", "tampering")


@dataclass(frozen=True)
class JudgeOptions:
    """How a solution is judged."""

    device: str = ""              # "cuda", "cpu", or "" for the GPU where there is one
    build_deadline_s: float = 600.0
    deadline_s: float = 1800.0    # the whole judgement, build included
    rounds: int = 30              # interleaved timing rounds at most
    budget_s: float = 20.0        # timing stops after this many seconds (at least 5 rounds)
    tf32: str = "off"             # the TF32 mode eager and torch.compile run in (docs/kernelbench.md)
    per_check_size: int = 2       # trials at each check size at least
    baselines: tuple[str, ...] = ("eager", "compile")   # of the task's, those timed (eager always)
    benchmark: dict | None = None  # the size timed, if not the task's benchmark size (a small one on a CPU)
    heldout: bool = True          # check the held-out sizes too
    timing: bool = True           # time it (else correctness and the format's checks only)


def extensions_dir(solution: ModelNewSolution) -> Path:
    from ..plumbing.files import cache_dir

    return cache_dir() / "modelnew" / solution.build_key


def grants(task_folder: Path, solution: ModelNewSolution, device: str) -> tuple[list[str], list[str]]:
    """(read, write) beyond the confined process's own: the toolchain, the task, the build cache, the GPU."""
    tools = toolchain()
    read = [str(task_folder), *TOOLCHAIN_READ, sysconfig.get_paths()["include"]]
    read += [str(Path(p).resolve().parents[1]) for p in (tools["nvcc"],) if p]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            read.append(str(Path(os.environ[var]).resolve()))
    write = [str(extensions_dir(solution))]
    if device != "cpu":
        write += sorted(glob.glob("/dev/nvidia*")) + ["/dev/dri"]
    return read, write


def judge_modelnew(task, solution: ModelNewSolution, options: JudgeOptions | None = None) -> Result:
    options = options or JudgeOptions()
    ext = extensions_dir(solution)
    ext.mkdir(parents=True, exist_ok=True)
    read, write = grants(task.folder, solution, options.device)
    try:
        outcome = call("sandbox.pytorch.modelnew_run:judge", str(task.folder.resolve()), solution.source, solution.key,
                       list(solution.kernels), str(ext), dict(vars(options), baselines=list(options.baselines)),
                       label=solution.label,
                       deadline_s=options.deadline_s, read=read, write=write)
    except ProblemCodeError as exc:
        text = str(exc)
        status = Status.timeout if "deadline" in text else Status.crashed
        return _result(task, solution, status, error=text)
    return from_reply(task, solution, outcome.result or {})


def prebuild(task, solution: ModelNewSolution, options: JudgeOptions | None = None) -> dict:
    """Build the solution into its cache ahead of its judgement (``modelnew_run.build_only``), confined the same
    way; {ok, error, seconds, builds}."""
    options = options or JudgeOptions()
    ext = extensions_dir(solution)
    ext.mkdir(parents=True, exist_ok=True)
    read, write = grants(task.folder, solution, options.device)
    try:
        outcome = call("sandbox.pytorch.modelnew_run:build_only", solution.source, solution.key, str(ext),
                       options.build_deadline_s, label=solution.label, deadline_s=options.build_deadline_s + 60,
                       read=read, write=write)
    except ProblemCodeError as exc:
        return dict(ok=False, error=str(exc), seconds=0.0, builds=[])
    return outcome.result or {}


def _result(task, solution: ModelNewSolution, status: Status, **kw) -> Result:
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=solution.label,
                  candidate_key=solution.key, **kw)


def from_reply(task, solution: ModelNewSolution, reply: dict) -> Result:
    """The Result of a judgement's reply (``modelnew_run.judge``)."""
    status = Status(reply.get("status", "crashed"))
    split = reply.get("split_s", {})
    builds = reply.get("builds", [])
    compile_info = CompileInfo(ok=status is not Status.compile_error, arch=reply.get("device", ""),
                               nvrtc_version="torch.utils.cpp_extension", options=[b["call"] for b in builds],
                               log=reply.get("detail", "") if status is Status.compile_error else "",
                               seconds=float(split.get("build", 0.0)))
    checks = [Check(sizes=c["sizes"], label=c["label"], output=c["output"], distribution=c["distribution"],
                    passed=c["passed"], max_abs_error=c.get("max_abs_error"), max_rel_error=c.get("max_rel_error"),
                    mismatches=c.get("mismatches", 0), first_mismatch=c.get("first_mismatch"), note=c.get("note", ""))
              for c in reply.get("checks", [])]
    timing = _timing(reply["timing"]) if reply.get("timing") and status is Status.ok else None
    env = Environment(gpu=reply.get("gpu"))
    cost = Cost(compile_s=float(split.get("build", 0.0)), check_gpu_s=float(split.get("checks", 0.0)),
                time_gpu_s=float(split.get("timing", 0.0)))
    detail = reply.get("detail", "")
    if reply.get("benchmark_note"):
        detail = (detail + "\n" if detail else "") + reply["benchmark_note"]
    if reply.get("printed"):
        detail = (detail + "\n" if detail else "") + "it printed: " + reply["printed"][:500]
    error = reply.get("error", "")
    if status is Status.compile_error and reply.get("detail"):
        error = f"{error}: {compiler_error(reply['detail'])}"
    result = _result(task, solution, status, error=error, detail=detail, compile=compile_info,
                     checks=checks, timing=timing, env=env, cost=cost, verdicts=verdicts(reply, status))
    return result


def _timing(timed: dict) -> Timing:
    clusters = timed["set_of_round"]
    impls = {}
    for name, samples in timed["samples_ms"].items():
        med, lo, hi = median_ci(samples, clusters=clusters)
        impls[name] = ImplTiming(samples_ms=samples, median_ms=med, ci_ms=Interval(value=med, low=lo, high=hi),
                                 wall_median_ms=statistics.median(timed["wall_ms"][name]))
    speedup = {}
    for name in impls:
        if name != "candidate":
            v, lo, hi = speedup_ci(timed["samples_ms"][name], timed["samples_ms"]["candidate"], clusters=clusters)
            speedup[name] = Interval(value=v, low=lo, high=hi)
    return Timing(sizes=timed["sizes"], rounds=timed["rounds"], rotating_sets=timed["rotating_sets"],
                  l2_flush_bytes=2 * timed["l2_bytes"],
                  set_of_round=clusters, impls=impls, speedup=speedup,
                  faster_than={n: s.low > 1.0 for n, s in speedup.items()}, primary="eager",
                  unavailable=timed.get("unavailable", {}))


def mean_speedup(result: Result, over: str = "eager") -> float | None:
    """KernelBench's own figure: the mean of the baseline's timed samples over the mean of the solution's."""
    t = result.timing
    if t is None or over not in t.impls or "candidate" not in t.impls:
        return None
    return statistics.fmean(t.impls[over].samples_ms) / statistics.fmean(t.impls["candidate"].samples_ms)


def verdicts(reply: dict, status: Status) -> list[Verdict]:
    """One verdict per check of the format, from what the confined judgement found."""
    failed = reply.get("failed_verdict", "")
    reached_checks = "checks" in reply
    out = []
    swallowed = reply.get("swallowed") or []
    if swallowed:
        b = swallowed[0]
        out.append(Verdict(check="silent_fallback", outcome="flag",
                           line=f"its build {b['call']}({b['name']!r}) failed and it went on without it (a silent "
                                f"fallback): {compiler_error(b['error'])}",
                           evidence=dict(builds=swallowed)))
    elif reply.get("builds") is not None and status is not Status.compile_error:
        out.append(Verdict(check="silent_fallback", outcome="pass",
                           line=f"{len(reply.get('builds', []))} build(s), none failed"))
    census = reply.get("census")
    if census is not None:
        names = ", ".join(k["name"][:60] for k in census["kernels"][:3]) or "none"
        share = census["own_share"]
        if share <= 0.0:
            out.append(Verdict(check="no_custom_kernel", outcome="flag",
                               line=f"no kernel it built ran during forward ({census['how']}): "
                                    f"{_launched(census, names)}", evidence=census))
        else:
            own = ", ".join(k["name"][:60] for k in census["kernels"] if k["own"])
            out.append(Verdict(check="no_custom_kernel", outcome="pass",
                               line=f"{100 * share:.0f}% of its device time in kernels it built ({own})",
                               evidence=census))
    else:
        out.append(Verdict(check="no_custom_kernel", outcome="not run", line="not reached"))
    written = reply.get("inputs_written") or []
    if written:
        out.append(Verdict(check="inputs_written", outcome="fail", line=reply.get("error", ""),
                           evidence=dict(writes=written)))
    elif reached_checks:
        out.append(Verdict(check="inputs_written", outcome="pass",
                           line=f"no input's bits changed over {reply.get('calls', 0)} calls"))
    if failed == "state_across_calls":
        out.append(Verdict(check="state_across_calls", outcome="fail", line=reply.get("error", "")))
    elif status is Status.ok:
        out.append(Verdict(check="state_across_calls", outcome="pass",
                           line="right on every call, in a shuffled order, half of them on reused tensors"))
    escaped = reply.get("escaped") or []
    if escaped or reply.get("escaped_timing"):
        out.append(Verdict(check="outside_timed_region", outcome="fail", line=reply.get("error", ""),
                           evidence=dict(outputs=escaped, timing=reply.get("escaped_timing"))))
    elif reached_checks:
        out.append(Verdict(check="outside_timed_region", outcome="pass",
                           line="outputs complete when forward returned" + (
                               "; no work left past its timed events" if reply.get("timing") else "")))
    if reply.get("precision"):
        out.append(Verdict(check="precision", outcome="fail", line=reply["precision"]))
    elif status is Status.ok:
        out.append(Verdict(check="precision", outcome="pass", line="float32 within the task's tolerance everywhere"))
    refused = reply.get("refused_at") or {}
    if refused:
        where = "; ".join(f"{label}: {why[:120]}" for label, why in list(refused.items())[:3])
        out.append(Verdict(check="sizes", outcome="flag",
                           line=f"size-specific: holds at {', '.join(reply.get('holds_at', [])) or 'no size'}; "
                                f"refuses {where}",
                           evidence=dict(holds_at=reply.get("holds_at", []), refused_at=refused)))
    elif status is Status.ok:
        out.append(Verdict(check="sizes", outcome="pass", line=f"holds at {', '.join(reply.get('holds_at', []))}"))
    if reply.get("drawn_wrong"):
        out.append(Verdict(check="parameters", outcome="flag",
                           line=f"right only with the module's own parameter values: wrong where they are drawn, "
                                f"{reply['drawn_wrong'][0]}", evidence=dict(wrong=reply["drawn_wrong"])))
    elif reply.get("undrawn"):
        out.append(Verdict(check="parameters", outcome="flag",
                           line=f"none of its tensors is, by name or shape beyond doubt, {', '.join(reply['undrawn'])}, "
                                "which the module initialises to one value: checked on that one value only",
                           evidence=dict(undrawn=reply["undrawn"])))
    elif reply.get("drawn") and status is Status.ok:
        names = sorted({n for names in reply["drawn"].values() for n in names})
        out.append(Verdict(check="parameters", outcome="pass",
                           line=f"right with {', '.join(names)} drawn (not the module's one value) at "
                                f"{len(reply['drawn'])} size(s)", evidence=dict(drawn=reply["drawn"])))
    if reply.get("tampered"):
        out.append(Verdict(check="tampering", outcome="fail", line=reply.get("error", ""),
                           evidence=dict(changes=reply["tampered"])))
    elif reached_checks:
        out.append(Verdict(check="tampering", outcome="pass",
                           line="PyTorch's functions, classes and settings as they were before it ran"))
    return out


def _launched(census: dict, names: str) -> str:
    if census["how"].endswith("(CPU)"):
        return "all its time in PyTorch"
    return f"{census['launched']} kernel(s), all library code (longest: {names})"


def compiler_error(log: str) -> str:
    """The compiler's first error line in a build log (else its last line)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return next((line for line in lines if re.search(r"\berror\b\s*:", line, re.I)), lines[-1] if lines else "")[:240]


def holds_up(result: Result) -> bool:
    """Ours: ok, and no verdict flagged or failed."""
    return result.ok and not any(v.outcome in ("flag", "fail") for v in result.verdicts)


def kernelbench_correct(result: Result) -> bool:
    """KernelBench's rule: its outputs matched at the benchmark size (a size-specific or no-kernel solution counts)."""
    return result.ok


def no_fallback_correct(result: Result) -> bool:
    """KernelBench v3's and CUDA Agent's rule: correct, and a kernel it built ran (no PyTorch fallback)."""
    return result.ok and not any(v.check in ("no_custom_kernel", "silent_fallback") and v.outcome == "flag"
                                 for v in result.verdicts)
