"""The benchmark scripts stay runnable without a GPU: they import, the tunable candidates in
bench/candidates/ compile at their default knobs without spills, and the tuner benchmark replays
its committed cache."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sandbox import CompileOnlySandbox, Status, load_candidate, load_task

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = {"sgemm_blocked.cu": "sgemm", "softmax_tuned.cu": "softmax", "transpose_tuned.cu": "transpose",
              "row_sum_vec.cu": "row_sum",
              "histogram_tuned.cu": "histogram"}


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", ["bench/suite.py", "bench/tuner.py", "bench/sandbox_bench.py", "bench/check_power.py",
                                    "bench/vs_kernel_tuner.py",
                                    "bench/l2_flush.py", "bench/launch_hold.py", "bench/ray_ab.py",
                                    "bench/kernelbench.py", "bench/stage_parts.py", "bench/throughput.py",
                                    "bench/claim_parts.py", "bench/profile_scale.py", "bench/input_draws.py",
                                    "bench/profile_cost.py", "bench/candidate_floor.py", "bench/warm_up.py"])
def test_bench_script_imports_and_explains_itself(script):
    out = run(script, "--help")
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--sizes", "n=abc"], "--sizes"), (["--task", "nope"], "no such task"),
                                        (["--rounds", "2"], "at least 3"), (["--sizes", "rows=4"], "--sizes")])
def test_the_launch_hold_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/launch_hold.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--pairs", "0"], "at least 1"),
                                        (["--tasks", "vector_add,nope"], "no such task"),
                                        (["--tasks", ","], "names no task")])
def test_the_warm_up_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/warm_up.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_warm_up_bench_reads_the_warm_up_from_what_the_stage_ran():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import warm_up
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert warm_up.kind_of({"baseline": 3, "vendor": 3, "candidate": 22}) == "short"
    # after a pause, or after other work of the sandbox that outlasted WARM_AGAIN_S: the whole warm-up
    assert warm_up.kind_of({"baseline": 22, "vendor": 16, "candidate": 22}) == "whole"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--reps", "1"], "at least 2"), (["--task", "nope"], "no such task")])
def test_the_stage_parts_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/stage_parts.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["nope"], "no such task"), (["vector_add"], "has no rows")])
def test_the_profile_scale_bench_refuses_a_task_it_cannot_scale_with_one_error(args, says):
    out = run("bench/profile_scale.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--leader", "BLOCK"], "not KNOB=VALUE"), (["--start", "WARPS=4"], "no knob"),
                                        (["--leader", "BLOCK=3"], "no value '3'")])
def test_the_claim_parts_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/claim_parts.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--fake-eval-s", "0.5"], "--sandbox fake only"),
                                        (["--sandbox", "fake", "--fake-eval-s", "-1"], "at least 0"),
                                        (["--candidates", "0"], "at least 1"), (["--parts", "nope"], "unknown parts"),
                                        (["--start", "BLOCK"], "KNOB=VALUE"), (["--start", "BLOCK=3"], "no value '3'"),
                                        (["--start", "WARPS=4"], "no knob 'WARPS'"),
                                        (["--task", "sgemm"], "invalid choice: 'sgemm'")])
def test_the_throughput_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/throughput.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_throughput_bench_starts_the_optimize_run_where_asked_in_the_same_space(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / "bench"))
    source = throughput.ROW_SUM.read_text()
    moved = throughput.start_at(source, {"BLOCK": "32", "VEC": "1"})
    knobs = lambda text: {line.split("=")[0].strip(): line.split("=")[1].strip()
                          for line in text.splitlines() if line.startswith(("BLOCK", "VEC"))}
    assert knobs(source) == {"BLOCK": "[256, 32, 64, 128, 512, 1024]", "VEC": "[4, 1, 2, 8]"}
    assert knobs(moved) == {"BLOCK": "[32, 256, 64, 128, 512, 1024]", "VEC": "[1, 4, 2, 8]"}
    assert moved.splitlines()[4:] == source.splitlines()[4:]
    task = load_task(throughput.row_sum_task(tmp_path, {"VEC": "8"}))
    assert load_candidate(task.baseline_path).knobs == {"BLOCK": (256, 32, 64, 128, 512, 1024), "VEC": (8, 4, 1, 2)}


def test_the_throughput_benchs_optimize_part_names_the_leaders_the_claim_set_aside():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from agent.trace.records import Summary

    row = {"sizes": {"rows": 4096, "cols": 16384}, "status": "ok"}
    best = {"id": "c0003", "origin": "tuner", "parents": [], "status": "ok"}
    summary = Summary.model_validate({
        "run_id": "r", "task": {"name": "t"}, "sandbox": "fake", "simulated": True, "candidates": 4, "best": best,
        "claim": {"heldout": {"rows": [row, row, row], "set_aside": [{"id": "c0001", "note": "", "rows": [row, row]},
                                                                      {"id": "c0002", "note": "", "rows": [row]}]}}})
    assert throughput._claim(summary) == {"set_aside": [{"id": "c0001", "sizes_checked": 2},
                                                        {"id": "c0002", "sizes_checked": 1}],
                                          "winner_sizes": 3, "winner": "c0003"}
    bare = Summary(run_id="r", task={"name": "t"}, sandbox="fake", simulated=True, candidates=0)
    assert throughput._claim(bare) == {"set_aside": [], "winner_sizes": 0, "winner": None}


@pytest.mark.timeout(300)
def test_the_throughput_benchs_optimize_part_accounts_for_the_process_around_its_trace(tmp_path):
    out = run("bench/throughput.py", "--parts", "optimize", "--sandbox", "fake", "--repeat", "1", "--start", "VEC=8",
              "--json", tmp_path / "o.json", timeout=280)
    assert out.returncode == 0, out.stderr
    import json

    kw = json.loads((tmp_path / "o.json").read_text())["optimize"][0]["kernelwright"]
    span = kw["timeline"][-1][1]   # the trace's last event, in seconds since it began
    assert kw["before_trace_s"] > 0 and kw["after_trace_s"] >= 0
    assert kw["before_trace_s"] + span + kw["after_trace_s"] == pytest.approx(kw["wall_s"], abs=0.1)
    assert "starting at VEC=8" in out.stdout and "outside its run's trace" in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith("| kernelwright optimize"))
    assert re.search(r"\| (\d+\.\d{3}x \[\d+\.\d{3}, \d+\.\d{3}\] over the start|no claim) \|$", row), row
    # each evaluation's rounds, and its launches where counted (the fake sandbox counts none)
    assert re.search(r"evaluated c0000 \(ok; .*timing \d+\.\d\d in \d+ rounds\)", out.stdout)
    claim = kw["claim"]
    assert claim["set_aside"] == [] and "The claim's held-out check: leaders set aside none" in out.stdout
    assert claim["winner_sizes"] == (3 if claim["winner"] not in (None, "c0000") else 0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("task", ["softmax", "row_sum"])
def test_the_throughput_bench_counts_llm_candidates_and_the_loop_between_them_on_the_fake_sandbox(tmp_path, task):
    out = run("bench/throughput.py", "--parts", "candidates", "--sandbox", "fake", "--candidates", "6",
              "--task", task, "--json", tmp_path / "t.json", timeout=280)
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads((tmp_path / "t.json").read_text())["candidates"]
    assert f"LLM-style candidates on {task} at its benchmark size" in out.stdout and got["task"] == task
    assert got["candidates"] == 6 and got["statuses"] == {"ok": 6}
    assert got["phase_s"] > 0 and got["per_gpu_hour"] == pytest.approx(3600 * 6 / got["phase_s"])
    assert got["finish_s"] >= 0 and got["profiles"] == 0    # simulated results are never profiled
    assert got["workers"] == {}                              # a simulated sandbox has no worker processes
    # one gap between each two consecutive evaluations of the phase: the five after the first candidate's
    assert len(got["gaps_s"]) == 5 and all(g >= 0 for g in got["gaps_s"])
    assert "(the GPU slot idle)" in out.stdout and "the held-out check of the leaders" in out.stdout


@pytest.mark.timeout(240)
def test_the_throughput_benchs_answers_are_48_distinct_builds_and_none_is_the_baseline():
    # distinct machine code: a build already evaluated is skipped as a duplicate, and would not count as a candidate
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from sandbox.candidates.plan import identity
    from sandbox.host.open import CompileOnlySandbox, SandboxConfig

    sb = CompileOnlySandbox(SandboxConfig(arch="sm_90"))
    for task_name, answers in throughput.ANSWERS.items():
        task = load_task(task_name)
        got = answers(48)
        assert [c.label for c in got] == [f"answer{i}" for i in range(48)]
        builds = set()
        for c in [load_candidate(task.baseline_path)] + got:
            result, info, _ = sb.builder.build(task, c)
            assert result.status.value == "compiled", (task_name, c.label, result.error)
            builds.add(identity(task, c, info))
        assert len(builds) == 49, task_name


def test_the_throughput_bench_splits_the_workers_requests_of_the_phase_per_candidate():
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    try:
        import throughput
    finally:
        del sys.path[:2]
    from sandbox.wire import Checked, Compared, TrialChecks, TrialRun

    check = Checked([TrialRun("check[0]#0", "ran", gpu_s=0.002, split_s={"buffers": 0.0015, "guards": 0.0005}),
                     TrialRun("benchmark#1", "ran", gpu_s=0.010, split_s={"hand-over": 0.006, "buffers": 0.004})])
    compared = Compared([TrialChecks("check[0]#0", []), TrialChecks("benchmark#1", [])], 0.008,
                        {"reference": 0.005, "inputs": 0.003})
    kept = Compared([TrialChecks("timing launch 7 (untimed, after the timed rounds)", [])], 0.004, {"reference": 0.004})
    calls = [(check, 10.0, 0.016), (compared, 10.1, 0.009), (kept, 10.2, 0.004), (check, 10.3, 0.016),
             (object(), 10.4, 0.5), (check, 9.0, 1.0), (kept, 12.0, 1.0)]   # another reply; two outside the phase
    got = throughput.worker_split(calls, 10.0, 11.0, candidates=2)
    assert got["GPU worker: correctness stages"]["ms"] == pytest.approx(16.0)
    assert got["GPU worker: their trials at the check sizes"] == {"ms": pytest.approx(2.0),
                                                                    "parts": {"buffers": pytest.approx(1.5),
                                                                              "guards": pytest.approx(0.5)}}
    assert got["GPU worker: their trials at the benchmark size"]["parts"]["hand-over"] == pytest.approx(6.0)
    assert got["reference worker: correctness stages"]["ms"] == pytest.approx(4.5)
    assert got["reference worker: the timing stage's kept launches"] == {"ms": pytest.approx(2.0),
                                                                         "parts": {"reference": pytest.approx(2.0)}}
    assert len(got) == 5 and not throughput.worker_split(calls, 20.0, 21.0, candidates=2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--pairs", "0"], "at least 1"), (["--answers", "kernels"], "no *.md answers"),
                                        (["--task", "nope"], "no such task")])
def test_the_ray_ab_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/ray_ab.py", "--sandbox", "fake", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(300)
def test_the_ray_ab_bench_sets_runs_with_and_without_ray_side_by_side_on_the_fake_sandbox(tmp_path):
    pytest.importorskip("ray")
    out = subprocess.run([sys.executable, "bench/ray_ab.py", "--sandbox", "fake", "--pairs", "1"], capture_output=True,
                         text=True, timeout=280, cwd=ROOT, env={**__import__("os").environ,
                                                                "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr[-2000:]
    runs = [line.split("|")[1].strip() for line in out.stdout.splitlines() if line.startswith("| local") or
            line.startswith("| ray")]
    assert runs.count("ray 1") == runs.count("local 1") == runs.count("local 0") >= 2
    gaps = [line for line in out.stdout.splitlines() if line.startswith("| c0")]
    assert gaps and all("+0.000 (+0.0%)" in g for g in gaps), gaps   # simulated times: the same on both sides


def test_every_tunable_candidate_is_listed_here():
    assert sorted(p.name for p in (ROOT / "bench" / "candidates").glob("*.cu")) == sorted(CANDIDATES)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_tunable_candidate_compiles_at_its_default_knobs_without_spills(name):
    task = load_task(CANDIDATES[name])
    cand = load_candidate(ROOT / "bench" / "candidates" / name)
    with CompileOnlySandbox() as sb:
        result = sb.evaluate(task, cand)
    assert result.status is Status.compiled, result.error
    assert all(k.spill_stores == 0 and k.spill_loads == 0 for k in result.compile.kernels.values()), result.compile.kernels


@pytest.mark.timeout(300)
def test_tuner_bench_replays_its_committed_cache_without_a_gpu(tmp_path):
    cache = tmp_path / "points.json"
    shutil.copyfile(ROOT / "bench" / "results" / "tuner_points.json", cache)
    out = run("bench/tuner.py", "--replay", "--cache", cache, "--cases", "histogram_tuned,transpose_tuned")
    assert out.returncode == 0, out.stderr
    # the committed cache holds every distinct point of histogram_tuned, measured on an H200
    row = next(line for line in out.stdout.splitlines() if line.startswith("histogram_tuned "))
    assert "128 (0 failed)" in row, row
    assert "evaluated in full by the sandbox: ok" in out.stdout
    assert "target (default strategy within 5% of the exhaustive best at 20% of its evaluations" in out.stdout
    assert "[transpose_tuned] incomplete" in out.stdout  # never measured: not compared, not invented
    # softmax and sgemm changed since their points were measured: replaying them is refused, not faked
    for case in ("softmax_tuned", "sgemm_blocked"):
        stale = run("bench/tuner.py", "--replay", "--cache", cache, "--cases", case)
        assert stale.returncode != 0 and "another task version" in stale.stderr, stale.stderr


@pytest.mark.timeout(300)
def test_check_power_prints_what_each_output_test_catches_with_numpy():
    out = run("bench/check_power.py", "--cpu", "--tasks", "vector_add,histogram,hgemm", "--trials", "3")
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("### "):
            task = line.split()[1]
        elif line.startswith(("| honest", "| wrong", "| not wrong")):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[task, cells[0]] = cells[1:]  # old fingerprint, sample, projections, every element, sandbox
    for task in ("vector_add", "histogram", "hgemm"):
        assert rows[task, "honest: the reference, rounded"] == ["0%"] * 5
        assert rows[task, "wrong: all zero"][4] == "100%"
        assert rows[task, "wrong: one element off by 100x its tolerance (ints: 1)"][3:] == ["100%", "100%"]
    # the old fingerprint misses sparse and half-precision errors of a float16 GEMM; the sandbox's test does not
    assert rows["hgemm", "wrong: every 4096th element zero"][0] == "0%"
    assert rows["hgemm", "wrong: inputs in half precision"] == ["0%", "100%", "0%", "100%", "100%"]
    assert rows["hgemm", "not wrong: constant bias of atol / 2"] == ["0%"] * 5
    assert rows["histogram", "wrong: inputs in half precision"] == ["n/a"] * 5


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, says", [(["--rows", "0"], "at least 1"), (["--against", "no-such-rev"], "no-such-rev")])
def test_the_input_draws_bench_refuses_bad_options_with_one_error(args, says):
    out = run("bench/input_draws.py", *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_input_draws_bench_draws_with_another_revisions_code_as_its_worker_did():
    sys.path.insert(0, str(ROOT / "bench"))
    import input_draws
    from sandbox.tasks import inputs

    spec = dict(name="x", dtype="float32", shape=[3, 5], dist="normal", kind="normal", scale=1.0, offset=0.0)
    then = input_draws.module_at("HEAD")
    assert then is not inputs and then.generate is not inputs.generate
    buf = np.zeros((3, 5), np.float32)
    input_draws.draw_into(then, np, spec, 4, buf)
    assert np.array_equal(buf, inputs.generate(np, spec, 4))
    drawn = []
    older = SimpleNamespace(generate=lambda xp, spec, seed: drawn.append(seed) or inputs.generate(xp, spec, seed))
    buf[...] = 0
    input_draws.draw_into(older, np, spec, 4, buf)   # code whose draw made a new array: copied into the buffer
    assert drawn == [4] and np.array_equal(buf, inputs.generate(np, spec, 4))


def test_the_profile_cost_bench_leaves_out_each_named_metric_once_and_nothing_else():
    sys.path.insert(0, str(ROOT / "bench"))
    import profile_cost
    from sandbox.profile import ncu

    now = ncu.METRICS + ncu.SUMMARY_METRICS
    each = profile_cost.variants([], each_metric=True)
    assert each.pop("now: sections + metrics") == (ncu.SECTIONS, now)
    assert sorted(each) == sorted(f"now without {m}" for m in ncu.METRICS)
    for name, (sections, metrics) in each.items():
        assert sections == ncu.SECTIONS and set(now) - set(metrics) == {name.removeprefix("now without ")}
        assert len(metrics) == len(now) - 1


PARTS = """softmax at its benchmark size {'rows': 4, 'cols': 4}: inputs 1.00 GiB, outputs 1.00 GiB; ms per repetition

