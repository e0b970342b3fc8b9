"""``kernelwright report``, ``show`` and ``verify``: a stored run as one HTML file, in the terminal, and
re-measured on this machine's GPU. RUN is a run id under ``--traces`` or a path to a run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .app import BadInput, app, console, err_console, input_errors
from .exits import ExitCode, epilog
from .options import OUTPUT, SANDBOX, RunArg, Traces, json_flag

VerificationJson = json_flag("Print the verification as JSON.")


def _stored(run: str, traces: Path):
    from ..trace.reader import TraceError, read

    try:
        return read(run, traces)
    except TraceError as exc:
        raise BadInput(str(exc)) from None


@app.command("report")
@input_errors
def report_cmd(run: RunArg,
               out: Annotated[Optional[Path], typer.Option("-o", "--out", help="HTML file to write (default: "
                                                           "report.html in the run folder).", rich_help_panel=OUTPUT)] = None,
               traces: Traces = Path("traces")):
    """Write one self-contained HTML file: the claim and its baselines, validity envelope, cost, progress plots, lineage, every candidate's diff and result."""
    from ..report.html import write_report

    stored = _stored(run, traces)
    if out is not None and out.is_dir():
        raise BadInput(f"-o {out}: is a folder; give a file name")
    try:
        path = write_report(stored, out)
    except OSError as exc:
        raise BadInput(f"cannot write the report: {exc}") from None
    console.print(f"report: {path}" + (" (SIMULATED run)" if stored.simulated else ""), highlight=False, soft_wrap=True)


@app.command("show")
@input_errors
def show_cmd(run: RunArg, traces: Traces = Path("traces")):
    """Print a stored run's claim, baselines, envelope, cost and lineage tree."""
    from ..report import views

    stored = _stored(run, traces)
    s = views.summary_view(stored, views.load_task(stored))
    console.print(f"[bold]run {escape(s['run_id'])}[/]: {escape(s['task'])} (version {s['task_version']}), proposer "
                  f"{escape(s['proposer'])}, sandbox {escape(s['sandbox'])}, {s['candidates']} candidates ({escape(s['counts'])})",
                  highlight=False, soft_wrap=True)
    if s["simulated"]:
        console.print("[bold red]SIMULATED RUN: no figure here was measured on a GPU[/]")
    for note in s["notes"]:
        console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)
    best = s["best"]
    if best:
        console.print(f"winner [bold]{best['id']}[/] ({escape(best['origin'])}): [bold]{best['speedup']}[/] vs {escape(best['against'])}: "
                      f"{best['verdict']}" + (f"; vs vendor {best['vendor']}" if best["vendor"] else "")
                      + f"; {best['median_ms']} ms, {best['pct']}% of roofline", highlight=False, soft_wrap=True)
    else:
        why = "a compile-only run times nothing" if s["sandbox"] == "compile-only" else "no candidate beat the baseline"
        console.print(f"winner: none ({why})", highlight=False)
    for b in s["baselines"]:
        console.print(f"  {b['name']}: {escape(b['what'])} ({b['ms']})", highlight=False, soft_wrap=True)
    env = {row["key"]: row["value"] for row in s["envelope"]}
    console.print("envelope: " + "; ".join(f"{label} {escape(env[key])}" for key, label in (
        ("gpu", "GPU"), ("driver", "driver"), ("cuda_runtime", "CUDA"), ("nvrtc", "NVRTC"), ("benchmark", "at"))
        if key in env), highlight=False, soft_wrap=True)
    for h in s["heldout"] or []:
        flag = f" [red]FLAGGED: {escape(h['reason'])}[/]" if h["flagged"] else ""
        console.print(f"  held-out {h['sizes']}: {h['status']} {h['speedup']}{flag}", highlight=False, soft_wrap=True)
    if s["sanitize"]:
        console.print(f"  {escape(s['sanitize'])}", highlight=False, soft_wrap=True)
    console.print("cost:", highlight=False)
    for row in s["cost"]:
        console.print(f"  {row['label']}: {escape(row['value'])}", highlight=False, soft_wrap=True)
    console.print("lineage:", highlight=False)
    for n in views.lineage_lines(stored):
        style = "green" if n["ok"] else "red"
        text = f"{escape(n['prefix'])}{n['id']} {escape(n['origin'])} [{style}]{n['status']}[/]"
        text += f" {n['speedup']}" if n["speedup"] else ""
        text += " [bold green]<- winner[/]" if n["best"] else ""
        text += f" ({escape(n['skipped'])})" if n["skipped"] else ""
        text += f" [red]{escape(n['error'])}[/]" if n["error"] else (f" [dim]{escape(n['note'])}[/]" if n["note"] else "")
        console.print(text, highlight=False, soft_wrap=True)


