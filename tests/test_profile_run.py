"""The profiling run around ncu, with a stand-in ``ncu`` program: it follows ncu's command-line contract,
records how it was called and serves the CSV pages captured on the H200. The compile step is real."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path

import pytest

from sandbox import CompileOnlySandbox, Status, load_task, parse_candidate
from sandbox.host.profiler import ProfileConfig, Profiler
from sandbox.judging.result import Profile
from sandbox.profile import ncu
from stand_in import install

pytestmark = pytest.mark.timeout(120)
FIXTURES = Path(__file__).parent / "fixtures" / "ncu"

FAKE_NCU = """if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build stand-in)")
    sys.exit(0)
if "--import" in args:
    page = args[args.index("--page") + 1]
    sys.stdout.write((here / ("ncu_" + page + ".csv")).read_text())
    sys.exit(0)
if "--profile-from-start" in args:   # a run started ahead: its program waits for the request, then runs it
    spare = json.loads(pathlib.Path(args[-1]).read_text())
    request = wait_for_go(spare)
    with open(here / "spare_requests.jsonl", "a") as f:
        f.write(json.dumps([launch["kernel"] for launch in request["plan"]["launches"]]) + "\\n")
    if mode == "slow-spare":   # a profile that takes a while: how many runs were started ahead by its end
        time.sleep(1.0)
        seen = [c for c in map(json.loads, (here / "calls.jsonl").read_text().splitlines())
                if "--profile-from-start" in c]
        (here / "started_by_the_end.json").write_text(json.dumps(len(seen)))
    pathlib.Path(spare["status_file"]).write_text(json.dumps({"status": "ran", "split_s": {"launches": 0.01}}))
if mode == "noperm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
          "on the target device 0.")
    sys.exit(1)
if mode == "badmetric" and "--metrics" in args:
    print("==ERROR== Failed to find metric lts__t_bytes.sum")
    sys.exit(1)
if mode.endswith("badextra") and "--metrics" in args and "gmma" in args[args.index("--metrics") + 1]:
    print("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio")
    sys.exit(1)
if mode == "nolog" and "--log-file" in args:
    print("==ERROR== unrecognised option '--log-file'. Use --help for further details.")
    sys.exit(1)
if mode == "hang":
    (here / "pid").write_text(str(os.getpid()))
    time.sleep(600)
if mode == "nothing":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
print("==PROF== Connected to process 1")
if mode == "flood":
    sys.stdout.write("device printf line\\n" * 100000)
pathlib.Path(args[args.index("--export") + 1] + ".ncu-rep").write_bytes(b"report")
if mode.startswith("log") and "--log-file" in args:   # ncu's output, the details page by metric name, in its log
    pathlib.Path(args[args.index("--log-file") + 1]).write_text(
        "==PROF== Connected to process 1\\n" + (here / "ncu_names.csv").read_text())