| step | device ms | host ms to queue | wall ms |
|---|---|---|---|
| generate one input set | 1.0 | 1.0 | 1.0 |
| hash the inputs | 0.25 | 0.02 | 0.25 |
| poison the outputs | 0.25 | 0.01 | 0.25 |
| L2 flush | 0.0 | 0.01 | 0.0 |
| the kernel (baseline) launched | 2.0 | 0.01 | 2.0 |
| guard bands + input hashes, queued | 0.5 | 0.1 | 0.5 |
| agreement test, queued | 1.0 | 0.05 | 1.0 |
| mask a baseline output | 0.5 | 0.01 | 0.5 |
| the vendor's call | 5.0 | 0.1 | 5.0 |
"""


def _candidates(launches=(90, 110), repeated=(70, 90), rounds=(10, 10)):
    costs = {"time_gpu_s": [0.4, 0.4], "check_gpu_s": [0.1, 0.1], "reference_s": [0.1, 0.1],
             "profile_gpu_s": [0.0, 0.5]}
    return {"candidates": {"candidates": 2, "busy": 0.9, "per_gpu_hour": 4000.0,
                           "split": {"costs": costs, "counts": {"candidate_launches": list(launches),
                                                                "repeated_launches": list(repeated),
                                                                "rounds": list(rounds)}},
                           "workers": {"reference worker: correctness stages": {"ms": 60.0, "parts": {
                               "reference": 20.0, "compare": 10.0, "inputs": 30.0}}}}}


def test_the_floor_multiplies_each_steps_device_time_by_what_the_stages_ran():
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    try:
        import candidate_floor as cf
    finally:
        del sys.path[:2]
    parts = cf.read_parts(PARTS, "parts.txt")
    cands = cf.read_candidates(_candidates(), "cand.json")
    assert (cands["launches"], cands["repeated"], cands["rounds"]) == (100, 80, 10)
    assert cands["measured"]["profile_gpu_s"] == pytest.approx(0.25) and cands["reference_parts_s"] == pytest.approx(0.03)
    f = cf.floor(parts, cands, kernel_ms=1.0, sets=3, copy_tbs=2**31 / 1e9)   # a 1 GiB copy: 1 ms
    # 100 launches of 0.25 + 1 + 0.5, 80 hashed (0.25) and 20 compared (1.0); the flush costs nothing here
    assert f["candidate"] == pytest.approx(100 * 1.75 + 80 * 0.25 + 20 * 1.0)
    assert f["baseline"] == pytest.approx((10 + 10) * (0.25 + 2.0 + 0.5 + 0.5))      # warm-up: 20 ms / 2 ms
    assert f["vendor"] == pytest.approx((4 + 10) * (5.0 + 0.25))                      # warm-up: ceil(20 / 5)
    assert f["inputs"] == pytest.approx(11 * 1.25 + 10 * 0.25)
    # fences: two other sets (1 GiB in, two 1 GiB outputs) and the baseline's output, hashed four times; three
    # kept launches copied twice and hashed
    assert f["fences_kept"] == pytest.approx(4 * 7 * 0.25 + 3 * (2 * 1.0 + 0.25))
    assert f["timing"] == pytest.approx(sum(f[k] for k in ("candidate", "baseline", "vendor", "inputs", "fences_kept")))
    assert f["check"] == pytest.approx(3 * (1.0 + 0.25 + 2 * 1.75 + 3 * 1.0 + 2 * 0.25))
    # where the results say how many warm-up launches the baseline and the vendor ran, those count
    ran = _candidates()
    ran["candidates"]["split"]["counts"].update(warm_up_baseline=[3, 5], warm_up_vendor=[3, 3],
                                                warm_up_candidate=[9, 9])
    cut = cf.floor(parts, cf.read_candidates(ran, "cand.json"), kernel_ms=1.0, sets=3, copy_tbs=2**31 / 1e9)
    assert cut["baseline"] == pytest.approx((4 + 10) * (0.25 + 2.0 + 0.5 + 0.5))
    assert cut["vendor"] == pytest.approx((3 + 10) * (5.0 + 0.25)) and cut["candidate"] == f["candidate"]
    with pytest.raises(cf.Bad, match="no row for 'agreement test, queued'"):
        cf.read_parts(PARTS.replace("agreement test", "agreement"), "parts.txt")
    with pytest.raises(cf.Bad, match="cand.json: not bench/throughput.py's candidates part"):
        cf.read_candidates({"search": []}, "cand.json")


def test_the_floor_script_prints_its_table_and_refuses_a_wrong_file_with_one_error(tmp_path):
    import json

    (tmp_path / "parts.txt").write_text(PARTS)
    (tmp_path / "cand.json").write_text(json.dumps(_candidates()))
    out = run("bench/candidate_floor.py", "--parts", tmp_path / "parts.txt", "--candidates", tmp_path / "cand.json")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if re.match(r"\| [\d.]+ \|", line)]
    assert len(rows) == 2 and "candidates an hour with no host time" in out.stdout
    bad = run("bench/candidate_floor.py", "--parts", tmp_path / "cand.json", "--candidates", tmp_path / "cand.json")
    assert bad.returncode == 2 and "not bench/stage_parts.py's output" in bad.stderr and "Traceback" not in bad.stderr
    neg = run("bench/candidate_floor.py", "--parts", tmp_path / "parts.txt", "--candidates", tmp_path / "cand.json",
              "--sets", "0")
    assert neg.returncode == 2 and "--sets must be at least 1" in neg.stderr
