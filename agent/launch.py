"""The ``kernelwright`` command's entry point, and ``python -m agent``'s.

A command that will open the GPU sandbox (``optimize`` and ``batch`` on this machine's GPU) has the sandbox's device
workers started before the rest of the program is imported (``sandbox.host.prestart``): their interpreters, imports
and CUDA contexts come up beside the command line's own imports instead of after them. The command line is read
here only as far as deciding that; everything else about it, and every error in it, is the CLI's.
"""

from __future__ import annotations

import sys

COMMANDS = ("optimize", "batch")   # the commands that open a GPU sandbox as their first real work
NOT_HERE = ("--help", "-h", "--resume")   # no sandbox, or one whose kind the CLI reads from elsewhere


def main() -> None:
    interrupts_end_at_the_second()
    try:
        if opens_gpu_sandbox(sys.argv[1:]):
            from sandbox.host.prestart import start_workers

            start_workers()
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:   # before the command line was read, or where no command catches it
        _quit("interrupted")
    except SystemExit as exc:
        if exc.code == 130:
            _leave_interrupted()
        raise


def _leave_interrupted() -> None:
    """An interrupted command has kept what it keeps; it ends now, after the exit handlers (where a second Ctrl-C
    still ends it), without the interpreter's shutdown, which may wait on a thread (a model request in flight)
    while no Python handler answers Ctrl-C any more, so that one would kill it by the signal."""
    import atexit
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    atexit._run_exitfuncs()
    os._exit(130)


def interrupts_end_at_the_second() -> None:
    """The first Ctrl-C is a KeyboardInterrupt: a run stops, keeps its trace and says how to resume it. A second
    one, while that winds down (or Python shuts down), ends the process at once with exit code 130, not by the
    signal. Where SIGINT is ignored (a background job) or handled by someone else, nothing changes."""
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    seen = []

    def on_interrupt(signum, frame):
        if seen:
            _quit("interrupted again: exiting now", at_once=True)
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)


def _quit(message: str, at_once: bool = False) -> None:
    import os

    try:
        sys.stdout.flush()
        sys.stderr.write(f"\n{message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if at_once:
        os._exit(130)
    _leave_interrupted()


def opens_gpu_sandbox(args: list[str]) -> bool:
    """Whether these arguments run a command that opens this machine's GPU sandbox (``--sandbox`` auto or gpu, by
    the flag or else by the ``--config`` file; no ``[cluster]``, and none of the run options that name one: the flags
    are those of ``agent.run_options``). Anything unclear is a no: the workers are then started as usual, when the
    sandbox opens."""
    from .run_options import BY_NAME, given, on_a_cluster

    if not args or args[0] not in COMMANDS:
        return False
    if any(a in NOT_HERE for a in args) or on_a_cluster(args):
        return False
    config = given(args, BY_NAME["config"])
    data = {}
    if config is not None:
        import tomllib

        try:
            with open(config, "rb") as f:
                data = tomllib.load(f)
        except (OSError, ValueError):
            return False
        if "cluster" in data:
            return False
    kind = given(args, BY_NAME["sandbox"]) or data.get("sandbox", "auto")
    return kind in ("auto", "gpu")
