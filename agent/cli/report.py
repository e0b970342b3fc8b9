"""``kernelwright report``, ``show`` and ``verify``: a stored run as one HTML file, in the terminal, and
re-measured on this machine's GPU. RUN is a run id under ``--traces`` or a path to a run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import BadInput, app, console, err_console, error_line, input_errors, styled
from .exits import ExitCode, epilog
from .options import OUTPUT, SANDBOX, RunArg, Traces, json_flag

VerificationJson = json_flag("Print the verification as JSON.")


def _stored(run: str, traces: Path):
    from ..trace.reader import TraceError, read

    try:
        return read(run, traces)
    except TraceError as exc:
        raise BadInput(str(exc)) from None


@app.command("report", epilog=epilog(OK="written", BAD_INPUT="no such run, a damaged trace, or a file that cannot be "
                                                              "written"))
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
    console.print(f"report: {path}" + (" (SIMULATED run)" if stored.simulated else ""), soft_wrap=True)


ShowJson = json_flag("Print the run's summary view (claim, baselines, envelope, held-out, cost, lineage) as JSON.")


@app.command("show", epilog=epilog(OK="shown", BAD_INPUT="no such run, or a damaged trace"))
@input_errors
def show_cmd(run: RunArg, traces: Traces = Path("traces"), as_json: ShowJson = False):
    """Print a stored run's claim, baselines, envelope, cost and lineage tree."""
    from ..report import views

    stored = _stored(run, traces)
    s = views.summary_view(stored, stored.unchanged_task())
    lineage = views.lineage_lines(stored)
    if as_json:
        print(json.dumps({**s, "lineage": lineage}, indent=2, default=str))
        return
    console.print(styled((f"run {s['run_id']}", "bold"), f": {s['task']} (version {s['task_version']}), proposer "
                         f"{s['proposer']}, sandbox {s['sandbox']}, {s['candidates']} candidates ({s['counts']})"),
                  soft_wrap=True)
    if s["simulated"]:
        console.print("SIMULATED RUN: no figure here was measured on a GPU", style="bold red")
    for note in s["notes"]:
        console.print(note, style="yellow", soft_wrap=True)
    best = s["best"]
    if best:
        console.print(styled("winner ", (best["id"], "bold"), f" ({best['origin']}): ", (best["speedup"], "bold"),
                             f" vs {best['against']}: {best['verdict']}",
                             (f"; {best['regressions']}", "bold red") if best["regressions"] else "",
                             (f"; {best['set_aside']}", "yellow") if best.get("set_aside") else "",
                             f"; vs vendor {best['vendor']}" if best["vendor"] else "",
                             f"; {best['median_ms']} ms, {best['pct']}% of roofline"), soft_wrap=True)
    else:
        console.print(f"winner: none ({s['no_winner']})", soft_wrap=True)
        up = s["runner_up"]
        if up:
            console.print(styled("  the fastest candidate, ", (up["id"], "bold"), f" at {up['speedup']}, is not the "
                                 f"winner: {up['text']}"), soft_wrap=True)
    for b in s["baselines"]:
        console.print(f"  {b['name']}: {b['what']} ({b['ms']})", soft_wrap=True)
    env = {row["key"]: row["value"] for row in s["envelope"]}
    console.print("envelope: " + "; ".join(f"{label} {env[key]}" for key, label in (
        ("gpu", "GPU"), ("driver", "driver"), ("cuda_runtime", "CUDA"), ("nvrtc", "NVRTC"), ("benchmark", "at"))
        if key in env), soft_wrap=True)
    for h in s["heldout"] or []:
        console.print(styled(f"  held-out {h['sizes']}: {h['status']} {h['speedup']}",
                             (f" FLAGGED: {h['reason']}", "red") if h["flagged"] else ""), soft_wrap=True)
    if s["sanitize"]:
        console.print(f"  {s['sanitize']}", soft_wrap=True)
    console.print("cost:")
    for row in s["cost"]:
        console.print(f"  {row['label']}: {row['value']}", soft_wrap=True)
    _print_screened(s["screened"])
    console.print("lineage:")
    for n in lineage:
        console.print(styled(f"{n['prefix']}{n['id']} {n['origin']} ", (n["status"], "green" if n["ok"] else "red"),
                             f" {n['speedup']}" if n["speedup"] else "", (" <- winner", "bold green") if n["best"] else "",
                             f" ({n['skipped']})" if n["skipped"] else "",
                             (f" {n['error']}", "red") if n["error"] else ((f" {n['note']}", "dim") if n["note"] else ""),
                             (f" (not the winner: {s['not_winner'][n['id']]['text']})", "yellow") if n["id"] in s["not_winner"]
                             else "", (f" [{n['picked']}]", "dim") if n.get("picked") else ""),
                      soft_wrap=True)


SCREENED_SHOWN = 25


def _print_screened(rows: list[dict]) -> None:
    """The built-in search's screened configurations, fastest first; those evaluated in full name their entry."""
    from .tables import Col, fit

    if not rows:
        return
    cols = [Col("#", right=True), Col("time vs start [95%]"), Col("ms", right=True), Col("status"), Col("evaluated"),
            Col("configuration", wrap=True)]
    table = []
    for i, r in enumerate(rows[:SCREENED_SHOWN], 1):
        ci = r["relative_ci"]
        rel = f"{r['relative']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if r["relative"] is not None and ci else (
            f"{r['relative']:.3f}" if r["relative"] is not None else "-")
        table.append([str(i), rel, f"{r['ms']:.4g}" if r["ms"] is not None else "-",
                      styled((r["status"], "green" if r["status"] == "ok" else "red")), r["evaluated"] or "-",
                      r["config"] + (f" ({r['error']})" if r["error"] else "")])
    more = f"; the {len(rows) - SCREENED_SHOWN} slower or failed ones in --json" if len(rows) > SCREENED_SHOWN else ""
    console.print(fit(cols, table, console.width, key=3,
                      title=f"screened configurations: {len(rows)}, fastest first (time relative to the start; "
                            f"lower is faster{more})"))


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
        from .app import device_problem

        error_line(device_problem(str(exc)))
        err_console.print("verify re-measures on a CUDA device; this machine has none that works. `kernelwright show "
                          "RUN` and `kernelwright report RUN` need no GPU.", soft_wrap=True)
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
    console.print(f"verify run {v.run_id}: winner {v.candidate} ({v.origin}) at {sizes}", soft_wrap=True)
    console.print(f"  claimed : {interval(v.claimed)} vs baseline ({verdict(v.claimed)})")
    if v.measured is not None:
        console.print(f"  measured: {interval(v.measured)} vs baseline ({verdict(v.measured)})")
    else:
        console.print(f"  measured: {v.status}" + (f": {v.error}" if v.error else ""), soft_wrap=True)
    if v.claimed_vendor or v.measured_vendor:
        console.print(f"  vs vendor: claimed {interval(v.claimed_vendor)}, measured {interval(v.measured_vendor)}")
    for row in v.environment:
        mark = "" if row["same"] else "  <- differs"
        then, now = (NOT_RECORDED if x is None else str(x) for x in (row["run"], row["now"]))
        console.print(f"  {row['label']:<18} run: {then}  now: {now}{mark}", soft_wrap=True)
    for w in v.warnings:
        console.print(styled(("warning:", "yellow"), f" {w}"), soft_wrap=True)
    console.print(v.verdict(), style="bold green" if v.reproduces else "bold red", soft_wrap=True)
