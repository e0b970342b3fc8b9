"""``kernelwright import`` (KernelBench-format PyTorch problems -> task folders) and ``kernelwright export``
(a run's winner as a .cu file, or with ``--torch`` as a module callable from PyTorch)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import re
import time

import typer

from .app import BadInput, app, console, err_console, error_line, input_errors
from .exits import ExitCode, epilog
from .files import output_folder, write_output
from .options import OUTPUT, RunArg, Traces


def _problem_files(paths: list[Path]) -> list[Path]:
    files = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.glob("*.py") if not f.name.startswith("_"))
            if not found:
                raise BadInput(f"{p}: a folder with no .py problem files")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise BadInput(f"{p}: no such file or folder")
    return files


@app.command("import", epilog=epilog(OK="every problem imported", BAD_INPUT="a problem was refused (each refusal is "
                                                                 "one line naming its file and why) or bad input"))
def import_cmd(paths: Annotated[list[Path], typer.Argument(help="KernelBench-format problem files (Model, get_inputs, "
                                                                "get_init_inputs), or folders of them.")],
               out: Annotated[Path, typer.Option("-o", "--out", help="Folder to write the task folders into.",
                                                 rich_help_panel=OUTPUT)] = Path("imported"),
               name: Annotated[Optional[str], typer.Option("--name", help="Task name (one problem only; default: from "
                                                           "the file name).")] = None,
               category: Annotated[Optional[str], typer.Option("--category", help="Task category (default: guessed "
                                                               "from forward).")] = None,
               replace: Annotated[bool, typer.Option("--replace", help="Overwrite task folders that already exist.",
                                                     rich_help_panel=OUTPUT)] = False,
               deadline: Annotated[float, typer.Option("--deadline", min=1, help="Seconds one problem may take to import "
                                                       "(its process is stopped then).")] = 300.0,
               own_inputs: Annotated[bool, typer.Option("--own-inputs", help="Draw inputs from the problem's "
                                                        "get_inputs() only, no variants (its inputs have a domain: "
                                                        "positive, probabilities, indices).")] = False):
    """Turn PyTorch problems into task folders: sizes, tolerance and roofline found by running them (in a confined
    process: no network, no home folder, no secrets), PyTorch eager and torch.compile as the baselines, the module in
    float64 as the reference; each task's check strength tested before it is kept. Goes on past a problem it
    refuses; ends with how many were imported and refused."""
    from sandbox.pytorch import TorchMissing, require_torch
    from sandbox.pytorch.confined import Session
    from sandbox.pytorch.importer import import_problem
    from sandbox.tasks.task import CATEGORIES, TaskError

    try:
        files = _problem_files(paths)
        if name and len(files) > 1:
            raise BadInput("--name names one task: give one problem file")
        output_folder(out)
        if category and not re.fullmatch(r"[a-z][a-z0-9-]*", category):
            raise BadInput(f"--category: expected a lowercase word (the suite's: {', '.join(CATEGORIES)}), got {category!r}")
        require_torch()
    except (BadInput, TorchMissing) as exc:
        error_line(str(exc))
        raise typer.Exit(ExitCode.BAD_INPUT) from None
    refused: list[str] = []
    strength: dict[Path, str] = {}
    confinement = None
    with Session() as session:
        for f in files:
            started = time.monotonic()
            try:
                done = import_problem(f, out, name=name, category_=category, replace=replace, deadline_s=deadline,
                                      session=session, vet=_vet(f, strength), own_inputs=own_inputs)
            except Exception as exc:  # noqa: BLE001 -- one line per problem, never a traceback that ends the folder
                message = " ".join(str(exc).split())
                if isinstance(exc, UnicodeDecodeError):
                    message = (f"{f}: not UTF-8 text ({exc.reason} at byte {exc.start}): a problem file is Python "
                               "source in UTF-8")
                elif isinstance(exc, OSError) and not isinstance(exc, TaskError):  # the output folder cannot be written
                    message = f"{f}: cannot write its task under {out}: {exc.strerror or exc}"
                elif not isinstance(exc, TaskError):
                    message = f"{f}: the import failed: {type(exc).__name__}: {message}"
                refused.append(message)
                error_line(message)
                continue
            confinement = done.confinement
            _print_imported(f, done, time.monotonic() - started, strength.get(f, "-"))
    if len(files) == 1 and refused:  # its one error line says it all
        raise typer.Exit(ExitCode.BAD_INPUT)
    imported = len(files) - len(refused)
    line = f"{imported} of {len(files)} problems imported, {len(refused)} refused"
    if confinement:
        line += f"; problem code ran confined ({_confinement(confinement)})"
    console.print(line + (":" if refused else ""), soft_wrap=True, markup=False)
    for message in refused:
        console.print(f"  refused: {message}", soft_wrap=True, markup=False)
    if refused:
        raise typer.Exit(ExitCode.BAD_INPUT)


def _confinement(state: dict) -> str:
    fs = (f"Landlock ABI {state['landlock_abi']}" if state.get("landlock")
          else f"no Landlock: {state.get('reason', '?')}")
    sockets = "no sockets (seccomp)" if state.get("seccomp") else f"sockets: {state.get('seccomp_reason', 'not filtered')}"
    return f"{fs}; network: {state.get('network', '?')}; {sockets}; scrubbed environment, private home"


def _print_imported(f: Path, done, seconds: float, strength: str) -> None:
    from sandbox.tasks.task import describe_sizes

    s = done.summary
    tol = "; ".join(f"{dt} atol {t[0]:g} rtol {t[1]:g}" + (f" spread {t[2]:g}" if len(t) > 2 and t[2] else "")
                    for dt, t in s.tolerance.items())
    lines = [f"imported {f.name} -> {done.folder} ({seconds:.0f} s, {done.cpu_s:.1f} CPU-s)",
             f"  sizes: {', '.join(s.symbols) or 'none can vary'}; benchmark {describe_sizes(s.benchmark)}",
             f"  check: {'; '.join(describe_sizes(c) for c in s.check) or '-'}",
             f"  held-out: {'; '.join(describe_sizes(h) for h in s.heldout) or '-'}",
             f"  reference: {s.reference_dtype}; tolerance: {tol}; FLOPs {s.flops}"]
    lines += [f"  fixed: {line}" for line in s.fixed]
    lines += [f"  check strength: {strength}"]
    console.print("\n".join(lines), soft_wrap=True, markup=False)


def _vet(problem: Path, strength: dict):
    """The check an imported task must pass before it is kept: check-task's, check strength included."""
    def vet(folder: Path) -> None:
        from sandbox.host.check_task import check_task
        from sandbox.tasks.task import TaskError

        report = check_task(folder)
        failed = [x for x in report.findings if x.status == "failed"]
        summary = next((x.detail for x in report.findings if x.check == "check strength"), "not measured")
        if failed:
            raise TaskError(f"{problem}: refused: {failed[0].check}: {failed[0].detail}")
        strength[problem] = summary
    return vet


