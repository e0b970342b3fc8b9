"""The main both tool targets share (``sandbox.worker.ahead.serve``: ``profile_target`` under ncu, ``sanitize_target``
under compute-sanitizer), with a stand-in start and work: a request in one go, a run started ahead that waits for
its request, and the status each way of ending writes. The targets' own launches need a GPU
(tests/test_profile_gpu.py, tests/test_sanitize_gpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from sandbox.worker import ahead
from sandbox.worker.harness import LaunchFailed, Poisoned

pytestmark = pytest.mark.timeout(60)


def start(req, watch):
    with watch("context"):
        return {"status": "crashed", "error": "no context"} if req.get("broken") else "harness"


def work(h, req, watch, on_ahead):
    assert h == "harness"
    if req.get("raise") == "launch":
        raise LaunchFailed("too many resources requested for launch")
    if req.get("raise") == "poison":
        raise Poisoned("an illegal memory access was encountered")
    with watch("launches"):
        pass
    return ahead.ran(watch, ahead=on_ahead)


def serve(tmp_path, req: dict, wait: bool = False) -> tuple[int, dict]:
    path = tmp_path / ("spare.json" if wait else "request.json")
    path.write_text(json.dumps(dict(req, status_file=str(tmp_path / "status.json"))))
    code = ahead.serve((["--wait"] if wait else []) + [str(path)], start, work)
    return code, json.loads((tmp_path / "status.json").read_text())


def test_a_request_in_one_go_runs_after_its_start_up_and_says_where_its_seconds_went(tmp_path):
    code, status = serve(tmp_path, {})
    assert code == 0 and status["status"] == "ran" and status["ahead"] is False
    assert set(status["split_s"]) == {"context", "launches"}


@pytest.mark.parametrize("req, said", [({"raise": "launch"}, ("launch_error", "too many resources")),
                                       ({"raise": "poison"}, ("crashed", "illegal memory access")),
                                       ({"broken": True}, ("crashed", "no context"))])
def test_a_failed_launch_a_poisoned_context_or_a_broken_start_is_the_requests_status(tmp_path, req, said):
    code, status = serve(tmp_path, req)
    assert code == 1 and status["status"] == said[0] and said[1] in status["error"]


def test_a_run_started_ahead_waits_for_its_request_and_runs_it(tmp_path):
    go = tmp_path / "go.json"

    def hand_over():
        time.sleep(0.3)
        (tmp_path / "go.tmp").write_text(json.dumps({"raise": None}))
        os.replace(tmp_path / "go.tmp", go)

    threading.Thread(target=hand_over).start()
    code, status = serve(tmp_path, {"go": str(go), "wait_s": 20, "owner": os.getpid()}, wait=True)
    assert code == 0 and status["status"] == "ran" and status["ahead"] is True
    # its parts are those from the request on; the request came after it was up, so it waited for no start-up
    assert set(status["split_s"]) == {"start-up still running", "launches"}
    assert status["split_s"]["start-up still running"] == 0


def test_a_request_written_before_the_run_was_up_says_how_long_it_waited(tmp_path):
    go = tmp_path / "go.json"
    go.write_text(json.dumps({}))
    os.utime(go, (time.time() - 2, time.time() - 2))   # handed over 2 s before the run was up
    code, status = serve(tmp_path, {"go": str(go), "wait_s": 20, "owner": os.getpid()}, wait=True)
    assert code == 0 and status["split_s"]["start-up still running"] >= 1.9


def test_a_run_started_ahead_that_no_request_reaches_ends_unused(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    code, status = serve(tmp_path, {"go": str(tmp_path / "go.json"), "wait_s": 20, "owner": int(gone.stdout)},
                         wait=True)
    assert code == 1 and status == {"status": "unused"}   # its starter is gone
    code, status = serve(tmp_path, {"go": str(tmp_path / "go.json"), "wait_s": 0.1, "owner": os.getpid()}, wait=True)
    assert code == 1 and status == {"status": "unused"}   # past its wait
