"""The sanitizer run around compute-sanitizer, with a stand-in ``compute-sanitizer`` program: it follows the
tool's command-line contract, records how it was called, writes the target's status file as the target would
and prints the tool's documented output. The compile step and the plan resolution are real."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from sandbox import CompileOnlySandbox, load_task, parse_candidate
from sandbox.host.sanitizer import ERROR_EXIT, Sanitizer, sanitize_sizes
from stand_in import install

pytestmark = pytest.mark.timeout(120)
FIXTURES = Path(__file__).parent / "fixtures" / "sanitizer"

FAKE = """if args == ["--version"]:
    print("NVIDIA (R) Compute Sanitizer\\nCopyright (c) 2020-2025 NVIDIA Corporation\\nVersion 2025.3.0 (stand-in)")
    sys.exit(0)
tool = args[args.index("--tool") + 1]
request = json.loads(pathlib.Path(args[-1]).read_text())
if args[-2] == "--wait":   # a run started ahead: its program waits for the request, then runs it
    request = dict(request, **wait_for_go(request), started_ahead=True)
(here / ("request-" + tool + ".json")).write_text(json.dumps(request))
(here / ("started-" + tool)).write_text(repr(time.time()))
if mode == "slow":   # long enough that two runs one after the other could not overlap
    time.sleep(1.0)
if mode == "hang":
    (here / "pid").write_text(str(os.getpid()))
    time.sleep(600)
status = {"status": "crashed", "error": "CUDA_ERROR_ILLEGAL_ADDRESS"} if mode == "crashed" else {"status": "ran"}
pathlib.Path(request["status_file"]).write_text(json.dumps(status))
fixture = {("race", "racecheck"): "racecheck_race.txt", ("oob", "memcheck"): "memcheck_oob.txt"}.get(
    (mode, tool), tool + "_clean.txt")
