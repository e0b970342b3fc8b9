"""``kernelwright optimize`` and ``kernelwright batch``: the agent loop from the command line, with live
progress and a final table. Runs write traces under ``--traces`` (default ``traces/``)."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import json
import secrets as pysecrets
from pathlib import Path
from typing import Any, Optional

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from .app import EXIT_NO_DEVICE, BadInput, app, console, err_console, input_errors

EXIT_INTERRUPTED = 130
FAILED_STOPS = ("model endpoint", "sandbox", "baseline")

# Options shared by optimize and batch: (parameter, type, typer option).
RUN_OPTIONS = (
    ("model", Optional[str], typer.Option(None, "--model", help="Model name on the endpoint; none: the built-in search over knobs and flags.")),
    ("base_url", Optional[str], typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (default: OPENAI_BASE_URL).")),
    ("api_key_env", Optional[str], typer.Option(None, "--api-key-env", help="Environment variable holding the API key (default OPENAI_API_KEY; local servers need none).")),
    ("iterations", Optional[int], typer.Option(None, "--iterations", help="Model requests in the model phase (default 10).")),
    ("budget_tokens", Optional[int], typer.Option(None, "--budget-tokens", help="Stop after this many prompt + completion tokens.")),
    ("budget_usd", Optional[float], typer.Option(None, "--budget-usd", help="Stop after spending this many US dollars (needs the model's price).")),
    ("budget_gpu_s", Optional[float], typer.Option(None, "--budget-gpu-s", help="Stop after this many GPU-seconds of checking and timing.")),
    ("budget_wall_s", Optional[float], typer.Option(None, "--budget-wall-s", help="Stop after this many seconds of wall time.")),
    ("plateau", Optional[int], typer.Option(None, "--plateau", help="Stop after this many timed candidates in a row without a 1% gain.")),
    ("parallel", Optional[int], typer.Option(None, "--parallel", help="Model requests in flight at once (the GPU still evaluates one at a time).")),
    ("temperature", Optional[float], typer.Option(None, "--temperature", help="Sampling temperature.")),
    ("max_tokens", Optional[int], typer.Option(None, "--max-tokens", help="Completion budget per request.")),
    ("price_in", Optional[float], typer.Option(None, "--price-in", help="USD per million prompt tokens of this model.")),
    ("price_out", Optional[float], typer.Option(None, "--price-out", help="USD per million completion tokens of this model.")),
    ("sandbox", Optional[str], typer.Option(None, "--sandbox", help="auto, gpu, compile-only (real compiles, no timing) or fake (simulated timings).")),
    ("no_tune", bool, typer.Option(False, "--no-tune", help="Do not sweep the winner's knobs and flags after a model-driven run.")),
    ("config", Optional[Path], typer.Option(None, "--config", help="Run config file (TOML): model, prices, budget, selection, tune, sandbox.")),
    ("traces", Path, typer.Option(Path("traces"), "--traces", help="Folder for run traces.")),
    ("quiet", bool, typer.Option(False, "--quiet", help="No live progress; only the final table.")),
    ("as_json", bool, typer.Option(False, "--json", help="Print the summary as JSON instead of tables.")),
)


def run_options(fn):
    """Give a command the options optimize and batch share; it receives them as one dict, ``opts``."""
    own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"]
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
              for name, kind, option in RUN_OPTIONS]

    @functools.wraps(fn)
    def wrapper(**kwargs):
        return fn(opts={name: kwargs.pop(name) for name, _, _ in RUN_OPTIONS}, **kwargs)

    wrapper.__signature__ = inspect.Signature(own + shared)
    wrapper.__annotations__ = {p.name: p.annotation for p in own + shared}
    del wrapper.__wrapped__  # typer reads the signature above, not fn's
    return wrapper


def overrides(model=None, base_url=None, api_key_env=None, iterations=None, budget_tokens=None, budget_usd=None,
              budget_gpu_s=None, budget_wall_s=None, plateau=None, parallel=None, temperature=None, max_tokens=None,
              price_in=None, price_out=None, sandbox=None, no_tune=False, file_model: str | None = None, **_) -> dict:
    """Config fields set on the command line (only those given); other keys of ``opts`` are ignored."""
    out: dict[str, Any] = {}

    def put(section: str | None, key: str, value) -> None:
        if value is not None:
            (out.setdefault(section, {}) if section else out)[key] = value

    for key, value in (("name", model), ("base_url", base_url), ("api_key_env", api_key_env),
                       ("temperature", temperature), ("max_tokens", max_tokens)):
        put("model", key, value)
    for key, value in (("iterations", iterations), ("tokens", budget_tokens), ("usd", budget_usd),
                       ("gpu_seconds", budget_gpu_s), ("wall_seconds", budget_wall_s), ("plateau", plateau)):
        put("budget", key, value)
    put(None, "parallel", parallel)
    if sandbox is not None:
        from sandbox import SANDBOX_KINDS

        if sandbox not in SANDBOX_KINDS:
            raise BadInput(f"--sandbox: expected one of {', '.join(SANDBOX_KINDS)}, got {sandbox!r}")
        out["sandbox"] = sandbox
    if no_tune:
        out["tune"] = {"enabled": False}
    if price_in is not None or price_out is not None:
        name = model or file_model
        if not name or price_in is None or price_out is None:
            raise BadInput("--price-in and --price-out go together, with a model (--model or model.name)")
        out["prices"] = {name: {"input_per_mtok": price_in, "output_per_mtok": price_out}}
    return out


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
    except RuntimeError as exc:
        if "CUDA device" in str(exc):
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}\n--sandbox gpu needs a CUDA device; "
                              "--sandbox compile-only works without one.", soft_wrap=True)
            raise typer.Exit(EXIT_NO_DEVICE) from None
        raise
    finally:
        if live is not None:
            live.stop()


def _progress(snap: dict):
    if not snap:
        return "starting..."
    parts = [f"[bold]{snap['phase']}[/]", f"iteration {snap['iterations']}"
             + (f" (+{snap['in_flight']} in flight)" if snap["in_flight"] else ""), f"{snap['candidates']} candidates"]
    s = snap.get("best_speedup")
    if s:
        parts.append(f"best {snap['best_id']} {s['value']:.3f}x [{s['low']:.3f}, {s['high']:.3f}]")
    parts.append(f"{snap['tokens']:,} tokens, ${snap['usd']:.4f}")
    parts.append(f"{snap['gpu_s']:.2f} GPU-s{' (simulated)' if snap.get('simulated') else ''}, {snap['wall_s']:.0f} s")
    text = " | ".join(parts)
    if snap.get("last"):
        text += f"\n  last: {escape(snap['last'][:160])}"
    return text


def _speed(s: dict | None) -> str:
    return f"{s['value']:.3f}x [{s['low']:.3f}, {s['high']:.3f}]" if s else "-"


def print_summary(run) -> None:
    summary = run.summary
    table = Table(title=f"run {run.id}: {summary['candidates']} candidates" + (" (SIMULATED)" if run.simulated else ""))
    for col in ("id", "origin", "from", "status", "median ms [95%]", "speedup vs baseline", "vs vendor", "% roofline",
                "regs", "note"):
        table.add_column(col, overflow="fold")
    for r in run.rows()[:20]:
        ms = f"{r['median_ms']:.4g} [{r['ci_ms'][0]:.4g}, {r['ci_ms'][1]:.4g}]" if r["median_ms"] is not None else "-"
        pct = f"{r['pct_of_roofline']:.1f}" if r["pct_of_roofline"] is not None else "-"
        style = "green" if r["status"] in ("ok", "compiled") else "red"
        table.add_row(r["id"], r["origin"], ",".join(r["parents"]) or "-", f"[{style}]{r['status']}[/]", ms,
                      _speed(r["speedup"]), _speed(r["vendor_speedup"]), pct,
                      str(r["registers"]) if r["registers"] is not None else "-", escape(r["error"][:80]))
    console.print(table)
    for note in summary.get("notes", []):
        console.print(f"[bold yellow]{escape(note)}[/]", soft_wrap=True)
    best = summary.get("best")
    if best and best.get("speedup"):
        s = best["speedup"]
        verdict = "faster than the baseline (interval clears 1.0)" if s["faster"] else "not clearly faster than the baseline"
        console.print(f"best: {best['id']} ({best['origin']}) {_speed(s)}: {verdict}"
                      + (" [SIMULATED]" if run.simulated else ""), highlight=False)
    elif summary.get("sandbox") != "compile-only":
        console.print("best: no candidate beat the baseline", highlight=False)
    t = summary["totals"]
    console.print(f"totals: {t['iterations']} iterations, {t['evaluations']} evaluations, {t['duplicates']} duplicates "
                  f"skipped, {t['tokens']:,} tokens ({t['prompt_tokens']:,} prompt, {t['completion_tokens']:,} completion, "
                  f"{t['reasoning_tokens']:,} reasoning, {t['cached_tokens']:,} cached), ${t['usd']:.4f}, "
                  f"{t['gpu_s']:.2f} GPU-s{' (simulated)' if run.simulated else ''}, {t['wall_s']:.1f} s wall", highlight=False)
    if summary.get("tuning_text"):
        console.print(escape(summary["tuning_text"]), highlight=False)
    if summary.get("ledger_text"):
        console.print(escape(summary["ledger_text"]) + (" [SIMULATED]" if run.simulated else ""), highlight=False)
    if summary.get("heldout_text"):
        console.print(escape(summary["heldout_text"]) + (" [SIMULATED]" if run.simulated else ""), highlight=False)
    stops = "; ".join(f"{phase}: {reason}" for phase, reason in (summary.get("stops") or {}).items())
    console.print(f"stopped: {escape(stops or '-')}; trace: {run.path}", highlight=False)


def _exit_code(run) -> int:
    reason = run.stop_reason or ""
    if reason == "interrupted":
        return EXIT_INTERRUPTED
    return 1 if reason.startswith(FAILED_STOPS) else 0


@app.command()
@input_errors
@run_options
def optimize(task: Optional[str] = typer.Argument(None, help="Suite task name or task folder (omit with --resume)."),
             resume: Optional[str] = typer.Option(None, "--resume", help="Continue the run with this id or folder."),
             replay: Optional[Path] = typer.Option(None, "--replay", help="Replay the model answers of this run folder instead of asking a model."),
             run_id: Optional[str] = typer.Option(None, "--run-id", help="Name of the run folder (default: time, task, random suffix)."),
             *, opts: dict):
    """Make a task's kernel faster: a language model rewrites it (or the built-in search tunes it), the sandbox judges."""
    if (task is None) == (resume is None):
        raise BadInput("give a TASK, or --resume RUN (not both)")
    base = _file(opts["config"])
    file_model = (base.get("model") or {}).get("name")
    over = overrides(**opts, file_model=file_model)
    if not resume and not replay and not (over.get("model") or {}).get("name") and not file_model:
        err_console.print("No model configured: running the built-in search over the kernel's knobs and compiler flags.\n"
                      "To let a language model rewrite the kernel: --model NAME [--base-url URL] (key in OPENAI_API_KEY, "
                      "none needed for a local server), or a [model] table in --config FILE.", highlight=False, markup=False)
    run = _run(task, base, over, opts["traces"], opts["quiet"] or opts["as_json"],
               where=str(opts["config"]) if opts["config"] else "flags", resume=resume, replay=replay, run_id=run_id)
    if opts["as_json"]:
        print(json.dumps(run.summary, indent=2, default=str))
    else:
        print_summary(run)
    raise typer.Exit(_exit_code(run))


