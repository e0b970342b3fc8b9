"""Arguments and options that several commands share, declared once as ``Annotated`` aliases; the run options of
``optimize`` and ``batch`` come from their table, ``agent.run_options``. Each option sits in one of the --help panels:
model, budget, sandbox, output (the rest stay under "Options")."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable, Optional

import typer

from ..run_options import BUDGET, BY_NAME, MODEL, OPTIONS, OUTPUT, SANDBOX, RunOptions

__all__ = ["BUDGET", "MODEL", "OUTPUT", "SANDBOX", "RunArg", "TaskArg", "Sizes", "TimingBudget", "Traces", "json_flag",
           "run_option", "with_run_options"]


def _option(name: str, help: str, panel: str | None = None, kind=Optional[str]):
    return Annotated[kind, typer.Option(name, help=help, rich_help_panel=panel)]


def _json_mode(ctx: typer.Context, value: bool) -> bool:
    """With --json, stdout carries the JSON alone (or nothing, where the command stops before it has any): what a
    command prints for people goes to stderr, until the command ends."""
    from .app import console

    if value:
        console.stderr = True
        ctx.call_on_close(lambda: setattr(console, "stderr", False))
    return value


def json_flag(help: str):
    """``--json`` with what it prints (each command prints its own record)."""
    return Annotated[bool, typer.Option("--json", help=help, rich_help_panel=OUTPUT, callback=_json_mode)]


TaskArg = Annotated[str, typer.Argument(help="Suite task name or path to a task folder.")]
RunArg = Annotated[str, typer.Argument(help="Run id under --traces, or the path to a run folder.")]

TimingBudget = _option("--budget", "Seconds of candidate GPU time after which timing may stop.", SANDBOX, float)
Sizes = _option("--sizes", "Time at these sizes instead of the benchmark size, e.g. n=1000000.", SANDBOX)


def run_option(name: str):
    """The ``Annotated`` alias of one run option of ``agent.run_options``."""
    o = BY_NAME[name]
    kind = o.kind if o.kind is bool else Optional[o.kind]
    if o.flag == "--json":
        return json_flag(o.help)
    return Annotated[kind, typer.Option(o.flag, help=o.help, rich_help_panel=o.panel)]


def with_run_options(command: Callable) -> Callable:
    """``command`` with every run option of ``agent.run_options`` after its own parameters; it receives them as one
    ``opts: RunOptions`` (its last parameter)."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "opts"]
    added = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default, annotation=run_option(o.name))
             for o in OPTIONS]

    @functools.wraps(command)
    def wrapper(**values: Any):
        opts = RunOptions(**{o.name: values.pop(o.name) for o in OPTIONS})
        return command(**values, opts=opts)

    wrapper.__signature__ = inspect.Signature(own + added)
    wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
    return wrapper


Traces = run_option("traces")
