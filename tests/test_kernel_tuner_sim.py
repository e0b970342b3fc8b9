"""Kernel Tuner's strategies replayed on the tuner bench's cache (bench/kernel_tuner_sim.py): the cache file
it reads holds every declared configuration, its space is the distinct configurations that compiled, a
replay is seeded and keeps to its budget, and the bench refuses --kernel-tuner cleanly without the extra."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import kernel_tuner_sim as kts  # noqa: E402
import tuner as tb  # noqa: E402

needs_kt = pytest.mark.skipif(kts.version() is None, reason=f"Kernel Tuner not installed ({kts.INSTALL})")


@pytest.fixture(scope="module")
def sgemm_run():
    data = json.loads(tb.DEFAULT_CACHE.read_text())
    entry = data["cases"]["sgemm_blocked"]
    # its points were measured for an earlier version of the sgemm task (the bench refuses to replay them);
    # what is tested here, the replay machinery, does not depend on the task's inputs
    entry["envelope"]["task_fingerprint"] = tb.load_task("sgemm").fingerprint
    return tb.CaseRun("sgemm_blocked", tb.CASES["sgemm_blocked"], entry, "sm_90", "screen", replay=True)


def test_the_cache_file_holds_every_declared_configuration_and_restricts_to_the_distinct_ones(sgemm_run, tmp_path):
    case = kts.SimulatedCase(sgemm_run, tmp_path)
    doc = json.loads(case.cachefile.read_text())
    assert doc["tune_params_keys"] == list(sgemm_run.space.names)
    assert len(doc["cache"]) == sgemm_run.space.size == 243
    assert len(case.allowed) == len(sgemm_run.distinct()) == 225  # 18 configurations share machine code
    best = min(sgemm_run.distinct(), key=sgemm_run.value)
    timed = {k: v["time"] for k, v in doc["cache"].items() if isinstance(v["time"], float)}
    assert min(timed.values()) == sgemm_run.value(best)
    assert case.key_of[min(timed, key=timed.get)] == best
    params = dict(zip(case.names, min(timed, key=timed.get).split(",")))
    assert case._restriction({n: int(v) for n, v in params.items()})


@needs_kt
@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["random_sample", "genetic_algorithm", "bayes_opt"])
def test_a_replay_is_seeded_and_keeps_to_its_budget(sgemm_run, tmp_path, strategy):
    case = kts.SimulatedCase(sgemm_run, tmp_path)
    budget = 20
    first = [case.replay(strategy, budget, seed) for seed in range(3)]
    assert first == [case.replay(strategy, budget, seed) for seed in range(3)]
    for key, evaluations in first:
        assert 0 < evaluations <= budget
        assert key in sgemm_run.distinct() and math.isfinite(sgemm_run.value(key))
    assert len({k for k, _ in first}) > 1 or strategy != "random_sample"  # seeds differ: samples differ


@needs_kt
@pytest.mark.timeout(300)
def test_the_bench_prints_kernel_tuner_rows_beside_its_own(tmp_path):
    cache = tmp_path / "points.json"
    cache.write_text(tb.DEFAULT_CACHE.read_text())
    out = subprocess.run([sys.executable, "bench/tuner.py", "--replay", "--cache", str(cache), "--cases",
                          "histogram_tuned", "--seeds", "5", "--kernel-tuner", "random_sample"],
                         capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"Kernel Tuner {kts.version()}'s strategies replayed on the same cache" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("histogram_tuned ")]
    kt = [r for r in rows if r[1:3] == ["kernel_tuner", "random_sample"]]
    assert len(kt) == 1 and kt[0][-1].endswith("/26"), rows


def test_kernel_tuner_strategies_without_the_extra_are_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(kts, "version", lambda: None)
    with pytest.raises(SystemExit) as exc:
        tb.main(["--replay", "--kernel-tuner"])
    assert exc.value.code == 2
    assert 'pip install -e ".[kerneltuner]"' in capsys.readouterr().err


@needs_kt
def test_an_unknown_kernel_tuner_strategy_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        tb.main(["--replay", "--kernel-tuner", "random_sample,no_such_strategy"])
    assert exc.value.code == 2
    assert "no_such_strategy" in capsys.readouterr().err