@app.command()
@input_errors
@run_options
def batch(tasks: Optional[list[str]] = typer.Argument(None, help="Suite task names or task folders, run one after another."),
          resume: Optional[str] = typer.Option(None, "--resume", help="Continue the batch with this id or folder."),
          batch_id: Optional[str] = typer.Option(None, "--batch-id", help="Name of the batch folder."),
          *, opts: dict):
    """Optimize several tasks one after another (each its own run, budgets per task); resumable; a summary table."""
    from ..loop.batch import Batch

    if bool(tasks) == bool(resume):
        raise BadInput("give TASK names, or --resume BATCH (not both)")
    base = _file(opts["config"])
    over = overrides(**opts, file_model=(base.get("model") or {}).get("name"))
    traces, quiet, as_json = opts["traces"], opts["quiet"], opts["as_json"]
    if resume:
        b = Batch.open(resume, traces)
    else:
        b = Batch.create(traces / (batch_id or f"{dt.datetime.now():%Y%m%d-%H%M%S}-batch-{pysecrets.token_hex(2)}"),
                         tasks, base, over)
    for name in b.tasks:
        if b.done(name):
            continue
        if not quiet and not as_json:
            console.print(f"[bold]{name}[/]: {'resuming' if b.started(name) else 'starting'} ({b.run_dir(name)})")
        try:
            started = b.started(name)
            run = _run(None if started else name, b.base, b.overrides, b.path, quiet or as_json,
                       where=f"batch {b.path.name}", resume=b.run_dir(name) if started else None,
                       run_id=None if started else b.run_dir(name).name)
        except typer.Exit as exc:
            if exc.exit_code == EXIT_NO_DEVICE:
                raise
            b.record_error(name, f"exit code {exc.exit_code}")
            continue
        except BadInput as exc:
            b.record_error(name, str(exc))
            continue
        b.record(name, run.summary)
        if run.stop_reason == "interrupted":
            break
    rows = b.write_summary()
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        table = Table(title=f"batch {b.path.name}: {len(rows)} tasks")
        for col in ("task", "state", "best", "speedup vs baseline", "candidates", "tokens", "USD", "GPU-s", "stop"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r["task"], r["state"], r.get("best") or "-", _speed(r.get("speedup")), str(r.get("candidates", "-")),
                          f"{r.get('tokens', 0):,}", f"{r.get('usd', 0.0):.4f}",
                          f"{r.get('gpu_s', 0.0):.2f}" + (" (sim)" if r.get("simulated") else ""),
                          escape(str(r.get("stop") or "-")))
        console.print(table)
        console.print(f"batch folder: {b.path}", highlight=False)
    raise typer.Exit(1 if any(r["state"] == "error" for r in rows) else 0)
