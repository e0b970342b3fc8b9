"""``kernelwright optimize`` and ``kernelwright batch``: the agent loop from the command line, with live
progress and a final table. Runs write traces under ``--traces`` (default ``traces/``)."""

from __future__ import annotations

import datetime as dt
import json
import secrets as pysecrets
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.live import Live
from rich.text import Text


from ..run_options import OptionError, RunOptions
from ..stops import StopReason
from sandbox.judging.result import Interval

from ..report.search import NotWinner
from ..trace.records import EntryRow, TotalsRecord
from .app import (BadInput, app, console, err_console, error_line, input_errors, interruptible, load_task,
                  styled)
from .exits import ExitCode, epilog
from .options import with_run_options
from ..report.search import describe
from .tables import Col, fit

def _overrides(opts: RunOptions, file_model: str | None) -> dict:
    try:
        return opts.overrides(file_model)
    except OptionError as exc:
        raise BadInput(str(exc)) from None


def _file(config: Path | None) -> dict:
    from ..config import ConfigError, read_file

    if config is None:
        return {}
    try:
        return read_file(config)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def _run(task, base: dict, over: dict, traces: Path, quiet: bool, where: str, **kw):
    """Run one optimize (start or resume) with live progress; errors in setup become BadInput / exit 3."""
    from ..api import run_with
    from ..config import ConfigError
    from ..proposers.reach import EndpointUnreachable

    live = None if quiet else Live(_progress({}), console=console, refresh_per_second=4, transient=True)

    def on_progress(kind: str, snap: dict) -> None:
        if live is not None:
            live.update(_progress(snap))

    try:
        if live is not None:
            live.start()
        return run_with(task, base, over, traces=traces, where=where, on_progress=on_progress, **kw)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    except FileExistsError as exc:
        raise BadInput(str(exc)) from None
    except EndpointUnreachable as exc:
        if live is not None:
            live.stop()
        error_line(str(exc))
        raise typer.Exit(ExitCode.FAILED) from None
    except RuntimeError as exc:
        if "CUDA device" in str(exc):
            from .app import device_problem

            error_line(device_problem(str(exc)))
            err_console.print("--sandbox gpu needs a CUDA device; --sandbox compile-only and --sandbox fake work "
                              "without one.", soft_wrap=True)
            raise typer.Exit(ExitCode.NO_DEVICE) from None
        raise
    finally:
        if live is not None:
            live.stop()


def _progress(snap: dict) -> Text:
    from ..loop.progress import status_line

    if not snap:
        return Text("starting...")
    width = max(console.width, 40)
    text = styled((snap["phase"], "bold"), " | " + status_line(snap, width - len(snap["phase"]) - 3))
    if snap.get("last"):
        text.append(f"\n  last: {snap['last'][:width - 9]}")
    return text


def _speed(s: Interval | None) -> str:
    return f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s else "-"


def _summary_cols(against: str) -> list[Col]:
    return [Col("id"), Col("status"), Col(f"speedup vs {against}"), Col("median ms [95%]"),
            Col("vs compile" if against == "eager" else "vs vendor"), Col("% roofline", right=True),
            Col("regs", right=True), Col("origin"), Col("from"), Col("note", wrap=True)]


def _note(r: EntryRow, winner: str | None, reasons: dict[str, NotWinner]) -> str:
    """What a row's last column says: its error; else its knobs and flags, and for the winner that it won, for
    another timed candidate why it did not."""
    if r.error:
        return r.error.strip().splitlines()[0][:120]
    config = describe(r.knobs, r.flags)
    if r.id == winner:
        return f"winner: {config}" if config else "winner"
    why = reasons.get(r.id)
    return "; ".join(x for x in (config, f"not the winner: {why.text}" if why else "") if x)


def collapse(rows: list[list]) -> list[list]:
    """Consecutive rows that differ only in their id become one row (``c0001..c0016 (16 rows)``)."""
    out: list[list] = []
    run: list[list] = []

    def flush() -> None:
        if len(run) > 2:
            out.append([f"{_plain(run[0][0])}..{_plain(run[-1][0])} ({len(run)} rows)"] + run[0][1:])
        else:
            out.extend(run)

    for row in rows:
        if run and [_plain(c) for c in row[1:]] == [_plain(c) for c in run[-1][1:]]:
            run.append(row)
            continue
        flush()
        run = [row]
    flush()
    return out


