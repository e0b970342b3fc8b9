"""What every command of the ``kernelwright`` command line shares: the Typer app, the consoles, the exit
codes, and the turning of bad input into one clear error line and exit code 2."""

from __future__ import annotations

import errno
import functools
from typing import Annotated

import typer
from rich.text import Text

from .exits import ExitCode
from .terminal import SafeConsole, visible

class App(typer.Typer):
    """Every command of this app is a ``helptext.Command``: placeholders that say what to type, help printed as
    written, the environment variables after the exit codes."""

    def command(self, *args, **kwargs):
        from .helptext import Command

        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)


def _group():
    from .helptext import Group

    return Group


app = App(cls=_group(), no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
          help="Make CUDA kernels faster and prove it.",
          epilog="Exit codes: 0 ok; 1 the answer is no (a candidate not ok, a run that ended on a failure); 2 bad input "
                 "(one error line names it); 3 no usable CUDA device; 130 interrupted. Each command's --help says what "
                 "each means for it and which environment variables it reads.")
# Markup is off: compiler logs, model text, paths and options are full of brackets (smem[tid], ".[cuda13]") and
# print as they are. Styles come from rich.text.Text or a print's style=, never from text. Control characters in
# data (an escape sequence in a model's note) are shown, not obeyed (terminal.SafeConsole).
console = SafeConsole(markup=False, highlight=False)
err_console = SafeConsole(stderr=True, markup=False, highlight=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain strings and (text, style) pairs: data is never read as markup, nor its control characters
    obeyed."""
    return Text.assemble(*(visible(p) if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts))


def error_line(message: str) -> None:
    """One error line on stderr, the message verbatim (any URL's credentials redacted)."""
    from ..redact import redact_urls_in

    err_console.print(styled(("error:", "bold red"), " ", redact_urls_in(message)), soft_wrap=True)


NO_DRIVER = "no NVIDIA driver found: compile, check-task and --sandbox fake work here"


def driver_present() -> bool:
    """Whether this machine has an NVIDIA driver (its user-space library loads). Without one, CUDA's own error
    (cudaErrorInsufficientDriver) names the wrong cause: nothing is too old, nothing is there."""
    import ctypes
    import sys

    try:
        ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return False
    return True


def device_problem(error: str) -> str:
    """One line on why no CUDA device answered: ``NO_DRIVER`` where the machine has no driver, else the error's
    first line."""
    return NO_DRIVER if not driver_present() else (error.strip().splitlines() or ["no CUDA device answered"])[0]


def load_task(ref: str):
    """The task ``ref`` names; a bare suite name that a folder here also bears is pointed out on stderr."""
    from sandbox.tasks.task import load_task as load, shadowed

    task = load(ref)
    local = shadowed(ref)
    if local is not None:
        err_console.print(f"note: {ref!r} is the suite task; the folder ./{local} here is not used (write ./{local} "
                          f"for it)", soft_wrap=True)
    return task


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kernelwright")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(asked: bool) -> None:
    if asked:
        console.print(f"kernelwright {version()}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def _options(show_version: Annotated[bool, typer.Option("--version", help="Print kernelwright's version and exit.",
                                                        callback=_print_version, is_eager=True)] = False) -> None:
    """Make CUDA kernels faster and prove it."""
    console.stderr = False  # until a command's --json says otherwise (options.json_flag)


def input_errors(fn):
    """Turn malformed tasks, candidates and configs into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from pydantic import ValidationError

        from sandbox.candidates.candidate import CandidateError
        from sandbox.tasks.expr import ExprError
        from sandbox.candidates.plan import PlanError
        from sandbox.tasks.task import TaskError

        from ..config import ConfigError
        from ..trace.lock import RunBusy
        from ..trace.reader import TraceError

        try:
            return fn(*args, **kwargs)
        except (TaskError, CandidateError, PlanError, ExprError, ValidationError, ConfigError, TraceError, RunBusy,
                BadInput) as exc:
            error_line(str(exc))
            raise typer.Exit(ExitCode.BAD_INPUT) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            error_line(f"{exc.filename or 'a file'}: {exc.strerror}: what was written before is kept; free space, "
                       "then run the command again (a run or a batch goes on with --resume)")
            raise typer.Exit(ExitCode.BAD_INPUT) from None

    return wrapper


def interruptible(fn):
    """Ctrl-C before a command has anything to keep: one line saying so, and exit code 130 (a command that keeps
    a run catches it earlier and says how to resume)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            err_console.print("interrupted before anything was written: nothing to resume", soft_wrap=True)
            raise typer.Exit(ExitCode.INTERRUPTED) from None

    return wrapper


class BadInput(ValueError):
    """A command-line value that does not make sense (the message says which and why)."""


def parse_sizes(text: str | None, task=None) -> dict[str, int] | None:
    """``"rows=4096,cols=1000"`` -> {"rows": 4096, "cols": 1000}, checked against ``task`` like its own sizes
    (exactly its symbols, within int64, its constraints met, no empty array) when it is given."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise BadInput(f"--sizes: expected name=integer pairs separated by commas, got {part!r}")
        out[name.strip()] = int(value)
    if task is not None:
        task.check_sizes(out, "--sizes")
    return out