@app.command("verify", epilog=epilog(OK="it reproduces", FAILED="it does not",
                                     BAD_INPUT="nothing to verify, or bad input", NO_DEVICE="no usable CUDA device"))
@input_errors
def verify_cmd(run: RunArg,
               tolerance: Annotated[float, typer.Option(help="Relative slack on each end of the claimed interval (0: the "
                                                             "intervals must overlap strictly).")] = 0.03,
               budget: Annotated[Optional[float], typer.Option(help="Seconds of candidate GPU time for timing (default: "
                                                                    "the run's own setting).", rich_help_panel=SANDBOX)] = None,
               traces: Traces = Path("traces"), as_json: VerificationJson = False):
    """Re-measure the winner against the baseline on this GPU and say whether the claimed interval reproduces."""
    from sandbox import GPUSandbox
    from sandbox.host.pool import WorkerDied, WorkerTimeout

    from ..claims.verify import NothingToVerify, prepare, sandbox_config, verify

    if not 0 <= tolerance < 1:
        raise BadInput(f"--tolerance: expected a fraction in [0, 1), got {tolerance}")
    stored = _stored(run, traces)
    try:
        prepare(stored)
    except NothingToVerify as exc:
        raise BadInput(str(exc)) from None
    try:
        sandbox = GPUSandbox(sandbox_config(stored, budget))
    except (RuntimeError, WorkerDied, WorkerTimeout) as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc).splitlines()[0])}\nverify re-measures on a CUDA device; "
                          "this machine has none that works. `kernelwright show RUN` and `kernelwright report RUN` "
                          "need no GPU.", soft_wrap=True, highlight=False)
        raise typer.Exit(ExitCode.NO_DEVICE) from None
    with sandbox:
        v = verify(stored, tolerance, sandbox=sandbox)
    if as_json:
        print(json.dumps(v.to_dict(), indent=2, default=str))
    else:
        _print_verification(v)
    raise typer.Exit(ExitCode.OK if v.reproduces else ExitCode.FAILED)


def _print_verification(v) -> None:
    from ..report.views import NOT_RECORDED, interval, verdict

    sizes = ",".join(f"{k}={x}" for k, x in v.sizes.items())
    console.print(f"verify run {escape(v.run_id)}: winner {v.candidate} ({escape(v.origin)}) at {sizes}", highlight=False)
    console.print(f"  claimed : {interval(v.claimed)} vs baseline ({verdict(v.claimed)})", highlight=False)
    if v.measured is not None:
        console.print(f"  measured: {interval(v.measured)} vs baseline ({verdict(v.measured)})", highlight=False)
    else:
        console.print(f"  measured: {v.status}" + (f": {escape(v.error)}" if v.error else ""), highlight=False, soft_wrap=True)
    if v.claimed_vendor or v.measured_vendor:
        console.print(f"  vs vendor: claimed {interval(v.claimed_vendor)}, measured {interval(v.measured_vendor)}",
                      highlight=False)
    for row in v.environment:
        mark = "" if row["same"] else "  <- differs"
        then, now = (NOT_RECORDED if x is None else escape(str(x)) for x in (row["run"], row["now"]))
        console.print(f"  {row['label']:<18} run: {then}  now: {now}{mark}",
                      highlight=False, soft_wrap=True)
    for w in v.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    style = "bold green" if v.reproduces else "bold red"
    console.print(f"[{style}]{escape(v.verdict())}[/]", highlight=False, soft_wrap=True)
