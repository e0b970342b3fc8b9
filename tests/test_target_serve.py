"""The main both tool targets share (``sandbox.worker.ahead.serve``: ``profile_target`` under ncu, ``sanitize_target``
under compute-sanitizer), with a stand-in start and work: a request in one go, a run started ahead that waits for
its request, and the ``wire.TargetRan`` each way of ending writes. The targets' own launches need a GPU
(tests/test_profile_gpu.py, tests/test_sanitize_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from sandbox.wire import SanitizeCases, TargetRan, TargetStart, WaitAhead, WireError, from_json, to_json
from sandbox.worker import ahead
from sandbox.worker.harness import LaunchFailed, Poisoned

pytestmark = pytest.mark.timeout(60)
FAULTS = {"launch": LaunchFailed("too many resources requested for launch"),
          "poison": Poisoned("an illegal memory access was encountered")}


def start(begin: TargetStart, watch):
    with watch("context"):
        return TargetRan("crashed", "no context") if begin.arch == "broken" else "harness"


def work(h, req: SanitizeCases, watch, on_ahead):
    assert h == "harness" and isinstance(req, SanitizeCases)
    if req.cubin in FAULTS:
        raise FAULTS[req.cubin]
    with watch("launches"):
        pass
    return ahead.ran(watch, cases=2 if on_ahead else 1)


def request(fault: str = "") -> SanitizeCases:
    return SanitizeCases(fault, [], 7)


def serve(tmp_path, then, wait: bool = False, arch: str = "sm_90") -> tuple[int, TargetRan]:
    path = tmp_path / ("spare.json" if wait else "request.json")
    path.write_text(to_json(TargetStart(arch, "harness.cubin", str(tmp_path / "status.json")), then))
    code = ahead.serve((["--wait"] if wait else []) + [str(path)], start, work, SanitizeCases)
    return code, from_json((tmp_path / "status.json").read_text(), TargetRan)[0]


def test_a_request_in_one_go_runs_after_its_start_up_and_says_where_its_seconds_went(tmp_path):
    code, status = serve(tmp_path, request())
    assert code == 0 and status.status == "ran" and status.cases == 1
    assert set(status.split_s) == {"context", "launches"}


@pytest.mark.parametrize("fault, arch, said", [("launch", "sm_90", ("launch_error", "too many resources")),
                                              ("poison", "sm_90", ("crashed", "illegal memory access")),
                                              ("", "broken", ("crashed", "no context"))])
def test_a_failed_launch_a_poisoned_context_or_a_broken_start_is_the_requests_status(tmp_path, fault, arch, said):
    code, status = serve(tmp_path, request(fault), arch=arch)
    assert code == 1 and status.status == said[0] and said[1] in status.error


def test_a_request_with_a_field_its_record_does_not_have_is_refused(tmp_path):
    path = tmp_path / "request.json"
    path.write_text(to_json(TargetStart("sm_90", "h", str(tmp_path / "status.json")), request())[:-1] + ', "x": 1}')
    with pytest.raises(WireError, match="has no field x"):
        ahead.serve([str(path)], start, work, SanitizeCases)


def test_a_run_started_ahead_waits_for_its_request_and_runs_it(tmp_path):
    go = tmp_path / "go.json"

    def hand_over():
        time.sleep(0.3)
        (tmp_path / "go.tmp").write_text(to_json(request()))
        os.replace(tmp_path / "go.tmp", go)

    threading.Thread(target=hand_over).start()
    code, status = serve(tmp_path, WaitAhead(str(go), 20, os.getpid()), wait=True)
    assert code == 0 and status.status == "ran" and status.cases == 2
    # its parts are those from the request on; the request came after it was up, so it waited for no start-up
    assert set(status.split_s) == {"start-up still running", "launches"}
    assert status.split_s["start-up still running"] == 0


def test_a_request_written_before_the_run_was_up_says_how_long_it_waited(tmp_path):
    go = tmp_path / "go.json"
    go.write_text(to_json(request()))
    os.utime(go, (time.time() - 2, time.time() - 2))   # handed over 2 s before the run was up
    code, status = serve(tmp_path, WaitAhead(str(go), 20, os.getpid()), wait=True)
    assert code == 0 and status.split_s["start-up still running"] >= 1.9


def test_a_run_started_ahead_that_no_request_reaches_ends_unused(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    code, status = serve(tmp_path, WaitAhead(str(tmp_path / "go.json"), 20, int(gone.stdout)), wait=True)
    assert code == 1 and status == TargetRan("unused")   # its starter is gone
    code, status = serve(tmp_path, WaitAhead(str(tmp_path / "go.json"), 0.1, os.getpid()), wait=True)
    assert code == 1 and status == TargetRan("unused")   # past its wait