def _plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def print_summary(run) -> None:
    from ..claims.heldout import regression_note, set_aside_note
    from ..report.search import not_winner

    summary, claim = run.summary, run.summary.claim
    rows = []
    listed = run.rows()
    against = next((r.against for r in listed if r.against), "baseline")  # "eager" for a PyTorch task
    winner = summary.best.id if summary.best else None
    reasons = not_winner(run.entries, run.best, run.baseline, claim.set_aside)
    for r in listed[:40]:
        ci = r.ci_ms
        ms = f"{ci.value:.4g} [{ci.low:.4g}, {ci.high:.4g}]" if ci else "-"
        pct = f"{r.pct_of_roofline:.1f}" if r.pct_of_roofline is not None else "-"
        status = Text(r.status, style="green" if r.status in ("ok", "compiled") else "red")
        rows.append([r.id, status, _speed(r.speedup), ms, _speed(r.vendor_speedup), pct,
                     str(r.registers) if r.registers is not None else "-", r.origin,
                     ",".join(r.parents) or "-", _note(r, winner, reasons)])
    rows = collapse(rows)[:20]
    title = f"run {run.id}: {summary.candidates} candidates" + (" (SIMULATED)" if run.simulated else "")
    console.print(fit(_summary_cols(against), rows, console.width, title=title, key=3))
    for note in summary.notes:
        console.print(note, style="bold yellow", soft_wrap=True)
    best = summary.best
    sim = " [SIMULATED]" if run.simulated else ""
    retime = claim.retime if best and claim.retime and claim.retime.candidate == best.id else None
    if best and best.speedup:
        what = "PyTorch eager" if against == "eager" else "the baseline"
        speed = claim.headline(best.id, best.speedup)   # the re-time alone, where there is one
        faster = speed.low > 1.0
        verdict = f"faster than {what} (interval clears 1.0)" if faster else f"not clearly faster than {what}"
        regress = regression_note(claim.rows)
        aside = set_aside_note(claim.set_aside)
        console.print(styled(f"best: {best.id} ({best.origin}) {_speed(speed)}: {verdict}",
                             (f"; {regress}", "bold red") if regress else "", (f"; {aside}", "yellow") if aside else "",
                             sim), soft_wrap=True)
        if retime is not None:
            console.print(styled((retime.text, "bold yellow") if retime.differs else retime.text, sim), soft_wrap=True)
    elif summary.sandbox != "compile-only":
        from ..report.search import runner_up

        what = "PyTorch eager" if against == "eager" else "the baseline"
        if not _measured(run):
            console.print(f"best: none: nothing was timed, not even {what}, before the run stopped; a longer budget "
                          f"(--budget-wall-s, --budget-gpu-s) lets it measure", style="bold red", soft_wrap=True)
        elif not any(e is not run.baseline and e.result.timing is not None for e in run.entries):
            console.print(f"best: none: no candidate was timed against {what}", soft_wrap=True)
        else:
            found = runner_up(run.entries, None, run.baseline, claim.set_aside)
            console.print(f"best: no candidate beat {what}" + _runner_up_text(found), soft_wrap=True)
    t = summary.totals or TotalsRecord()
    screened = f"{t.screened} configurations screened, " if t.screened else ""
    console.print(f"totals: {t.iterations} iterations, {screened}{t.evaluations} evaluations in full, "
                  f"{t.duplicates} duplicates "
                  f"skipped, {t.tokens:,} tokens ({t.prompt_tokens:,} prompt, {t.completion_tokens:,} completion, "
                  f"{t.reasoning_tokens:,} reasoning, {t.cached_tokens:,} cached), ${t.usd:.4f}, "
                  f"{t.gpu_s:.2f} GPU-s{' (simulated)' if run.simulated else ''}, {t.wall_s:.1f} s wall", soft_wrap=True)
    if t.screened:
        console.print(f"the {t.screened} screened configurations with their times: kernelwright show {run.id} "
                      f"(--json for all of them); the report plots them", soft_wrap=True)
    for text, simulated in ((claim.tuning and claim.tuning.text, False), (claim.ledger and claim.ledger.text, True),
                            (claim.heldout and claim.heldout.text, True)):
        if text:
            console.print(text + (sim if simulated else ""), soft_wrap=True)
    if claim.sanitizer:
        console.print(claim.sanitizer.text, soft_wrap=True)
    stops = "; ".join(f"{phase}: {stop.message}" for phase, stop in summary.stops.items())
    console.print(f"stopped: {stops or '-'}; trace: {run.path}", soft_wrap=True)


