"""Sandbox commands: ``tasks``, ``compile``, ``eval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from .app import (BadInput, app, console, device_problem, error_line, err_console, input_errors, load_task, parse_sizes,
                  styled)
from .exits import ExitCode, epilog
from .options import SANDBOX, Sizes, TaskArg, TimingBudget, json_flag
from .tables import Col, fit

CandidateFile = Annotated[Path, typer.Argument(help="Candidate .cu file (source with its launch plan).")]
RecordJson = json_flag("Print the result record as JSON.")
TableJson = json_flag("Print JSON instead of a table.")


def _task_and_candidate(task: str, candidate: str):
    from sandbox.candidates.candidate import load_candidate, validate_for_task

    t = load_task(task)
    c = load_candidate(candidate)
    validate_for_task(c, t)
    return t, c


@app.command(epilog=epilog(OK="listed", BAD_INPUT="a task that does not load, or bad input"))
@input_errors
def tasks(path: Annotated[Optional[Path], typer.Argument(help="A folder of task folders, or one task folder "
                                                               "(default: the suite).")] = None,
          as_json: TableJson = False):
    """List tasks (the suite, or those in PATH): name, category, benchmark size, vendor comparison."""
    from sandbox.tasks.task import load_task as load, suite_names, task_folders

    refs = [str(p) for p in task_folders(path)] if path is not None else suite_names()
    rows = []
    for ref in refs:
        t = load(ref)
        rows.append(dict(name=t.name, folder=str(t.folder), category=t.spec.category, version=t.spec.version,
                         benchmark=t.spec.sizes.benchmark, vendor=t.spec.vendor,
                         summary=t.spec.description.strip().splitlines()[0]))
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cols = [Col("task"), Col("category"), Col("benchmark size"), Col("vendor", wrap=True), Col("what", wrap=True)]
    table = [[r["name"], r["category"], ",".join(f"{k}={v}" for k, v in r["benchmark"].items()), r["vendor"] or "-",
              r["summary"]] for r in rows]
    console.print(fit(cols, table, console.width, title=f"{len(rows)} tasks" + (f" in {path}" if path else "")))


def _resources_table(result):
    cols = [Col("kernel"), Col("registers", right=True), Col("spill st/ld B", right=True), Col("stack B", right=True),
            Col("static smem B", right=True), Col("cmem B", right=True)]
    rows = [[k.name, str(k.registers), f"{k.spill_stores}/{k.spill_loads}", str(k.stack_frame), str(k.static_shared),
             str(k.constant)] for k in result.compile.kernels.values()]
    return fit(cols, rows, console.width, title="resources (ptxas)")


@app.command("compile", epilog=epilog(OK="it compiled", FAILED="it did not (or a static check rejected it)",
                                      BAD_INPUT="bad input"))
@input_errors
def compile_cmd(task: TaskArg, candidate: CandidateFile,
                arch: Annotated[str, typer.Option(help="Target architecture.", rich_help_panel=SANDBOX)] = "sm_90",
                as_json: RecordJson = False):
    """Compile a candidate with NVRTC and report registers, spills and memory per kernel (no GPU needed)."""
    from sandbox import CompileOnlySandbox, SandboxConfig

    t, c = _task_and_candidate(task, str(candidate))
    with CompileOnlySandbox(SandboxConfig(arch=arch)) as sb:
        result = sb.compile(t, c)
    if as_json:
        print(result.to_json())
    else:
        console.print(styled((c.label, "bold"), " for task ", (t.name, "bold"), f": {result.status.value}"
                             + (f" ({result.compile.seconds:.2f} s, NVRTC {result.compile.nvrtc_version}, "
                                f"{result.compile.arch})" if result.compile else "")))
        if result.error:
            console.print(result.error, style="red", soft_wrap=True)
        if result.compile and result.compile.ok:
            print_warnings(result)
            console.print(_resources_table(result))
        elif result.detail:
            console.print(result.detail)
    raise typer.Exit(ExitCode.OK if result.status.value == "compiled" else ExitCode.FAILED)


EVAL_SANDBOXES = ("gpu", "fake")


@app.command("eval", epilog=epilog(OK="the candidate is ok", FAILED="it is not (the status says why)",
                                   BAD_INPUT="bad input", NO_DEVICE="no CUDA device (--sandbox fake needs none)"))
@input_errors
def eval_cmd(task: TaskArg, candidate: CandidateFile, sizes: Sizes = None, budget: TimingBudget = 0.25,
             vendor: Annotated[bool, typer.Option(help="Also time the vendor library where the task has one.",
                                                  rich_help_panel=SANDBOX)] = True,
             sandbox: Annotated[str, typer.Option(help="gpu (measured on this machine's CUDA device) or fake (real "
                                                       "compile, simulated checks and timings, marked SIMULATED).",
                                                  rich_help_panel=SANDBOX)] = "gpu",
             as_json: RecordJson = False):
    """Check a candidate at every check size and the benchmark size, then time it A/B against the baseline."""
    from sandbox import FakeSandbox, GPUSandbox, SandboxConfig

    if sandbox not in EVAL_SANDBOXES:
        raise BadInput(f"--sandbox: expected one of {', '.join(EVAL_SANDBOXES)}, got {sandbox!r}")
    if _is_modelnew(candidate):
        _eval_modelnew(task, candidate, sizes, budget, sandbox, as_json)
    t, c = _task_and_candidate(task, str(candidate))
    at = parse_sizes(sizes, t)
    config = SandboxConfig(timing_budget_s=budget, vendor=vendor)
    try:
        sb = FakeSandbox(config) if sandbox == "fake" else GPUSandbox(config)
    except RuntimeError as exc:
        error_line(device_problem(str(exc)))
        err_console.print("`kernelwright eval` needs a CUDA device; `kernelwright eval --sandbox fake` and "
                          "`kernelwright compile` work without one.", soft_wrap=True)
        raise typer.Exit(ExitCode.NO_DEVICE) from None
    with sb:
        result = sb.evaluate(t, c, sizes=at)
    if as_json:
        print(result.to_json())
    else:
        print_result(result)
    raise typer.Exit(ExitCode.OK if result.ok else ExitCode.FAILED)


def _is_modelnew(path: Path) -> bool:
    from sandbox.pytorch.modelnew import is_modelnew

    try:
        return path.suffix == ".py" and is_modelnew(path.read_text())
    except (OSError, UnicodeDecodeError):
        return False


def _eval_modelnew(task: str, candidate: Path, sizes, budget: float, sandbox: str, as_json: bool) -> None:
    """A ModelNew solution on an imported task, judged as ``kernelwright judge`` judges it (docs/judge.md)."""
    from sandbox.pytorch.modelnew import ModelNewError, load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew

    t = load_task(task)
    if t.spec.torch is None:
        raise BadInput(f"{candidate} is a ModelNew solution, and {t.name} is not a task imported from PyTorch")
    if sandbox != "gpu":
        raise BadInput("a ModelNew solution is judged on the GPU (kernelwright judge --device cpu runs it on the CPU)")
    try:
        solution = load_modelnew(candidate)
    except ModelNewError as exc:
        raise BadInput(str(exc)) from None
    result = judge_modelnew(t, solution, JudgeOptions(benchmark=parse_sizes(sizes, t), budget_s=max(1.0, budget * 20)))
    if as_json:
        print(result.to_json())
    else:
        print_result(result)
    raise typer.Exit(ExitCode.OK if result.ok else ExitCode.FAILED)


def print_warnings(result, indent: str = "") -> None:
    """The compiler's warnings of a compile that succeeded, each with its source line, in yellow."""
    warned = result.compile.warnings() if result.compile else []
    if warned:
        console.print(f"{indent}compiler warnings ({len(warned)}):", style="bold yellow")
        for w in warned:
            console.print(Text(w, style="yellow"), soft_wrap=True)