sys.stdout.write((here / fixture).read_text())
(here / ("ended-" + tool)).write_text(repr(time.time()))
sys.exit(%d if fixture in ("racecheck_race.txt", "memcheck_oob.txt") else 0)
""" % ERROR_EXIT


@pytest.fixture
def tool(tmp_path):
    folder = tmp_path / "tool"
    exe = install(folder, "compute-sanitizer", FAKE, mode="clean")
    for name in ("memcheck_clean.txt", "racecheck_clean.txt", "racecheck_race.txt", "memcheck_oob.txt"):
        (folder / name).write_text((FIXTURES / name).read_text())

    def set_mode(mode: str) -> Path:
        (folder / "mode").write_text(mode)
        return folder

    return exe, set_mode


@pytest.fixture(scope="module")
def sandbox():
    sb = CompileOnlySandbox()
    yield sb
    sb.close()


def baseline(task):
    return parse_candidate(task.baseline_path.read_text(), label="baseline")


def test_each_tool_runs_the_target_at_the_smallest_odd_check_sizes(tool, sandbox):
    exe, set_mode = tool
    folder = set_mode("clean")
    task = load_task("vector_add")
    san = Sanitizer(sandbox.builder.build, "sm_90", b"harness bytes", executable=str(exe))
    report = san.sanitize(task, baseline(task))
    assert report.status == "clean", report
    assert report.sizes == [{"n": 7}, {"n": 1000}]
    assert [t.tool for t in report.tools] == ["memcheck", "racecheck"]
    assert report.tool_version == "Version 2025.3.0 (stand-in)"
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    memcheck = next(c for c in calls if c[:2] == ["--tool", "memcheck"])   # the tools run side by side
    assert memcheck[:10] == ["--tool", "memcheck", "--print-limit", "20", "--show-backtrace", "no",
                             "--report-api-errors", "no", "--error-exitcode", str(ERROR_EXIT)]
    assert memcheck[10:13] == [sys.executable, "-m", "sandbox.worker.sanitize_target"]
    request = json.loads((folder / "request-memcheck.json").read_text())
    assert [c["plan"]["launches"][0]["grid"] for c in request["cases"]] == [[1, 1, 1], [4, 1, 1]]
    assert [c["inputs"][0]["shape"] for c in request["cases"]] == [[7], [1000]]
    assert not Path(request["cubin"]).exists()  # the run's folder is gone


def test_the_tools_run_side_by_side_and_the_gpu_is_charged_their_wall(tool, sandbox):
    exe, set_mode = tool
    folder = set_mode("slow")
    task = load_task("vector_add")
    report = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe)).sanitize(task, baseline(task))
    assert report.status == "clean", report
    at = {f"{edge}-{t}": float((folder / f"{edge}-{t}").read_text()) for edge in ("started", "ended")
          for t in ("memcheck", "racecheck")}
    # each run started before the other ended: they overlapped
    assert at["started-memcheck"] < at["ended-racecheck"] and at["started-racecheck"] < at["ended-memcheck"]
    assert all(t.seconds >= 1.0 for t in report.tools)
    assert report.seconds >= 2.0 and 1.0 <= report.wall_s < report.seconds
    from sandbox.judging.result import Result
    result = Result(status="ok", task="vector_add", task_fingerprint="f", candidate="c", candidate_key="k")
    result.record_sanitize(report)
    assert result.cost.sanitize_gpu_s == report.wall_s


def test_runs_started_ahead_take_the_next_request_and_give_the_same_verdicts(tool, sandbox):
    exe, set_mode = tool
    folder = set_mode("race")
    task = load_task("vector_add")
    san = Sanitizer(sandbox.builder.build, "sm_90", b"harness bytes", executable=str(exe))
    san.start_ahead()
    san.start_ahead()   # one per tool: a second call finds them started
    report = san.sanitize(task, baseline(task))
    runs = [c for c in (json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines())
            if "--tool" in c]
    assert sorted(c[1] for c in runs) == ["memcheck", "racecheck"] and all(c[-2] == "--wait" for c in runs)
    assert report.status == "errors" and report.tools[1].kernel == "k"   # the same verdicts as the usual way
    for t in ("memcheck", "racecheck"):
        request = json.loads((folder / f"request-{t}.json").read_text())
        assert request["started_ahead"] and [c["inputs"][0]["shape"] for c in request["cases"]] == [[7], [1000]]
        assert not Path(request["cubin"]).exists()   # the run's folder is gone
    assert san._spares == {}
    again = san.sanitize(task, baseline(task))   # none started ahead: the usual way
    assert again.status == "errors"
    assert [c[-2] for c in (json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines())
            if "--tool" in c].count("--wait") == 2


def test_a_run_started_ahead_that_ended_is_set_aside_and_the_tool_runs_the_usual_way(tool, sandbox):
    exe, set_mode = tool
    folder = set_mode("spare-dies")
    task = load_task("vector_add")
    san = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe))
    san.start_ahead(("memcheck",))
    san._spares["memcheck"].proc.wait(timeout=20)
    set_mode("clean")
    report = san.sanitize(task, baseline(task), tools=("memcheck",))
    assert report.status == "clean", report
    assert "started_ahead" not in json.loads((folder / "request-memcheck.json").read_text())


def test_runs_started_ahead_end_with_their_sanitizer_and_none_start_without_the_tool(tool, sandbox, monkeypatch):
    exe, _ = tool
    san = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe))
    san.start_ahead()
    spares = list(san._spares.values())
    assert len(spares) == 2 and all(s.waiting for s in spares)
    san.close()
    assert all(s.proc.poll() is not None and not s.work.exists() for s in spares)
    monkeypatch.setenv("KERNELWRIGHT_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    monkeypatch.setenv("PATH", "/nonexistent")
    none = Sanitizer(sandbox.builder.build, "sm_90", b"h")
    none.start_ahead()
    assert none._spares == {}


def test_a_race_makes_the_report_errors_with_the_first_hazard(tool, sandbox):
    exe, set_mode = tool
    set_mode("race")
    task = load_task("vector_add")
    report = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe)).sanitize(task, baseline(task))
    assert report.status == "errors"
    memcheck, racecheck = report.tools
    assert memcheck.status == "clean" and racecheck.status == "errors" and racecheck.kernel == "k"
    assert "racecheck: 1 error in k at candidate.cu:12" in report.text()


def test_a_target_that_crashed_under_a_clean_summary_gives_no_verdict(tool, sandbox):
    exe, set_mode = tool
    set_mode("crashed")
    task = load_task("vector_add")
    report = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe)).sanitize(task, baseline(task),
                                                                                            tools=("racecheck",))
    assert report.status == "failed"
    assert "crashed: CUDA_ERROR_ILLEGAL_ADDRESS" in report.tools[0].reason


def test_a_hanging_tool_is_killed_at_its_limit(tool, sandbox):
    exe, set_mode = tool
    folder = set_mode("hang")
    task = load_task("vector_add")
    report = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe)).sanitize(
        task, baseline(task), tools=("memcheck",), timeout_s=3)
    assert report.status == "failed" and "passed its 3 s limit" in report.tools[0].reason
    pid = int((folder / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_without_the_tool_or_a_compiled_candidate_nothing_is_claimed(tool, sandbox, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer")
    monkeypatch.setenv("PATH", "/nonexistent")
    task = load_task("vector_add")
    missing = Sanitizer(sandbox.builder.build, "sm_90", b"h").sanitize(task, baseline(task))
    assert missing.status == "unavailable" and missing.text().startswith("not sanitized (no compute-sanitizer")
    exe, _ = tool
    broken = parse_candidate(task.baseline_path.read_text().replace("a[i] + b[i]", "a[i] +"), label="broken")
    skipped = Sanitizer(sandbox.builder.build, "sm_90", b"h", executable=str(exe)).sanitize(task, broken)
    assert skipped.status == "skipped" and skipped.reason.startswith("compile_error")
    assert sandbox.sanitize(task, baseline(task)).text() == "not sanitized (compile-only sandbox: no GPU)"


@pytest.mark.parametrize("name, expected", [
    ("vector_add", [{"n": 7}, {"n": 1000}]),
    ("sgemm", [{"M": 3, "N": 5, "K": 7}, {"M": 17, "N": 33, "K": 65}]),
    ("softmax", [{"rows": 3, "cols": 5}, {"rows": 7, "cols": 1000}]),
])
def test_the_sizes_are_the_smallest_non_trivial_check_sizes(name, expected):
    assert sanitize_sizes(load_task(name)) == expected


@pytest.mark.parametrize("note, status, tool", [("", "clean", None), ("race", "errors", "racecheck"),
                                               ("out_of_bounds", "errors", "memcheck"), ("sanitizer_fails", "failed", None)])
def test_the_fake_sandbox_simulates_verdicts_from_annotations(note, status, tool):
    from sandbox import FakeSandbox

    task = load_task("vector_add")
    source = task.baseline_path.read_text() + (f"// fake: {note}\n" if note else "")
    with FakeSandbox() as sb:
        report = sb.sanitize(task, parse_candidate(source, label="c1"))
    assert report.simulated and report.status == status, report
    assert report.sizes == [{"n": 7}, {"n": 1000}]
    if tool:
        found = next(t for t in report.tools if t.tool == tool)
        assert found.status == "errors" and f"'// fake: {note}'" in found.first_error
    assert report.text().endswith("(simulated)")
