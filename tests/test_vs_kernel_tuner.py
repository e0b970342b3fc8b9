"""bench/vs_kernel_tuner.py without a GPU: the same spaces handed to Kernel Tuner, the case tasks, and the
arithmetic of the comparison on the fake sandbox's simulated search (Kernel Tuner's run replaced by a record)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]

import kernel_tuner_live as klive  # noqa: E402
import vs_kernel_tuner as vs  # noqa: E402
from sandbox import FakeSandbox, load_candidate  # noqa: E402

pytestmark = pytest.mark.timeout(600)
# Tests that build Kernel Tuner's own search space need the optional extra; the rest run without it.
needs_kt = pytest.mark.skipif(importlib.util.find_spec("kernel_tuner") is None,
                              reason=f"Kernel Tuner not installed ({vs.INSTALL})")


@pytest.mark.parametrize("name, ours, theirs", [("row_sum", 24, 24), ("softmax_tuned", 144, 144),
                                                ("sgemm_blocked", 243, 225)])
@needs_kt
def test_kernel_tuner_gets_the_same_space(tmp_path, name, ours, theirs):
    case = vs.CASES[name]
    task = vs.case_task(case, tmp_path)
    cand = load_candidate(ROOT / case.candidate)
    spec = klive.restricted(klive.spec(task, cand), case.valid)
    assert math.prod(len(v) for v in cand.knobs.values()) == ours
    # Kernel Tuner leaves out blocks of more than 1024 threads itself, and sgemm_blocked's 16-thread tiles by the
    # case's restriction (its static_asserts, on which Kernel Tuner's compile would stop the run); neither compiles
    # for us either
    assert klive.configurations(spec) == theirs
    if case.valid is not None:
        assert klive.configurations(klive.spec(task, cand)) == 228
        assert spec.restrictions({"BM": 32, "BN": 32, "BK": 8, "TM": 8, "TN": 8, "block_size_x": 16}) is False
    defaults = {k: v[0] for k, v in cand.knobs.items()}
    assert spec.problem_size({**defaults, **{n: 1 for n in spec.block_size_names}})[0] > 1
    assert [a for a, _ in spec.args].count("array") == len(task.spec.inputs) + len(task.spec.outputs)


def test_the_row_sum_case_runs_at_its_own_benchmark_size(tmp_path):
    task = vs.case_task(vs.CASES["row_sum"], tmp_path)
    assert task.spec.sizes.benchmark == {"rows": 16384, "cols": 8192}
    suite = vs.load_task("row_sum")
    assert task.spec.sizes.check == suite.spec.sizes.check and task.fingerprint != suite.fingerprint


@needs_kt
def test_the_comparison_arithmetic_on_a_simulated_search(tmp_path, monkeypatch, capsys):
    fake_kt = klive.KTRun(seconds=3.6, tried=24, failed=0, best={"BLOCK": 256, "VEC": 4}, best_ms=0.12)
    monkeypatch.setattr(klive, "tune", lambda task, spec, **kw: fake_kt)
    monkeypatch.setattr(vs, "kt_inputs", lambda task: {})
    with FakeSandbox() as sb:
        evaluated = []
        real = sb.evaluate
        monkeypatch.setattr(sb, "evaluate", lambda task, cand, **kw: evaluated.append(cand.defines())
                            or real(task, cand, **kw))
        row = vs.run_case("row_sum", vs.CASES["row_sum"], sb, tmp_path, fraction=0.2, seeds=4, finalists=2)
    kt, kw = row["kernel_tuner"], row["kernelwright"]
    # the start and the finalists are evaluated in full once; only a best found by Kernel Tuner alone is added
    assert len(kw["finalists"]) <= 2 and kw["best"] in evaluated
    full = 1 + len(kw["finalists"])
    assert len(evaluated) == full + (fake_kt.best not in evaluated[:full])
    assert kt["per_hour"] == pytest.approx(24 * 3600 / 3.6)
    assert kw["configurations"] == 23                       # every point but the start, screened or a duplicate
    assert 1 <= kw["screened"] <= 23 and kw["seconds"] > 0
    assert row["ratio"] == pytest.approx(kw["per_hour"] / kt["per_hour"])
    assert kt["remeasured"]["status"] == "ok" and kw["remeasured"]["status"] == "ok"
    for d in kw["replay"].values():
        assert d["budget"] == 5 and 0 <= d["mean_gap"] <= d["worst_gap"] and 0 <= d["within_2"] <= 1
    vs.print_rows([row], 0.2, 4)
    out = capsys.readouterr().out
    assert "| row_sum | 24 | 24 / 3.6 / 24,000 |" in out and f"**{row['ratio']:.2f}x**" in out
    # the screened values saved with the row replay, with no GPU, to the same gaps as in the run
    assert len(kw["values"]) == 24 and all(v is None or v > 0 for _, _, v in kw["values"])
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps([row], default=str))
    assert vs.replay_saved(json.loads(saved.read_text())[0], 0.2, 4) == kw["replay"]
    assert vs.main(["--replay", str(saved), "--seeds", "4"]) == 0
    assert "| row_sum | 24 |" in capsys.readouterr().out


def test_a_replay_of_a_file_that_is_not_the_bench_s_is_refused(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('[{"case": "row_sum"}]')
    assert vs.main(["--replay", str(bad)]) == 2
    assert "not a --json file of this bench" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--finalists", "0"], ["--max-seconds", "0"], ["--cases", "row_sum,gemm"]])
def test_the_bench_refuses_bad_options_before_it_starts(args, capsys):
    with pytest.raises(SystemExit) as exc:
        vs.main(args)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_the_bench_says_so_and_stops_when_kernel_tuner_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(vs.kts, "version", lambda: None)
    assert vs.main(["--cases", "row_sum"]) == 2
    assert "Kernel Tuner is not installed" in capsys.readouterr().err


def test_a_gpu_uuid_cut_short_at_a_zero_byte_reaches_kernel_tuner_padded_and_only_while_it_starts(monkeypatch):
    import uuid

    import cupy

    whole = bytes.fromhex("9b1d00a4c8f1e2d3a4b5c6d7e8f90a1b")
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceProperties", lambda device: {"uuid": whole[:2], "name": b"H200"})
    real = cupy.cuda.runtime.getDeviceProperties
    with klive._whole_uuid():
        props = cupy.cuda.runtime.getDeviceProperties(0)
        assert str(uuid.UUID(bytes=props["uuid"])).startswith("9b1d0000-")   # what Kernel Tuner's backend does
        assert props["name"] == b"H200"
    assert cupy.cuda.runtime.getDeviceProperties is real
    with pytest.raises(ValueError, match="16-char"):
        uuid.UUID(bytes=real(0)["uuid"])


def test_the_default_strategy_at_a_fifth_of_each_measured_h200_space_is_within_2_percent_on_every_seed():
    rows = json.loads((ROOT / "bench" / "results" / "vs_kernel_tuner_h200.json").read_text())
    assert [r["case"] for r in rows] == ["row_sum", "sgemm_blocked", "softmax_tuned"]
    for row in rows:
        replayed = vs.replay_saved(row, 0.2, 10)["default"]
        assert replayed["within_2"] == 1.0 and replayed["worst_gap"] <= 2.0, (row["case"], replayed)
