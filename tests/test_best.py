"""The best-known store (keys, ranking, atomic records) and ``kernelwright best``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.claims.best import BestStore, Envelope
from sandbox.candidates.candidate import load_candidate, parse_candidate
from sandbox.judging.environment import Environment
from sandbox.judging.result import Status
from sandbox.tasks.task import load_task
from tuner_fakes import H200_ENV, failed_result, timed_result

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


def envelope_of(env: dict) -> Envelope | None:
    return Envelope.from_env(Environment.model_validate(env))


@pytest.fixture
def task():
    return load_task("sgemm")


@pytest.fixture
def tuned(task):
    return load_candidate(task.baseline_path).with_knobs({"TILE": 32}).with_flags(["--ptxas-options=-O2"])


@pytest.fixture
def store(tmp_path):
    return BestStore(tmp_path / "best")


def test_offer_then_get_round_trips_the_kernel_with_its_plan_knobs_and_flags(task, tuned, store):
    result = timed_result(task, tuned, 2.0, 3.0, vendor=(0.5, 0.45, 0.55))
    assert store.offer(task, tuned, result, run="run-1")
    record = store.get(task, envelope_of(H200_ENV))
    assert record is not None and record.run == "run-1"
    assert (record.knobs, record.flags, record.median_ms) == ({"TILE": 32}, ["--ptxas-options=-O2"], 2.0)
    assert record.speedup.value == 1.5 and record.vendor_speedup.value == 0.5
    exported = parse_candidate(record.kernel)
    assert exported.knob_values == {"TILE": 32} and exported.flags == ("--ptxas-options=-O2",)
    assert exported.launches == tuned.launches
    assert record.describe().startswith("sgemm at M=4096,N=4096,K=4096 on NVIDIA H200 (driver 570.86, CUDA 13.0")


def test_records_are_keyed_by_gpu_driver_cuda_and_size(task, tuned, store):
    store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0))
    for other in ({"gpu": "NVIDIA A100"}, {"driver": "580.10"}, {"cuda_runtime": "12.8"}, {"nvrtc": "12.9"}):
        assert store.get(task, envelope_of({**H200_ENV, **other})) is None
    assert store.get(task, envelope_of(H200_ENV), {"M": 1024, "N": 1024, "K": 1024}) is None
    small = {"M": 1024, "N": 1024, "K": 1024}
    store.offer(task, tuned, timed_result(task, tuned, 0.1, 0.2, sizes=small))
    assert store.get(task, envelope_of(H200_ENV), small).median_ms == 0.1
    assert store.get(task, envelope_of(H200_ENV)).median_ms == 2.0


def test_records_are_keyed_by_the_task_fingerprint(task, tuned, store, tmp_path):
    store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0))
    folder = tmp_path / "sgemm"
    folder.mkdir()
    for name in ("task.toml", "reference.py", "baseline.cu"):
        text = (task.folder / name).read_text()
        (folder / name).write_text(text + ("\n# changed\n" if name == "reference.py" else ""))
    changed = load_task(folder)
    assert changed.fingerprint != task.fingerprint
    assert store.get(changed, envelope_of(H200_ENV)) is None
    assert [r.task_fingerprint for r in store.records(changed, any_version=True)] == [task.fingerprint]


def test_only_a_faster_offer_replaces_the_record(task, tuned, store):
    env = envelope_of(H200_ENV)
    assert store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0))
    slower = tuned.with_knobs({"TILE": 16})
    assert not store.offer(task, slower, timed_result(task, slower, 2.5, 3.0))
    assert store.get(task, env).knobs == {"TILE": 32}
    faster = tuned.with_knobs({"TILE": 8})
    assert store.offer(task, faster, timed_result(task, faster, 1.5, 3.0))
    assert store.get(task, env).knobs == {"TILE": 8}
    assert [p.suffix for p in store.root.rglob("*") if p.is_file() and p.name != ".lock"] == [".json"]


def test_results_that_are_not_correct_timed_gpu_measurements_are_not_stored(task, tuned, store):
    assert not store.offer(task, tuned, failed_result(task, tuned, Status.wrong))
    assert not store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0, env={"gpu": None}))
    assert not store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0, env={**H200_ENV, "simulated": True}))
    other = load_task("vector_add")
    assert not store.offer(other, tuned, timed_result(task, tuned, 2.0, 3.0))
    assert store.records(task) == []


def test_for_gpu_picks_the_fastest_record_of_that_model_across_drivers(task, tuned, store):
    store.offer(task, tuned, timed_result(task, tuned, 2.0, 3.0))
    newer = tuned.with_knobs({"TILE": 8})
    store.offer(task, newer, timed_result(task, newer, 1.2, 3.0, env={**H200_ENV, "driver": "580.10"}))
    assert store.for_gpu(task, "NVIDIA H200").knobs == {"TILE": 8}
    assert store.for_gpu(task, "NVIDIA A100") is None


def _kw(*args, cache: Path):
    env = {**os.environ, "KERNELWRIGHT_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=110,
                          cwd=ROOT, env=env)


def test_cli_exports_the_best_kernel_for_a_named_gpu(task, tuned, tmp_path):
    BestStore(tmp_path / "cache" / "best").offer(task, tuned, timed_result(task, tuned, 2.0, 3.0))
    out = _kw("best", "sgemm", "--gpu", "NVIDIA H200", cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    assert parse_candidate(out.stdout).knob_values == {"TILE": 32}
    assert "1.500x" in out.stderr
    target = tmp_path / "best.cu"
    written = _kw("best", "sgemm", "--gpu", "NVIDIA H200", "--out", str(target), cache=tmp_path / "cache")
    assert written.returncode == 0 and parse_candidate(target.read_text()).flags == ("--ptxas-options=-O2",)


def test_cli_says_there_is_none_with_exit_1(tmp_path):
    out = _kw("best", "softmax", "--gpu", "NVIDIA H200", cache=tmp_path / "cache")
    assert out.returncode == 1
    assert "no best-known kernel for softmax on GPU 'NVIDIA H200'" in out.stderr


def test_cli_for_this_machine_says_there_is_none_or_no_gpu_with_exit_1(tmp_path):
    out = _kw("best", "vector_add", cache=tmp_path / "cache")
    assert out.returncode == 1
    assert "no GPU found on this machine" in out.stderr or "no best-known kernel for vector_add" in out.stderr


def test_cli_bad_sizes_are_exit_2(tmp_path):
    out = _kw("best", "softmax", "--sizes", "rows=4", cache=tmp_path / "cache")
    assert out.returncode == 2 and "--sizes must set exactly rows, cols" in out.stderr
