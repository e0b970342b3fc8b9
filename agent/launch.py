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
    if opens_gpu_sandbox(sys.argv[1:]):
        from sandbox.host.prestart import start_workers

        start_workers()
    from .cli import main as cli_main

    cli_main()


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