def _claim(entry, simulated: bool) -> str:
    timing = entry.result.timing
    if timing is None:
        return f"{entry.id}: not timed ({entry.result.status.value})"
    parts = [f"{name} {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" for name, s in timing.speedup.items()]
    where = "SIMULATED, not measured" if simulated else entry.result.env.gpu or "?"
    return f"{entry.id}: {timing.impls['candidate'].median_ms:.4g} ms; speedup vs {', '.join(parts)} ({where})"


@app.command("export", epilog=epilog(OK="written", BAD_INPUT="no such run or candidate, a changed task, or bad input"))
@input_errors
def export_cmd(run: RunArg,
               out: Annotated[Path, typer.Option("-o", "--out", help="File to write.", rich_help_panel=OUTPUT)],
               torch_module: Annotated[bool, typer.Option("--torch", help="Write a Python module that registers the "
                                                          "kernel as a PyTorch operator (torch.library custom op: "
                                                          "torch.compile and CUDA graphs take it) and a function "
                                                          "calling it (else the candidate's .cu file; a ModelNew "
                                                          "candidate: its own module with check() appended).",
                                                          rich_help_panel=OUTPUT)] = False,
               candidate: Annotated[Optional[str], typer.Option("--candidate", help="Candidate id (default: the run's "
                                                                "winner).")] = None,
               traces: Traces = Path("traces")):
    """Export a run's winner: its .cu file, or with --torch a module registering it as a PyTorch operator."""
    from sandbox.candidates.candidate import parse_candidate

    from ..report.export_torch import module_name, render
    from ..trace.reader import TraceError, read

    try:
        stored = read(run, traces)
    except TraceError as exc:
        raise BadInput(str(exc)) from None
    entry = stored.by_id.get(candidate) if candidate else stored.best
    if entry is None:
        raise BadInput(f"run {stored.id}: " + (f"no candidate {candidate!r}" if candidate else
                                               "no winner (nothing beat the starting point); name one with --candidate"))
    if stored.unchecked:
        err_console.print(stored.unchecked, style="bold yellow", soft_wrap=True)
    source = stored.source(entry.id)
    if source is None:
        raise BadInput(f"run {stored.id}: {entry.id} has no candidate.cu in the trace")
    from sandbox.pytorch.modelnew import is_modelnew, parse_modelnew

    modelnew = is_modelnew(source)
    cand = parse_modelnew(source, entry.id, label=entry.id) if modelnew else parse_candidate(source, label=entry.id)
    if not torch_module:
        write_output(out, cand.render())
        console.print(f"wrote {out}: {_claim(entry, stored.simulated)}", soft_wrap=True)
        return
    task = stored.unchanged_task()
    if task is None:
        recorded = stored.info.task
        raise BadInput(f"task {recorded.name!r} (fingerprint {recorded.fingerprint}) was not found unchanged")
    if out.suffix != ".py":
        raise BadInput(f"-o {out}: a Python module's file name ends in .py")
    origin = f"run {stored.id}, candidate {entry.id}"
    if modelnew:
        from ..report.export_modelnew import render as render_modelnew

        text = render_modelnew(task, cand, origin, _claim(entry, stored.simulated))
    else:
        text = render(task, cand, origin, _claim(entry, stored.simulated), module_name(out))
    write_output(out, text)
    console.print(f"wrote {out}: {_claim(entry, stored.simulated)}", soft_wrap=True)
    if modelnew:
        console.print(f"import {module_name(out)}: the solution's own module; {module_name(out)}.check() compares "
                      "ModelNew with the task's reference", soft_wrap=True)
        return
    console.print(f"import {module_name(out)}: registers a torch.library operator; see its docstring for "
                  f"torch.compile, CUDA graphs" + (" and replace(model)" if task.spec.torch else ""), soft_wrap=True)
