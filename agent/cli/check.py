"""``kernelwright check-task PATH [CANDIDATE...]``: validate a task on a machine without a GPU (the checks are
``sandbox.host.check_task``'s) and print its sizes and what each check found."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, console, input_errors, load_task, styled
from .exits import ExitCode, epilog
from .options import SANDBOX, TaskArg, json_flag
from .tables import Col, fit

CheckJson = json_flag("Print the sizes and the findings as JSON.")
STYLE = {"ok": "green", "failed": "bold red", "skipped": "yellow", "note": "cyan"}


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


@app.command("check-task", epilog=epilog(OK="every check passed", FAILED="a check failed (its row says why)",
                                         BAD_INPUT="the task does not load, or bad input"))
@input_errors
def check_task_cmd(task: TaskArg,
                   candidates: Annotated[Optional[list[Path]], typer.Argument(help="Other candidate .cu files to check "
                                                                                   "against the task.")] = None,
                   arch: Annotated[str, typer.Option(help="Target architecture of the compiles and of the shared "
                                                         "memory limit.", rich_help_panel=SANDBOX)] = "sm_90",
                   as_json: CheckJson = False):
    """Validate a task without a GPU: load it, run reference() (and vendor()) with NumPy at every check size, check
    their outputs, measure its check strength (zeros, a constant, each input passed through, noise at ten times the
    tolerance and, for a PyTorch task, the module with one operation skipped must each fail the task), compile the
    baseline and resolve its plan at every size against the compiled kernels."""
    from sandbox.host.check_task import check_task

    load_task(task)   # one error line when it does not load; a note when a local folder bears a suite name
    report = check_task(task, candidates or [], arch=arch)
    if as_json:
        print(report.model_dump_json(indent=2))
        raise typer.Exit(ExitCode.OK if report.ok else ExitCode.FAILED)
    sizes = [[r.label, ", ".join(f"{k}={v}" for k, v in {**r.sizes, **r.derived}.items()), _bytes(r.array_bytes),
              f"{r.flops:.3g}", _bytes(r.roofline_bytes)] for r in report.sizes]
    console.print(fit([Col("size"), Col("sizes and derived", wrap=True), Col("arrays", right=True),
                       Col("flops", right=True), Col("roofline B", right=True)], sizes, console.width,
                      title=f"{report.task} (version {report.version}, {report.folder})"))
    rows = [[f.check, styled((f.status, STYLE[f.status])), f.detail] for f in report.findings]
    console.print(fit([Col("check"), Col("result"), Col("detail", wrap=True)], rows, console.width, key=2))
    failed = [f for f in report.findings if f.status == "failed"]
    verdict = f"{len(failed)} check(s) failed" if failed else "every check passed"
    console.print(styled((f"{report.task}: {verdict}", "bold red" if failed else "bold green")))
    raise typer.Exit(ExitCode.OK if report.ok else ExitCode.FAILED)