"""

THREE = """/*@kernelwright
[[launch]]
kernel = "k_copy"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]

[[launch]]
kernel = "k_strided"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]

[[launch]]
kernel = "k_sgemm<16>"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
extern "C" __global__ void k_copy(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
extern "C" __global__ void k_strided(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
template <int T> __global__ void k_sgemm(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i] * T; }
"""


def profiling_sandbox(config: ProfileConfig) -> CompileOnlySandbox:
    """A compile-only sandbox whose profiler claims a GPU: the profile path runs, the stand-in ncu answers."""
    sb = CompileOnlySandbox()
    sb.profiler = Profiler(sb.builder.build, "gpu", sb.arch, harness_cubin=b"harness", config=config)
    return sb


@pytest.fixture()
def fake(tmp_path) -> Path:
    folder = tmp_path / "ncu"
    install(folder, "ncu", FAKE_NCU, mode="ok")
    for page in ("raw", "details"):
        (folder / f"ncu_{page}.csv").write_text((FIXTURES / f"ncu_{page}.csv").read_text())
    (folder / "ncu_names.csv").write_text(names_page((FIXTURES / "ncu_raw.csv").read_text(),
                                                     (FIXTURES / "ncu_details.csv").read_text()))
    return folder


def names_page(raw_text: str, details_text: str) -> str:
    """The details page as ``--print-metric-name name`` prints it, built from the captured pages: every raw
    metric of a launch on a row of its own (by name, with its unit), then the launch's rules."""
    rows = ncu.launches(raw_text, details_text)
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
                "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"])
    for r in rows:
        for name, value in r["metrics"].items():
            w.writerow([r["id"], r["kernel"], "Command line profiler metrics", name, r["units"][name], value,
                        "", "", "", "", ""])
        for rule in r["rules"]:
            w.writerow([r["id"], r["kernel"], rule["section"], "", "", "", rule["rule"], rule["type"], rule["message"],
                        rule["speedup_type"], "" if rule["speedup"] is None else rule["speedup"]])
    return out.getvalue()


def calls(folder: Path) -> list[list[str]]:
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def profiling_runs(folder: Path) -> list[list[str]]:
    return [c for c in calls(folder) if "--export" in c]


def run_now(folder: Path) -> list[list[str]]:
    """The profiling runs started for a request (not ahead of one)."""
    return [c for c in profiling_runs(folder) if "--profile-from-start" not in c]


@pytest.fixture()
def sandbox(fake):
    sb = profiling_sandbox(ProfileConfig(ncu=str(fake / "ncu"), timeout_s=20, warmup_rounds=2))
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def task():
    return load_task("vector_add")


def compiled(sandbox, task, cand):
    res = sandbox.compile(task, cand)
    assert res.status is Status.compiled, res.error
    return res


def test_profile_runs_ncu_on_the_plans_kernels_past_the_warmup(sandbox, fake, task):
    cand = parse_candidate(THREE, label="three")
    prof = sandbox.profile(task, cand, sizes={"n": 4096})
    assert prof.status == "ok", prof
    run = profiling_runs(fake)[0]
    joined = " ".join(run)
    assert "--clock-control none" in joined
    assert "--launch-skip 6 --launch-count 3" in joined, "2 warm-up runs of 3 launches are skipped"
    regex = run[run.index("-k") + 1]
    assert regex.startswith("regex:^(") and "k_copy" in regex and "k_strided" in regex
    assert "_Z7k_sgemmILi16EEvPKfS1_Pfi" in regex, "templates are filtered by their mangled name"
    assert run[-3:-1] == ["-m", "sandbox.worker.profile_target"]
    assert [k.kernel for k in prof.kernels] == ["k_copy", "k_strided", "k_sgemm<16>"]
    assert prof.tool.startswith("Version 2025.3.1")
    assert isinstance(prof.diagnosis, str) and "bound: memory-bound" in prof.diagnosis
    assert prof.diagnosis_data["bound"] == "memory" and len(prof.diagnosis_data["issues"]) == 3
    assert Profile.model_validate_json(prof.model_dump_json()) == prof


def test_profiling_time_goes_to_the_cost_ledger_and_the_profile_to_the_result(sandbox, task):
    cand = parse_candidate(THREE, label="three")
    res = compiled(sandbox, task, cand)
    prof = sandbox.profile(task, cand, result=res, sizes={"n": 4096})
    assert prof.seconds > 0 and res.cost.profile_gpu_s == prof.seconds
    assert res.cost.gpu_s >= prof.seconds
    assert res.profile is prof
    assert json.loads(res.to_json())["profile"]["status"] == "ok"


def test_saved_pages_land_in_the_given_folder(sandbox, task, tmp_path):
    cand = parse_candidate(THREE, label="three")
    sandbox.profile(task, cand, sizes={"n": 4096}, save_to=tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ncu-details.csv", "ncu-raw.csv", "ncu.ncu-rep"]


def test_no_permission_is_said_once_then_remembered_without_running_ncu_again(sandbox, fake, task):
    (fake / "mode").write_text("noperm")
    cand = parse_candidate(THREE, label="three")
    first = sandbox.profile(task, cand, sizes={"n": 4096})
    assert first.status == "unavailable" and "ERR_NVGPUCTRPERM" in first.notice
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert second.status == "unavailable" and second.notice == "" and "ERR_NVGPUCTRPERM" in second.reason
    assert len(profiling_runs(fake)) == 1
    assert second.diagnosis.startswith("counters: none (ncu may not read")


def test_a_refused_metric_falls_back_to_sections_only_and_stays_off(sandbox, fake, task):
    (fake / "mode").write_text("badmetric")
    cand = parse_candidate(THREE, label="three")
    assert sandbox.profile(task, cand, sizes={"n": 4096}).status == "ok"
    assert sandbox.profile(task, cand, sizes={"n": 4096}).status == "ok"
    now, ahead = run_now(fake), started_ahead(fake, 2)
    assert ["--metrics" in r for r in now] == [True, True, False]   # every metric, the base set, none
    assert len(ahead) == 2 and not any("--metrics" in r for r in ahead)   # each started with what ncu takes


def _named(run: list[str]) -> list[str]:
    return run[run.index("--metrics") + 1].split(",") if "--metrics" in run else []


def test_the_page_printed_by_the_run_replaces_the_imports_and_gives_the_same_profile(sandbox, fake, task):
    cand = parse_candidate(THREE, label="three")
    imported = sandbox.profile(task, cand, sizes={"n": 4096})
    (fake / "mode").write_text("log")
    before = len(calls(fake))
    printed = sandbox.profile(task, cand, sizes={"n": 4096})
    new = calls(fake)[before:]
    assert printed.status == "ok" and printed.pages == "printed by the run" and imported.pages == "imported"
    assert not any("--import" in c for c in new) and printed.stage_seconds["import"] == 0
    run = [c for c in new if "--export" in c][0]
    assert "--log-file" in run and "--print-metric-name" in run
    assert set(_named(run)) == set(ncu.METRICS + ncu.SUMMARY_METRICS)
    assert [k.summary for k in printed.kernels] == [k.summary for k in imported.kernels]
    assert [k.rules for k in printed.kernels] == [k.rules for k in imported.kernels]
    assert printed.diagnosis == imported.diagnosis


def test_pages_kept_with_a_printed_page_are_the_imported_ones(sandbox, fake, task, tmp_path):
    (fake / "mode").write_text("log")
    cand = parse_candidate(THREE, label="three")
    prof = sandbox.profile(task, cand, sizes={"n": 4096}, save_to=tmp_path / "out")
    assert prof.status == "ok" and prof.pages == "printed by the run"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ncu-details.csv", "ncu-raw.csv", "ncu.ncu-rep"]
    assert (tmp_path / "out" / "ncu-raw.csv").read_text() == (FIXTURES / "ncu_raw.csv").read_text()
    assert (tmp_path / "out" / "ncu-details.csv").read_text() == (FIXTURES / "ncu_details.csv").read_text()


def test_an_ncu_without_the_log_options_is_asked_again_without_them_and_its_pages_imported(sandbox, fake, task):
    (fake / "mode").write_text("nolog")
    cand = parse_candidate(THREE, label="three")
    first = sandbox.profile(task, cand, sizes={"n": 4096})
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert first.status == second.status == "ok" and first.pages == second.pages == "imported"
    assert ["--log-file" in r for r in run_now(fake)] == [True, False]
    assert not any("--log-file" in r for r in started_ahead(fake, 2))
    assert first.kernels == second.kernels


def test_a_refused_summary_metric_falls_back_to_the_base_set_and_imports_the_pages(sandbox, fake, task):
    (fake / "mode").write_text("logbadextra")
    cand = parse_candidate(THREE, label="three")
    first = sandbox.profile(task, cand, sizes={"n": 4096})
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert first.status == second.status == "ok" and second.pages == "imported"
    assert [set(_named(r)) == set(ncu.METRICS) for r in run_now(fake)] == [False, True]
    assert all(set(_named(r)) == set(ncu.METRICS) for r in started_ahead(fake, 2))


def test_a_hanging_ncu_is_killed_at_the_limit_and_the_candidate_marked_failed(sandbox, fake, task):
    (fake / "mode").write_text("hang")
    sandbox.profiler.config = ProfileConfig(ncu=str(fake / "ncu"), timeout_s=2)
    t0 = time.perf_counter()
    prof = sandbox.profile(task, parse_candidate(THREE, label="three"), sizes={"n": 4096})
    assert time.perf_counter() - t0 < 30
    assert prof.status == "failed" and "2 s limit" in prof.reason
    pid = int((fake / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_flood_of_program_output_does_not_break_the_profile(sandbox, fake, task):
    (fake / "mode").write_text("flood")
    prof = sandbox.profile(task, parse_candidate(THREE, label="three"), sizes={"n": 4096})
    assert prof.status == "ok" and prof.messages == []


def test_no_report_is_a_failure_with_ncus_own_words(sandbox, fake, task):
    (fake / "mode").write_text("nothing")
    prof = sandbox.profile(task, parse_candidate(THREE, label="three"), sizes={"n": 4096})
    assert prof.status == "failed" and "no report" in prof.reason
    assert "No kernels were profiled" in prof.detail


def test_missing_ncu_makes_the_profiler_unavailable(task, tmp_path):
    with profiling_sandbox(ProfileConfig(ncu=str(tmp_path / "absent" / "ncu"))) as sb:
        prof = sb.profile(task, parse_candidate(THREE, label="three"), sizes={"n": 4096})
    assert prof.status == "unavailable" and "not an executable file" in prof.notice


def test_a_candidate_that_does_not_compile_is_skipped(sandbox, fake, task):
    broken = THREE.replace("c[i] = a[i] + b[i]; }", "c[i] = a[i] + ; }", 1)
    prof = sandbox.profile(task, parse_candidate(broken, label="broken"), sizes={"n": 4096})
    assert prof.status == "skipped" and prof.reason.startswith("compile_error")
    assert profiling_runs(fake) == []


def test_compile_only_sandbox_reports_unavailable_once_with_resources(task):
    with CompileOnlySandbox() as sb:
        cand = parse_candidate(THREE, label="three")
        res = sb.compile(task, cand)
        first = sb.profile(task, cand, result=res)
        second = sb.profile(task, cand, result=res)
    assert first.status == second.status == "unavailable"
    assert first.notice and not second.notice
    assert "k_copy 12 registers, no spills" in first.diagnosis


def test_a_candidate_profiled_without_a_result_still_gets_its_resource_report(task):
    with CompileOnlySandbox() as sb:
        prof = sb.profile(task, parse_candidate(THREE, label="three"))
    assert prof.status == "unavailable"
    assert "k_copy 12 registers, no spills" in prof.diagnosis and "not compiled" not in prof.diagnosis
    assert "k_copy" in [r["name"] for r in prof.diagnosis_data["resources"]]


def started_ahead(folder: Path, count: int | None = None) -> list[list[str]]:
    """The runs started ahead, once there are ``count`` of them (each starts in the background)."""
    deadline = time.monotonic() + 20
    while True:
        found = [c for c in profiling_runs(folder) if "--profile-from-start" in c]
        if count is None or len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def test_a_profile_after_the_first_runs_on_the_run_started_ahead_of_it(sandbox, fake, task):
    cand = parse_candidate(THREE, label="three")
    first = sandbox.profile(task, cand, sizes={"n": 4096})
    assert first.status == "ok" and not first.started_ahead
    ahead = started_ahead(fake, 1)
    assert len(ahead) == 1 and "-k" not in ahead[0] and "--launch-skip" not in ahead[0]   # no kernel known yet
    assert ahead[0][ahead[0].index("--profile-from-start") + 1] == "off" and ahead[0][-2] == "--wait"
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert second.status == "ok" and second.started_ahead
    assert [k.kernel for k in second.kernels] == ["k_copy", "k_strided", "k_sgemm<16>"]
    assert json.loads((fake / "spare_requests.jsonl").read_text()) == ["k_copy", "k_strided", "k_sgemm<16>"]
    assert second.program_seconds == {"launches": 0.01}
    assert len(started_ahead(fake, 2)) == 2 and len(profiling_runs(fake)) == 3   # the next one is waiting
    waiting = sandbox.profiler._spare
    sandbox.close()
    assert waiting.proc.poll() is not None and not waiting.work.exists()   # closed: nothing left running


def test_the_next_run_starts_when_one_is_handed_its_request_not_when_its_profile_ends(sandbox, fake, task):
    (fake / "mode").write_text("slow-spare")   # read by each run as it starts: the runs started ahead are slow
    cand = parse_candidate(THREE, label="three")
    assert not sandbox.profile(task, cand, sizes={"n": 4096}).started_ahead
    started_ahead(fake, 1)
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert second.status == "ok" and second.started_ahead and second.seconds >= 1.0
    # by the time the slow profile ended, the run after it had been started beside it
    assert json.loads((fake / "started_by_the_end.json").read_text()) == 2
    third = sandbox.profile(task, cand, sizes={"n": 4096})
    assert third.started_ahead and len(run_now(fake)) == 1


def test_a_run_that_will_profile_starts_one_ahead_of_its_first_profile(sandbox, fake, task):
    sandbox.profiler.start_ahead()
    sandbox.profiler.start_ahead()   # one at a time: a second call finds it started
    assert len(started_ahead(fake, 1)) == 1
    first = sandbox.profile(task, parse_candidate(THREE, label="three"), sizes={"n": 4096})
    assert first.status == "ok" and first.started_ahead and run_now(fake) == []


def test_a_profiler_that_cannot_profile_starts_nothing_ahead(fake, task, tmp_path):
    (fake / "mode").write_text("noperm")
    sb = profiling_sandbox(ProfileConfig(ncu=str(fake / "ncu"), timeout_s=20))
    try:
        cand = parse_candidate(THREE, label="three")
        assert sb.profile(task, cand, sizes={"n": 4096}).status == "unavailable"
        sb.profiler.start_ahead()
        assert sb.profiler._spare is None and started_ahead(fake) == []
    finally:
        sb.close()
    missing = profiling_sandbox(ProfileConfig(ncu=str(tmp_path / "no-ncu"), timeout_s=20))
    try:
        missing.profiler.start_ahead()
        assert missing.profiler._spare is None
    finally:
        missing.close()


def test_a_run_started_ahead_that_ended_is_set_aside_and_the_profile_runs_the_usual_way(sandbox, fake, task):
    (fake / "mode").write_text("spare-dies")
    cand = parse_candidate(THREE, label="three")
    assert sandbox.profile(task, cand, sizes={"n": 4096}).status == "ok"
    sandbox.profiler._spare.proc.wait(timeout=20)
    second = sandbox.profile(task, cand, sizes={"n": 4096})
    assert second.status == "ok" and not second.started_ahead
    assert len(started_ahead(fake, 2)) == 2 and len(profiling_runs(fake)) == 4


def test_no_run_is_started_ahead_when_the_config_says_so(fake, task):
    sb = profiling_sandbox(ProfileConfig(ncu=str(fake / "ncu"), timeout_s=20, ahead=False))
    try:
        cand = parse_candidate(THREE, label="three")
        assert sb.profile(task, cand, sizes={"n": 4096}).status == "ok"
        assert sb.profile(task, cand, sizes={"n": 4096}).status == "ok"
        assert started_ahead(fake) == [] and len(profiling_runs(fake)) == 2
    finally:
        sb.close()
