"""Sandbox commands: ``tasks``, ``compile``, ``eval``, ``doctor``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .app import BadInput, app, console, err_console, input_errors, parse_sizes
from .exits import ExitCode, epilog
from .options import SANDBOX, Sizes, TaskArg, TimingBudget, json_flag

CandidateFile = Annotated[Path, typer.Argument(help="Candidate .cu file (source with its launch plan).")]
RecordJson = json_flag("Print the result record as JSON.")
TableJson = json_flag("Print JSON instead of a table.")


def _task_and_candidate(task: str, candidate: str):
    from sandbox.candidate import load_candidate, validate_for_task
    from sandbox.task import load_task

    t = load_task(task)
    c = load_candidate(candidate)
    validate_for_task(c, t)
    return t, c


@app.command()
@input_errors
def tasks(as_json: TableJson = False):
    """List the task suite: name, category, benchmark size, vendor comparison."""
    from sandbox.task import load_task, suite_names

    rows = []
    for name in suite_names():
        t = load_task(name)
        rows.append(dict(name=t.name, category=t.spec.category, version=t.spec.version,
                         benchmark=t.spec.sizes.benchmark, vendor=t.spec.vendor,
                         summary=t.spec.description.strip().splitlines()[0]))
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table(title=f"{len(rows)} tasks", show_lines=False)
    for col in ("task", "category", "benchmark size", "vendor", "what"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["category"], ",".join(f"{k}={v}" for k, v in r["benchmark"].items()),
                      escape(r["vendor"] or "-"), escape(r["summary"]))
    console.print(table)


def _resources_table(result) -> Table:
    table = Table(title="resources (ptxas)")
    for col in ("kernel", "registers", "spill st/ld B", "stack B", "static smem B", "cmem B"):
        table.add_column(col, overflow="fold")
    for k in result.compile.kernels.values():
        table.add_row(k.name, str(k.registers), f"{k.spill_stores}/{k.spill_loads}", str(k.stack_frame),
                      str(k.static_shared), str(k.constant))
    return table


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
        console.print(f"[bold]{c.label}[/] for task [bold]{t.name}[/]: {result.status.value}"
                      + (f" ({result.compile.seconds:.2f} s, NVRTC {result.compile.nvrtc_version}, {result.compile.arch})"
                         if result.compile else ""))
        if result.error:
            console.print(f"[red]{escape(result.error)}[/]", highlight=False)
        if result.compile and result.compile.ok:
            console.print(_resources_table(result))
        elif result.detail:
            console.print(result.detail, highlight=False, markup=False)
    raise typer.Exit(ExitCode.OK if result.status.value == "compiled" else ExitCode.FAILED)


@app.command("eval", epilog=epilog(OK="the candidate is ok", FAILED="it is not (the status says why)",
                                   BAD_INPUT="bad input", NO_DEVICE="no CUDA device"))
@input_errors
def eval_cmd(task: TaskArg, candidate: CandidateFile, sizes: Sizes = None, budget: TimingBudget = 0.25,
             vendor: Annotated[bool, typer.Option(help="Also time the vendor library where the task has one.",
                                                  rich_help_panel=SANDBOX)] = True,
             as_json: RecordJson = False):
    """Check a candidate at every check size and the benchmark size, then time it A/B against the baseline."""
    from sandbox import GPUSandbox, SandboxConfig

    t, c = _task_and_candidate(task, str(candidate))
    at = parse_sizes(sizes)
    if at is not None and set(at) != set(t.symbols):
        raise BadInput(f"--sizes must set exactly {', '.join(t.symbols)}")
    try:
        sb = GPUSandbox(SandboxConfig(timing_budget_s=budget, vendor=vendor))
    except RuntimeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}\n`kernelwright eval` needs a CUDA device; "
                          "`kernelwright compile` works without one.", soft_wrap=True)
        raise typer.Exit(ExitCode.NO_DEVICE) from None
    with sb:
        result = sb.evaluate(t, c, sizes=at)
    if as_json:
        print(result.to_json())
    else:
        print_result(result)
    raise typer.Exit(ExitCode.OK if result.ok else ExitCode.FAILED)


def print_result(result) -> None:
    """A human summary of one Result (shared by eval and other commands)."""
    style = "green" if result.ok else "red"
    console.print(f"[bold]{result.candidate}[/] on [bold]{result.task}[/]: [{style}]{result.status.value}[/]")
    if result.error:
        console.print(f"  {result.error}", highlight=False, markup=False)
    if result.compile and result.compile.ok:
        for k in result.compile.kernels.values():
            console.print(f"  {k.name}: {k.registers} registers, spills {k.spill_stores}/{k.spill_loads} B, "
                          f"static smem {k.static_shared} B", highlight=False)
    if result.checks:
        passed = sum(c.passed for c in result.checks)
        worst = max((c.max_abs_error or 0.0) for c in result.checks)
        sizes = sorted({",".join(f"{k}={v}" for k, v in c.sizes.items()) for c in result.checks})
        console.print(f"  correctness: {passed}/{len(result.checks)} checks passed, max abs error {worst:.3g}, "
                      f"sizes {'; '.join(sizes)}", highlight=False)
    tm = result.timing
    if tm:
        size = ",".join(f"{k}={v}" for k, v in tm.sizes.items())
        console.print(f"  timing at {size}: {tm.rounds} interleaved rounds, L2 flushed ({tm.l2_flush_bytes >> 20} MiB) "
                      f"before each, {tm.rotating_sets} rotating input sets", highlight=False)
        table = Table()
        for col in ("implementation", "median ms", "95% interval", "% of roofline", "speedup of candidate"):
            table.add_column(col)
        for name, it in tm.impls.items():
            s = tm.speedup.get(name)
            speed = f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s else "-"
            pct = f"{it.pct_of_roofline:.1f}%" if it.pct_of_roofline is not None else "-"
            table.add_row(name, f"{it.median_ms:.4f}", f"[{it.ci_ms.low:.4f}, {it.ci_ms.high:.4f}]", pct, speed)
        console.print(table)
        if tm.roofline_ms:
            console.print(f"  roofline floor {tm.roofline_ms:.4f} ms ({tm.bound}-bound at the measured ceilings)")
    env = result.env
    if env.get("gpu"):
        clocks = env.get("clocks_start", {}), env.get("clocks_end", {})
        console.print(f"  on {env['gpu']} (driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}, NVRTC {env.get('nvrtc')}, "
                      f"SM clock {clocks[0].get('sm_clock_mhz')}->{clocks[1].get('sm_clock_mhz')} MHz); "
                      f"cost: compile {result.cost.compile_s:.2f} s, GPU {result.cost.gpu_s:.2f} s, wall {result.cost.wall_s:.2f} s",
                      highlight=False)


def _tool_version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [l for l in (out.stdout + out.stderr).splitlines() if l.strip()]
    return lines[-1].strip() if lines else None


def _confinement_row() -> tuple[str, str, str]:
    """Whether the compile worker could confine itself (Landlock), asked of a compile worker."""
    from sandbox.host.pool import WorkerDied, WorkerProcess, WorkerTimeout

    worker = WorkerProcess("compile")
    try:
        reply = worker.call({"op": "confinement"}, timeout=120)
        state = reply["confinement"] if reply["ok"] else {"confined": False, "reason": reply["error"]}
    except (WorkerDied, WorkerTimeout) as exc:
        state = {"confined": False, "reason": str(exc).splitlines()[0]}
    finally:
        worker.close()
    if state["confined"]:
        return ("compile confinement", f"Landlock ABI {state['landlock_abi']}: reads only CUDA headers, Python, libraries",
                "an #include that the source filter missed cannot read a host file")
    return ("compile confinement", escape(f"none ({state['reason']})"), "the source filter alone keeps host files out")


@app.command()
def doctor():
    """Say what this machine has (GPU, driver, CUDA, NVRTC, CuPy, ncu, compute-sanitizer) and what each enables."""
    from sandbox.compiler import include_dirs, nvrtc_version
    from sandbox.envinfo import software
    from sandbox.host.pool import WorkerDied, WorkerProcess, WorkerTimeout
    from sandbox.host.sanitizer import find_sanitizer
    from sandbox.profile.ncu import find_ncu

    rows = []
    sw = software()
    rows.append(("Python", sw["python"], "runs kernelwright"))
    try:
        nvrtc = nvrtc_version()
        heads = include_dirs()
        rows.append(("NVRTC", f"found {nvrtc}", "compile checks and resource reports, with or without a GPU"))
        rows.append(("CUDA headers", ", ".join(heads) if heads else "missing", "cuda_fp16.h, mma.h, cooperative groups in candidates"))
    except Exception as exc:
        rows.append(("NVRTC", f"missing ({exc})", "nothing compiles: install cuda-bindings and nvidia-cuda-nvrtc"))
    rows.append(("CuPy", sw["cupy"] or "missing", "runs candidates, references and vendor libraries on the GPU"))
    worker = WorkerProcess("gpu")
    try:
        reply = worker.call({"op": "hello"}, timeout=120)
    except (WorkerDied, WorkerTimeout) as exc:
        reply = {"ok": False, "error": str(exc)}
    finally:
        worker.close()
    if reply["ok"]:
        d = reply["info"]
        rows.append(("GPU", f"{d['gpu']} ({d['arch']}, {d['sms']} SMs, {d['memory_bytes'] / 2**30:.0f} GiB, "
                            f"L2 {d['l2_bytes'] >> 20} MiB)", "correctness checks, timing, eval, optimize with measurements"))
        rows.append(("driver", f"{d.get('driver')} (CUDA driver API {d['cuda_driver_api']})", "loads the cubins NVRTC makes"))
        rows.append(("CUDA runtime", d["cuda_runtime"], "CuPy's runtime"))
    else:
        rows.append(("GPU", f"none ({reply['error'].splitlines()[0][:120]})",
                     "without one: tasks, compile and compile-only optimize runs"))
    ncu = find_ncu()
    rows.append(("ncu", (_tool_version([ncu, "--version"]) or "found") if ncu else "missing",
                 "profiler counters and diagnoses in prompts (without it: timing and resources only)"))
    san = find_sanitizer()
    rows.append(("compute-sanitizer", (_tool_version([san, "--version"]) or "found") if san else "missing",
                 "memcheck and racecheck of each run's winner before it is declared (without it: 'not sanitized')"))
    rows.append(_confinement_row())
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        kt = dist_version("kernel_tuner")
    except PackageNotFoundError:
        kt = None
    rows.append(("Kernel Tuner", kt or 'missing (optional: pip install -e ".[kerneltuner]")',
                 "its search strategies beside ours in bench/tuner.py --kernel-tuner"))
    try:
        pt = dist_version("torch")
    except PackageNotFoundError:
        pt = None
    rows.append(("PyTorch", pt or 'missing (optional: pip install -e ".[torch]")',
                 "kernelwright import of PyTorch problems, their float64 references, eager and torch.compile "
                 "baselines, export --torch"))
    table = Table(title="kernelwright doctor")
    for col in ("component", "status", "what it enables"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*r)
    console.print(table)