def print_result(result) -> None:
    """A human summary of one Result (shared by eval and other commands)."""
    style = "green" if result.ok else "red"
    simulated = result.env.simulated
    console.print(styled((result.candidate, "bold"), " on ", (result.task, "bold"), ": ", (result.status.value, style),
                         (" (SIMULATED)", "bold red") if simulated else ""))
    if simulated:
        console.print("SIMULATED: the fake sandbox models checks and run times; nothing ran on a GPU and no figure "
                      "below is a measurement", style="bold red", soft_wrap=True)
    if result.error:
        console.print(f"  {result.error}", soft_wrap=True)
    if result.compile and result.compile.ok:
        print_warnings(result, "  ")
        for k in result.compile.kernels.values():
            console.print(f"  {k.name}: {k.registers} registers, spills {k.spill_stores}/{k.spill_loads} B, "
                          f"static smem {k.static_shared} B")
    if result.checks:
        passed = sum(c.passed for c in result.checks)
        worst = max((c.max_abs_error or 0.0) for c in result.checks)
        sizes = sorted({",".join(f"{k}={v}" for k, v in c.sizes.items()) for c in result.checks})
        console.print(f"  correctness: {passed}/{len(result.checks)} checks passed, max abs error {worst:.3g}, "
                      f"sizes {'; '.join(sizes)}", soft_wrap=True)
    tm = result.timing
    if tm:
        size = ",".join(f"{k}={v}" for k, v in tm.sizes.items())
        console.print(f"  timing at {size}: {tm.rounds} interleaved rounds, L2 flushed ({tm.l2_flush_bytes >> 20} MiB) "
                      f"before each, {tm.rotating_sets} rotating sets of input and output buffers", soft_wrap=True)
        cols = [Col("implementation"), Col("median ms", right=True), Col("95% interval"), Col("% of roofline", right=True),
                Col("speedup of candidate")]
        rows = []
        for name, it in tm.impls.items():
            s = tm.speedup.get(name)
            rows.append([name, f"{it.median_ms:.4f}", f"[{it.ci_ms.low:.4f}, {it.ci_ms.high:.4f}]",
                         f"{it.pct_of_roofline:.1f}%" if it.pct_of_roofline is not None else "-",
                         f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s else "-"])
        console.print(fit(cols, rows, console.width))
        if tm.roofline_ms:
            console.print(f"  roofline floor {tm.roofline_ms:.4f} ms ({tm.bound}-bound at the measured ceilings)")
    env = result.env
    if env.gpu:
        console.print(f"  on {env.gpu} (driver {env.driver}, CUDA {env.cuda_runtime}, NVRTC {env.nvrtc}, "
                      f"SM clock {env.describe_reading('sm_clock_mhz') or 'not recorded'} MHz); "
                      f"cost: compile {result.cost.compile_s:.2f} s, GPU {result.cost.gpu_s:.2f} s, wall {result.cost.wall_s:.2f} s",
                      soft_wrap=True)
    print_verdicts(result)


VERDICT_STYLE = {"pass": "green", "flag": "yellow", "fail": "bold red", "not run": "dim"}


def print_verdicts(result) -> None:
    """A ModelNew solution's format checks, one line each (docs/judge.md)."""
    if result.verdicts:
        console.print("  format checks:")
    for v in result.verdicts:
        console.print(styled(f"    {v.check}: ", (v.outcome, VERDICT_STYLE.get(v.outcome, "")), f": {v.line}"),
                      soft_wrap=True)