def _runner_up_text(found) -> str:
    """``; the fastest, c0003 at 1.012x [1.004, 1.015], is within the noise floor: ...`` (empty where none was timed)."""
    if found is None:
        return ""
    entry, why = found
    s = entry.result.speedup("baseline")
    at = f" at {_speed(s)}" if s else ""
    return f"; the fastest candidate, {entry.id}{at}, is not the winner: {why.text}"


def _exit_code(run) -> int:
    """From every phase's stop, not only the last: a model phase that failed is not hidden by the tuning after it."""
    reasons = {stop.reason for stop in run.summary.stops.values()}
    if StopReason.INTERRUPTED in reasons:
        return ExitCode.INTERRUPTED
    if run.summary.sandbox != "compile-only" and not _measured(run):
        return ExitCode.FAILED   # a run that timed nothing has no answer to give
    return ExitCode.FAILED if any(reason.failed for reason in reasons) else ExitCode.OK


def _measured(run) -> bool:
    """Whether the run timed anything (the baseline is timed first)."""
    return any(e.result.timing is not None for e in run.entries)


@app.command(epilog=epilog(OK="the run ended (a limit, the proposer done)",
                           FAILED="it ended on a failure (the model endpoint, the sandbox, a broken baseline) or "
                                  "before it timed anything (a budget too small for the baseline)",
                           BAD_INPUT="bad input", NO_DEVICE="--sandbox gpu without a CUDA device",
                           INTERRUPTED="interrupted (Ctrl-C; resumable)"))
@input_errors
@interruptible
@with_run_options
def optimize(task: Annotated[Optional[str], typer.Argument(help="Suite task name or task folder (omit with --resume).")] = None,
             resume: Annotated[Optional[str], typer.Option(help="Continue the run with this id or folder.")] = None,
             replay: Annotated[Optional[Path], typer.Option(help="Replay the model answers of this run folder instead of "
                                                                 "asking a model.")] = None,
             run_id: Annotated[Optional[str], typer.Option(help="Name of the run folder (default: time, task, random "
                                                                "suffix).")] = None, *, opts: RunOptions):
    """Make a task's kernel faster: a language model rewrites it (or the built-in search tunes it), the sandbox judges."""
    config, traces = opts.config, opts.traces
    if (task is None) == (resume is None):
        raise BadInput("give a TASK, or --resume RUN (not both)")
    if task is not None:
        # one error line and exit code 2 before a trace folder exists; a note for a local namesake
        from ..loop.session import new_run_id

        loaded = load_task(task)
        run_id = run_id or new_run_id(loaded)   # known here, so that a Ctrl-C at any moment can name it
    base = _file(config)
    file_model = (base.get("model") or {}).get("name")
    over = _overrides(opts, file_model)
    if not resume and not replay and not (over.get("model") or {}).get("name") and not file_model:
        err_console.print("No model configured: running the built-in search over the kernel's knobs and compiler flags.\n"
                          "To let a language model rewrite the kernel: --model NAME [--base-url URL] (key in "
                          "OPENAI_API_KEY, none needed for a local server), or a [model] table in --config FILE.")
    try:
        run = _run(task, base, over, traces, opts.quiet or opts.as_json, where=str(config) if config else "flags",
                   resume=resume, replay=replay, run_id=run_id)
    except KeyboardInterrupt:
        _say_resumable(resume or run_id, traces, before_loop=True)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    ref = str(run.path) if resume else run.id
    try:   # the run is written by now: a Ctrl-C while it is shown names it too
        if opts.as_json:
            print(json.dumps({**run.summary.to_json(), "screened": [r.to_json() for r in run.screened()],
                              "not_winner": {k: w.to_json() for k, w in run.not_winner().items()}}, indent=2,
                             default=str))
        else:
            print_summary(run)
    except KeyboardInterrupt:
        _say_resumable(ref, traces)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    code = _exit_code(run)
    if code == ExitCode.INTERRUPTED:
        _say_resumable(ref, traces)
    raise typer.Exit(code)


def _say_resumable(ref: str, traces: Path, before_loop: bool = False) -> None:
    """After Ctrl-C: the command that continues the run, or that nothing was written to continue."""
    folder = Path(ref) if Path(ref).is_dir() else traces / ref
    if not (folder / "run.json").is_file():
        err_console.print(f"interrupted before run {ref} was written: nothing to resume", soft_wrap=True)
        return
    at = "" if traces == Path("traces") or Path(ref).is_dir() else f" --traces {traces}"
    err_console.print(f"interrupted{' while it started' if before_loop else ''}: `kernelwright optimize --resume "
                      f"{ref}{at}` continues run {folder.name}", soft_wrap=True)


