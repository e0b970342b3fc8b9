"""Host folders never leave a worker's text: neutral names stand in their place."""

import os
import tempfile
from pathlib import Path

from sandbox.candidates.compiler import include_dirs
from sandbox.plumbing.hostpaths import redact

ROOT = Path(__file__).resolve().parent.parent


def test_compile_log_paths_become_neutral_names():
    inc = include_dirs()[0]
    log = (f"{inc}/cooperative_groups/details/info.h(167): catastrophic error: cannot open source file\n"
           f"candidate.cu(3): error: identifier is undefined\n  -I{inc}")
    out = redact(log)
    assert inc not in out
    assert out.startswith("<cuda-include>/cooperative_groups/details/info.h(167)")
    assert out.endswith("-I<cuda-include>")
    assert "candidate.cu(3)" in out


def test_checkout_temp_and_home_folders_are_named_not_shown():
    home = os.path.expanduser("~")
    text = (f'File "{ROOT}/sandbox/candidates/compiler.py", line 3\n{tempfile.gettempdir()}/kw-compile-x1/tmp/a.cu\n'
            f"{home}/secret-project/notes.txt")
    out = redact(text)
    assert str(ROOT) not in out and "<kernelwright>/sandbox/candidates/compiler.py" in out
    assert "<tmp>/kw-compile-x1/tmp/a.cu" in out
    assert "~/secret-project/notes.txt" in out


def test_extra_folders_are_replaced_first_and_only_whole_components():
    tmp = tempfile.gettempdir()
    worker = f"{tmp}/kw-gpu-abc"
    text = f"{worker}/stderr.log and {tmp}foo/bar and /var{tmp}/x"
    out = redact(text, {worker: "<worker>"})
    assert out == f"<worker>/stderr.log and {tmp}foo/bar and /var{tmp}/x"


def test_empty_text_stays_empty():
    assert redact("") == ""


def test_a_workers_error_text_and_traceback_name_no_host_folder():
    from sandbox.host.pool import WorkerProcess
    from sandbox.wire import MeasureCeilings, WorkerError

    worker = WorkerProcess("reference")
    try:
        reply = worker.call(MeasureCeilings(), timeout=60)
    finally:
        worker.close()
    assert isinstance(reply, WorkerError) and "the reference worker does not handle MeasureCeilings" in reply.error
    assert "<kernelwright>/sandbox/worker/main.py" in reply.traceback
    assert str(ROOT) not in reply.traceback and tempfile.gettempdir() + "/" not in reply.traceback


def test_profile_outcomes_name_no_host_folder():
    from sandbox.host.profiler import unavailable

    out = unavailable(f"ncu at {ROOT}/tools/ncu is not an executable file")
    assert out["reason"] == out["notice"] == "ncu at <kernelwright>/tools/ncu is not an executable file"
