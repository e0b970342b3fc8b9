"""The exit codes of every ``kernelwright`` command, defined once. ``epilog`` writes the codes a command uses,
with what each means for it, into the end of its ``--help``."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1          # the command ran and the answer is no: a candidate not ok, a run that ended on a failure...
    BAD_INPUT = 2       # a malformed task, candidate, config or option: one error line names it
    NO_DEVICE = 3       # the command needs a CUDA device and none answered
    INTERRUPTED = 130   # Ctrl-C; the run is kept and resumes with --resume


def epilog(**meanings: str) -> str:
    """``epilog(OK="...", FAILED="...")`` -> the "Exit codes" paragraph of a command's --help."""
    rows = [f"{ExitCode[name].value} {text}" for name, text in meanings.items()]
    return "Exit codes: " + "; ".join(rows) + "."