@app.command(epilog=epilog(OK="every task ran", FAILED="a task could not run or its run ended on a failure (its row "
                                                 "says which)",
                           BAD_INPUT="bad input", NO_DEVICE="--sandbox gpu without a CUDA device",
                           INTERRUPTED="interrupted (Ctrl-C; --resume BATCH continues it)"))
@input_errors
@with_run_options
def batch(tasks: Annotated[Optional[list[str]], typer.Argument(help="Suite task names or task folders, run one after "
                                                                    "another.")] = None,
          resume: Annotated[Optional[str], typer.Option(help="Continue the batch with this id or folder.")] = None,
          batch_id: Annotated[Optional[str], typer.Option(help="Name of the batch folder.")] = None, *,
          opts: RunOptions):
    """Optimize several tasks one after another (each its own run, budgets per task); resumable; a summary table."""
    from ..config import merge, run_name
    from ..loop.batch import Batch

    traces, quiet, as_json = opts.traces, opts.quiet, opts.as_json
    if bool(tasks) == bool(resume):
        raise BadInput("give TASK names, or --resume BATCH (not both)")
    base = _file(opts.config)
    over = _overrides(opts, (base.get("model") or {}).get("name"))
    if resume:
        b = Batch.open(resume, traces)
        b.info["overrides"] = merge(b.overrides, over)  # flags given now apply (credentials are not recorded)
        b.info["base"] = merge(b.base, base)
    else:
        name = run_name(batch_id, "--batch-id") if batch_id else f"{dt.datetime.now():%Y%m%d-%H%M%S}-batch-{pysecrets.token_hex(2)}"
        b = Batch.create(traces / name, tasks, base, over)
    with b:
        rows, interrupted = _batch_runs(b, quiet, as_json)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2, default=str))
    else:
        cols = [Col("task"), Col("state"), Col("speedup vs baseline"), Col("best"), Col("candidates", right=True),
                Col("tokens", right=True), Col("USD", right=True), Col("GPU-s", right=True), Col("stop", wrap=True)]
        table = [[r.task, r.state, _speed(r.speedup), r.best or "-", "-" if r.candidates is None else str(r.candidates),
                  f"{r.tokens:,}", f"{r.usd:.4f}", f"{r.gpu_s:.2f}" + (" (sim)" if r.simulated else ""), r.stop or "-"]
                 for r in rows]
        console.print(fit(cols, table, console.width, title=f"batch {b.path.name}: {len(rows)} tasks", key=3))
        console.print(f"batch folder: {b.path}", soft_wrap=True)
    if interrupted:
        err_console.print(f"interrupted: `kernelwright batch --resume {b.path.name}` continues it", soft_wrap=True)
        raise typer.Exit(ExitCode.INTERRUPTED)
    raise typer.Exit(ExitCode.FAILED if any(r.state in ("error", "failed") for r in rows) else ExitCode.OK)


def _batch_runs(b, quiet: bool, as_json: bool) -> tuple[list, bool]:
    """Run (or resume) each unfinished task of the batch in turn; the summary rows, and whether Ctrl-C stopped it
    (in a run, which keeps its trace, or between two)."""
    try:
        interrupted = _each_task(b, quiet, as_json)
    except KeyboardInterrupt:
        interrupted = True
    return b.write_summary(), interrupted


def _each_task(b, quiet: bool, as_json: bool) -> bool:
    for name in b.tasks:
        if b.done(name):
            continue
        if not quiet and not as_json:
            console.print(styled((name, "bold"), f": {'resuming' if b.started(name) else 'starting'} ({b.run_dir(name)})"))
        try:
            started = b.started(name)
            run = _run(None if started else name, b.base, b.overrides, b.path, quiet or as_json,
                       where=f"batch {b.path.name}", resume=b.run_dir(name) if started else None,
                       run_id=None if started else b.run_dir(name).name)
        except typer.Exit as exc:
            if exc.exit_code == ExitCode.NO_DEVICE:
                raise
            b.record_error(name, f"exit code {exc.exit_code}")
            continue
        except BadInput as exc:
            b.record_error(name, str(exc))
            continue
        b.record(name, run.summary)
        if run.stop is not None and run.stop.reason is StopReason.INTERRUPTED:
            return True
    return False
