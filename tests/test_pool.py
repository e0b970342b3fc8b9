"""Worker processes: replies over private pipes, a killed process group on timeout, replacement after death."""

import os
import signal

import pytest

from sandbox.host.pool import WorkerDied, WorkerProcess, WorkerTimeout
from sandbox.wire import Compare, CompareTask, CompareTrial, Confinement, MeasureCeilings, WorkerError

# A request no role but the GPU one handles: the reference and compile workers answer it with a WorkerError.
UNHANDLED = MeasureCeilings()


def _compare(folder) -> Compare:
    """A comparison whose reference (``folder``/reference.py) is all the test needs to run."""
    return Compare(CompareTask(task_folder=str(folder), scalars={}, tolerance={}, backend="numpy"),
                   CompareTrial(label="t", sizes={}, inputs=[], outputs=[], seed=0, runs=[]))


@pytest.mark.timeout(60)
def test_a_healthy_worker_is_reused_across_requests():
    w = WorkerProcess("reference")
    try:
        pid = None
        for _ in range(3):
            reply = w.call(UNHANDLED, timeout=30)
            assert isinstance(reply, WorkerError) and "the reference worker does not handle MeasureCeilings" in reply.error
            pid = pid or w.proc.pid
            assert w.proc.pid == pid
        assert w.started == 1 and w.requests == 3
    finally:
        w.close()


@pytest.mark.timeout(60)
def test_timeout_kills_the_whole_process_group_and_the_next_request_gets_a_fresh_worker(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    (tmp_path / "reference.py").write_text(
        "import subprocess, time\n"
        "def reference(xp, **kw):\n"
        f"    p = subprocess.Popen(['sleep', '600'])\n"
        f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(600)\n")
    request = _compare(tmp_path)
    w = WorkerProcess("reference")
    try:
        with pytest.raises(WorkerTimeout):
            w.call(request, timeout=3.0)
        assert w.proc is None
        grandchild = int(pidfile.read_text())
        assert not _alive(grandchild), "the worker's own children die with its process group"
        assert w.call(UNHANDLED, timeout=30).ok is False
        assert w.started == 2
    finally:
        w.close()


@pytest.mark.timeout(60)
def test_a_busy_worker_and_its_children_die_with_a_killed_host(tmp_path):
    """A host killed mid-request (kill -9, a lost node, a test runner's time limit) leaves no worker behind to
    hold the GPU: the worker, busy in its request, notices and kills its process group."""
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "grandchild.pid"
    (tmp_path / "reference.py").write_text(
        "import subprocess, time\n"
        "def reference(xp, **kw):\n"
        "    p = subprocess.Popen(['sleep', '600'])\n"
        f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(600)\n")
    host = subprocess.Popen([sys.executable, "-c", (
        "import pathlib, threading, time\n"
        "from sandbox.host.pool import WorkerProcess\n"
        "from sandbox.wire import Compare, CompareTask, CompareTrial\n"
        f"req = Compare(CompareTask(task_folder={str(tmp_path)!r}, scalars={{}}, tolerance={{}}, backend='numpy'),\n"
        "              CompareTrial(label='t', sizes={}, inputs=[], outputs=[], seed=0, runs=[]))\n"
        "w = WorkerProcess('reference')\n"
        "threading.Thread(target=w.call, args=(req, 600), daemon=True).start()\n"
        f"while not pathlib.Path({str(pidfile)!r}).exists(): time.sleep(0.05)\n"
        "print(w.proc.pid, flush=True)\n"
        "time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(host.stdout.readline())
        grandchild = int(pidfile.read_text())
        assert _alive(worker) and _alive(grandchild)
        host.kill()
        host.wait()
        deadline = time.monotonic() + 10
        while (_alive(worker) or _alive(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the busy worker outlived its host"
        assert not _alive(grandchild), "the worker's children outlived its host"
    finally:
        host.kill()
        for pid in [worker, *([int(pidfile.read_text())] if pidfile.exists() else [])]:
            if pid is not None:
                _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.timeout(60)
def test_a_worker_that_dies_during_a_request_is_reported_and_replaced(tmp_path):
    (tmp_path / "reference.py").write_text(
        "import os, signal\n"
        "def reference(xp, **kw):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    request = _compare(tmp_path)
    w = WorkerProcess("reference")
    try:
        with pytest.raises(WorkerDied, match="reference worker died"):
            w.call(request, timeout=30)
        assert w.proc is None
        assert w.call(UNHANDLED, timeout=30).ok is False
        assert w.started == 2
    finally:
        w.close()


@pytest.mark.timeout(60)
def test_a_worker_that_died_between_requests_is_replaced_before_the_next_one():
    w = WorkerProcess("reference")
    try:
        w.call(UNHANDLED, timeout=30)
        os.killpg(w.proc.pid, signal.SIGKILL)
        w.proc.wait(timeout=30)
        assert w.call(UNHANDLED, timeout=30).ok is False
        assert w.started == 2
    finally:
        w.close()


@pytest.mark.timeout(60)
def test_secrets_in_the_environment_do_not_reach_workers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("KERNELWRIGHT_SEED", "12345")
    w = WorkerProcess("reference")
    try:
        w.call(UNHANDLED, timeout=30)
        environ = open(f"/proc/{w.proc.pid}/environ", "rb").read().decode(errors="replace")
        assert "sk-secret-value" not in environ and "KERNELWRIGHT_SEED" not in environ
        assert f"HOME={w.home}" in environ.split("\0")
    finally:
        w.close()


@pytest.mark.timeout(120)
def test_closing_from_several_threads_at_once_frees_each_pipe_once():
    # a pool's close and a compile thread ending its own call used to close one descriptor twice (EBADF, or worse:
    # a number the process had handed out again)
    import threading

    errors = []
    for _ in range(20):
        w = WorkerProcess("compile")
        assert w.call(UNHANDLED, timeout=30).ok is False
        barrier = threading.Barrier(6)

        def close():
            barrier.wait()
            try:
                w.close()
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(exc))

        threads = [threading.Thread(target=close) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert w.proc is None
    assert not errors, errors[:3]


@pytest.mark.timeout(60)
def test_a_retired_worker_is_not_started_again():
    w = WorkerProcess("compile")
    w.call(UNHANDLED, timeout=30)
    w.close(retire=True)
    with pytest.raises(WorkerDied, match="closed for good"):
        w.call(UNHANDLED, timeout=30)
    assert w.proc is None


@pytest.mark.timeout(120)
def test_a_worker_warmed_up_on_a_thread_answers_the_next_call_in_the_same_process():
    w = WorkerProcess("compile")
    try:
        w.warm_up(Confinement(), timeout=60)      # returns at once; the process starts meanwhile
        reply = w.call(Confinement(), timeout=60)  # waits for the warm-up's reply first
        assert reply.confined in (True, False) and w.started == 1 and w.requests == 2
        w.warm_up(UNHANDLED, timeout=60)          # a warm-up that fails leaves the worker usable
        assert w.call(Confinement(), timeout=60).confined == reply.confined and w.started == 1
    finally:
        w.close()
