"""The GPU sandbox's workers started at the start of a command that will open one (``agent.launch``,
``sandbox.host.prestart``): which command lines start them, the sandbox that takes them over, and those that no
sandbox takes closed at the exit with their folder. CPU: the GPU worker's DescribeDevice fails here (no device) or, on a GPU
machine, answers; either way nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.launch import opens_gpu_sandbox
from conftest import ROOT, gpu_available
from sandbox.host import prestart
from sandbox.plumbing import tempdirs

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("args, opens", [
    (["optimize", "softmax"], True),
    (["optimize", "softmax", "--sandbox", "gpu"], True),
    (["batch", "softmax", "row_sum", "--sandbox=auto"], True),
    (["optimize", "softmax", "--sandbox", "fake"], False),
    (["optimize", "softmax", "--sandbox=compile-only"], False),
    (["optimize", "softmax", "--help"], False),
    (["optimize", "--resume", "some-run"], False),        # the recorded run says which sandbox
    (["optimize", "softmax", "--ray"], False),
    (["optimize", "softmax", "--ray-address=auto"], False),
    (["eval", "softmax", "k.cu"], False),
    (["report", "run"], False),
    ([], False),
])
def test_the_commands_that_open_a_gpu_sandbox_start_its_workers(args, opens):
    assert opens_gpu_sandbox(args) is opens


@pytest.mark.parametrize("text, flag, opens", [
    ('sandbox = "fake"\n', None, False),
    ('sandbox = "fake"\n', "gpu", True),        # the flag wins over the file, as in the CLI
    ('sandbox = "gpu"\n', None, True),
    ('[cluster]\ngpus = 2\n', None, False),
    ('this is not toml', None, False),          # the CLI names the error; nothing is started for it
])
def test_a_config_file_is_read_for_the_sandbox_kind(tmp_path, text, flag, opens):
    config = tmp_path / "run.toml"
    config.write_text(text)
    args = ["optimize", "softmax", "--config", str(config)] + (["--sandbox", flag] if flag else [])
    assert opens_gpu_sandbox(args) is opens
    assert opens_gpu_sandbox(["optimize", "softmax", "--config", str(tmp_path / "missing.toml")]) is False


def _kw_folders(pid: int) -> list[Path]:
    roots = [Path(os.environ.get("TMPDIR", "/tmp"))] + [r for r in (tempdirs.shm_root(),) if r is not None]
    return [p for root in roots for p in root.glob(f"kw-*-{pid}-*")]


@pytest.mark.skipif(gpu_available(), reason="the GPU sandbox opens here; this is its opening without a device")
def test_a_sandbox_that_cannot_open_closes_the_workers_it_took_over():
    from sandbox import GPUSandbox

    prestart.start_workers()
    started = prestart._held
    assert started is not None and started.data_dir.is_dir()
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        GPUSandbox()
    assert prestart.take() is None                       # taken once
    assert not started.gpu.alive and not started.ref.alive and not started.compiles.alive
    assert not started.data_dir.exists()


def test_workers_no_sandbox_takes_are_closed_with_their_folder():
    prestart.start_workers()
    started = prestart._held
    prestart.start_workers()                             # nothing while those started wait to be taken
    assert prestart._held is started
    prestart._release()
    assert prestart.take() is None
    assert not started.gpu.alive and not started.ref.alive and not started.compiles.alive
    assert not started.data_dir.exists()


SPY = """
import atexit, sys
from sandbox.host import prestart
started = []
start = prestart.start_workers
prestart.start_workers = lambda: (start(), started.append(str(prestart._held.data_dir)))
atexit.register(lambda: print("started:", *started, file=sys.stderr))   # runs after prestart's own exit handler
sys.argv = ["kernelwright", *sys.argv[1:]]
from agent.launch import main
main()
"""


def test_a_command_that_stops_on_bad_input_leaves_no_worker_folder_behind(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SPY, "optimize", "no-such-task", "--traces", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 2 and "no-such-task" in err
    data_dir = err.split("started:", 1)[1].split()[0]    # the workers were started before the error
    assert not Path(data_dir).exists() and _kw_folders(proc.pid) == []


def test_the_host_writes_the_bytecode_that_workers_may_not(tmp_path, monkeypatch):
    from sandbox.plumbing import tools

    (tmp_path / "sandbox" / "worker").mkdir(parents=True)
    (tmp_path / "sandbox" / "worker" / "stage.py").write_text("X = 1\n")
    monkeypatch.setattr(tools, "PACKAGE_ROOT", tmp_path)
    monkeypatch.setattr(tools, "_bytecode_started", False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    thread = tools.compile_bytecode_ahead()
    thread.join(30)
    assert list((tmp_path / "sandbox" / "worker" / "__pycache__").glob("stage.*.pyc"))
    assert tools.compile_bytecode_ahead() is None        # once per process
    monkeypatch.setattr(tools, "_bytecode_started", False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert tools.compile_bytecode_ahead() is None        # a host that writes no bytecode writes none for them


def test_a_worker_closed_for_good_while_it_starts_ends_there(tmp_path):
    from sandbox.host.pool import WorkerDied, WorkerProcess
    from sandbox.wire import DescribeDevice

    worker = WorkerProcess("reference", root=tmp_path)
    worker.close(retire=True)                            # before its first request started it
    with pytest.raises(WorkerDied, match="closed for good"):
        worker._start()                                  # what a request on another thread does next
    assert not worker.alive and list(tmp_path.iterdir()) == []
    with pytest.raises(WorkerDied, match="closed for good"):
        worker.call(DescribeDevice(), timeout=30)
