"""``kernelwright best TASK``: export the best known kernel for this GPU (or say there is none)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import BadInput, app, console, err_console, input_errors, load_task, parse_sizes
from .exits import ExitCode, epilog
from .terminal import visible
from .options import OUTPUT, TaskArg, json_flag

RecordJson = json_flag("Print the whole record as JSON.")


def _this_gpu() -> tuple[dict | None, str]:
    """The device info of this machine's GPU (from a GPU worker), or None and why."""
    from sandbox import NoDevice, probe_device

    from .app import device_problem

    try:
        return probe_device(), ""
    except NoDevice as exc:
        return None, device_problem(str(exc))[:200]


@app.command(epilog=epilog(OK="exported", FAILED="no kernel is stored for this GPU and size", BAD_INPUT="bad input"))
@input_errors
def best(task: TaskArg,
         sizes: Annotated[Optional[str], typer.Option(help="The size it was timed at (default: the task's benchmark "
                                                           "size).")] = None,
         gpu: Annotated[Optional[str], typer.Option(help="Export for this GPU model (as stored, e.g. 'NVIDIA H200') "
                                                         "instead of this machine's GPU, any driver or CUDA version.")] = None,
         out: Annotated[Optional[Path], typer.Option(help="Write the kernel to this file instead of stdout.",
                                                     rich_help_panel=OUTPUT)] = None,
         as_json: RecordJson = False):
    """Export the best known kernel for a task on this GPU: source with its launch plan, knobs and flags."""
    from ..claims.best import TamperedRecord

    if out is not None and out.is_dir():
        raise BadInput(f"--out {out}: is a folder; give a file name")
    try:
        _best(task, sizes, gpu, out, as_json)
    except TamperedRecord as exc:
        raise BadInput(str(exc)) from None


def _best(task, sizes, gpu, out, as_json) -> None:
    from sandbox.judging.environment import Environment

    from ..claims.best import BestStore, Envelope

    t = load_task(task)
    at = parse_sizes(sizes, t) or dict(t.spec.sizes.benchmark)
    store = BestStore()
    if gpu:
        record, where = store.for_gpu(t, gpu, at), f"GPU {gpu!r}"
    else:
        info, why = _this_gpu()
        if info is None:
            stored = sorted({r.envelope.gpu for r in store.records(t)})
            hint = f"; stored for: {', '.join(stored)} (use --gpu)" if stored else ""
            err_console.print(f"no GPU found on this machine ({why}){hint}", soft_wrap=True)
            raise typer.Exit(ExitCode.FAILED)
        envelope = Envelope.from_env(Environment.model_validate(info))
        record, where = store.get(t, envelope, at), envelope.describe()
    if record is None:
        others = [r for r in store.records(t, any_version=True)]
        lines = [f"no best-known kernel for {t.name} on {where} at {','.join(f'{k}={v}' for k, v in at.items())}"]
        for r in others[:5]:
            version = "" if r.task_fingerprint == t.fingerprint else " [another version of the task]"
            lines.append(f"  stored: {r.describe()}{version}")
        err_console.print("\n".join(lines), soft_wrap=True)
        raise typer.Exit(ExitCode.FAILED)
    if as_json:
        print(record.model_dump_json(indent=2))
        return
    if out is not None:
        from .files import write_output

        write_output(out, record.kernel, "--out")
        console.print(f"wrote {out}: {record.describe()}", soft_wrap=True)
        return
    err_console.print(f"// {record.describe()}", soft_wrap=True)
    kernel = visible(record.kernel) if sys.stdout.isatty() else record.kernel  # verbatim into a pipe or a file
    print(kernel, end="" if kernel.endswith("\n") else "\n")
