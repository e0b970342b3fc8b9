"""Screening's orchestration without a GPU: batches, splitting around a crash or a hang, statistics."""

from __future__ import annotations

import dataclasses
import types

import numpy as np

import pytest

from sandbox import load_candidate, load_task
from sandbox.host.pool import WorkerDied, WorkerTimeout
from sandbox.host.screener import Screener
from sandbox.judging.result import Cost, Status
from sandbox.wire import HarnessCode, Screen, ScreenBatch, ScreenedRun, ScreenReady, ScreenSetup, WorkerError


class _Compiled:
    def __init__(self):
        self.status = Status.compiled
        self.cost = Cost(compile_s=0.01)
        self.error = ""


def _stub(monkeypatch, behaviour: dict[int, str]):
    """A Screener whose GPU worker is simulated: candidate i crashes, hangs or runs 1/(i+1) as fast."""
    calls = []
    task = load_task("vector_add")
    base = load_candidate(task.baseline_path)
    monkeypatch.setattr("sandbox.host.screener.resolve", lambda task, cand, info, sizes: {"launches": []})
    worker = types.SimpleNamespace(alive=False, started=0, setups=[])
    sb = Screener(build=lambda t, c: (_Compiled(), None, c.label.encode()), baseline=lambda t: (base, None, b"base"),
                  gpu=worker, harness=HarnessCode("sm_90", b""), setup_timeout_s=120.0)

    def call(req, timeout):
        if not worker.alive:  # as WorkerProcess.call: a dead worker is started again
            worker.alive, worker.started = True, worker.started + 1
        if isinstance(req, ScreenSetup):
            worker.setups.append(worker.started)
            return ScreenReady(req.setup_id, 0.01)
        labels = [int(c.cubin.decode()) for c in req.candidates]
        calls.append(labels)
        assert worker.setups[-1] == worker.started, "a batch reached a worker that was not set up"
        for i in labels:
            if behaviour.get(i) in ("crash", "hang"):
                worker.alive = False
                if behaviour[i] == "crash":
                    raise WorkerDied("gpu worker died (exit code 3)", "illegal address")
                raise WorkerTimeout("gpu worker passed its limit")
        results = []
        for c in req.candidates:
            i = int(c.cubin.decode())
            if behaviour.get(i) == "wrong":
                results.append(ScreenedRun(key=c.key, status="wrong", error="first run: output 'c' differs", gpu_s=0.1))
                continue
            base_ms = [1.0 + 0.001 * r for r in range(req.rounds)]
            results.append(ScreenedRun(key=c.key, status="ok", error="", gpu_s=0.1, baseline_samples=base_ms,
                                       samples=[m / (i + 1) for m in base_ms]))
        return ScreenBatch(results)

    worker.call_ok = worker.call = call
    cands = [dataclasses.replace(base, label=str(i)) for i in range(10)]
    return sb, task, cands, calls, worker


def test_screen_isolates_a_crash_and_a_hang_and_keeps_every_other_result(monkeypatch):
    sb, task, cands, calls, worker = _stub(monkeypatch, {3: "crash", 8: "hang", 5: "wrong"})
    found = sb.screen(task, cands, rounds=7, batch=4)
    assert [s.status for s in found] == ["ok", "ok", "ok", "crashed", "ok", "wrong", "ok", "ok", "timeout", "ok"]
    assert calls[:3] == [[0, 1, 2, 3], [0, 1], [2, 3]]  # the first batch split in halves until 3 is alone
    assert [3] in calls and [8] in calls
    assert worker.setups == list(range(1, worker.started + 1)), "set up once per worker process, no more"
    assert worker.started == 1 + 3 + 2  # crashes of [0-3], [2, 3], [3]; hangs of [8, 9], [8]
    assert found[5].error.startswith("first run")
    assert "illegal" not in found[3].error and found[3].error.startswith("gpu worker died")
    for i in (0, 1, 4, 9):
        assert found[i].relative == pytest.approx(1 / (i + 1))
        lo, hi = found[i].relative_ci
        assert lo <= found[i].relative <= hi
        assert found[i].ms == pytest.approx(found[i].baseline_ms / (i + 1))
        assert len(found[i].samples) == 7


def test_screen_refuses_too_few_rounds(monkeypatch):
    sb, task, cands, _, _ = _stub(monkeypatch, {})
    with pytest.raises(ValueError, match="rounds must be at least 5"):
        sb.screen(task, cands, rounds=3)


def test_a_batch_goes_to_the_gpu_once_the_next_compile_is_still_running_and_the_set_up_comes_first(monkeypatch):
    sb, task, cands, calls, worker = _stub(monkeypatch, {})
    events = []
    build = sb.build
    sb.build = lambda t, c: (events.append(("build", c.label, len(worker.setups))), build(t, c))[1]
    compiling = {"2", "7"}                       # compiles still running when the screener reaches them
    sb.ready = lambda c: c.label not in compiling
    found = sb.screen(task, cands, rounds=6, batch=4)
    assert calls == [[0, 1], [2, 3, 4, 5], [6], [7, 8, 9]]
    assert [s.status for s in found] == ["ok"] * 10
    assert events[0] == ("build", "0", 1), "the screening state is set up before the first compile is awaited"
    sb.ready = None                              # no way to tell: full batches, as before
    calls.clear()
    sb.screen(task, cands, rounds=6, batch=4)
    assert calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_screening_state_is_set_up_once_per_task_and_again_when_the_worker_lost_it(monkeypatch):
    sb, task, cands, calls, worker = _stub(monkeypatch, {})
    sb.screen(task, cands[:3], rounds=6)
    sb.screen(task, cands[3:6], rounds=6)
    assert worker.setups == [1] and sb.setups == 1          # the second call reuses the first one's inputs
    real = worker.call

    def lost_once(req, timeout):  # the worker ran another stage in between: it answers that the state is gone
        if isinstance(req, Screen) and not getattr(lost_once, "done", False):
            lost_once.done = True
            return WorkerError("no screening set up with this id", setup_lost=True)
        return real(req, timeout)

    worker.call = worker.call_ok = lost_once
    found = sb.screen(task, cands[6:8], rounds=6)
    assert [s.status for s in found] == ["ok", "ok"] and sb.setups == 2


def test_the_best_ratio_so_far_is_passed_on_as_the_bar_for_stopping_early(monkeypatch):
    sb, task, cands, calls, worker = _stub(monkeypatch, {})
    seen = []
    real = worker.call

    def record(req, timeout):
        if isinstance(req, Screen):
            seen.append(req.stop_above)
        return real(req, timeout)

    worker.call = worker.call_ok = record
    sb.screen(task, cands[:2], rounds=6, batch=1)
    sb.screen(task, cands[2:3], rounds=6)
    sb.screen(task, cands[3:4], rounds=6, best=0.1)
    # no bar at first; then the first candidate's ratio (1.0) times the margin; then the best of the
    # earlier call (candidate 1: 0.5) is remembered; a better ratio given by the caller wins
    assert seen[0] is None and seen[1] == pytest.approx(1.1)
    assert seen[2] == pytest.approx(0.55) and seen[3] == pytest.approx(0.11)


def test_screening_stops_a_candidate_once_settled_or_surely_slower_and_never_before_its_minimum():
    from sandbox.judging.stats import screening_stop

    steady = [1.0, 1.001, 0.999, 1.0, 1.002, 0.998, 1.0]
    assert screening_stop(steady[:5], 6, 0.01, None) == ""           # too few rounds for an interval
    assert screening_stop(steady[:6], 6, 0.01, None) == "settled"
    noisy = [1.0, 1.3, 0.8, 1.2, 0.9, 1.1, 1.05]
    assert screening_stop(noisy, 6, 0.01, None) == ""
    slow = [1.5, 1.6, 1.55, 1.7, 1.45, 1.5]
    assert screening_stop(slow, 6, 0.0, 1.1) == "slower"             # every ratio above the bar
    assert screening_stop(slow, 6, 0.0, 1.5) == ""                   # the interval reaches below the bar


def test_a_candidate_far_slower_than_the_bar_stops_after_three_rounds_by_the_measured_noise():
    from sandbox.judging.stats import NOISE_FLOOR, pair_noise, screening_stop

    quiet = pair_noise([1.0, 1.002, 0.999, 1.001, 0.998, 1.0, 1.003, 0.997])
    assert quiet == NOISE_FLOOR                                         # never below the floor
    loud = pair_noise([1.0, 1.1, 0.9, 1.05, 0.95, 1.2, 0.85, 1.0])
    assert 0.05 < loud < 0.2
    assert pair_noise([1.0, 1.0, 1.0, 1.0, 5.0]) == NOISE_FLOOR         # one outlier does not set the spread
    far = [2.0, 2.1, 1.9]
    assert screening_stop(far[:2], 6, 0.01, 1.1, quiet) == ""           # two rounds are never enough
    assert screening_stop(far, 6, 0.01, 1.1, quiet) == "slower"
    assert screening_stop(far, 6, 0.01, 1.1, None) == ""                # no measured noise: the minimum holds
    assert screening_stop(far, 6, 0.01, None, quiet) == ""              # no bar yet
    assert screening_stop([1.6, 1.7, 1.65], 6, 0.01, 1.1, quiet) == "slower"
    assert screening_stop([1.6, 1.7, 1.65], 6, 0.01, 1.1, loud) == ""   # above the bar, but not by 4x this noise
    assert screening_stop([1.2, 1.25, 1.15], 6, 0.01, 1.1, quiet) == "slower"
    assert screening_stop([1.2, 1.25, 1.11], 6, 0.01, 1.1, quiet) == ""  # one round within 4x the noise of the bar


class _HostArray(np.ndarray):
    """NumPy standing in for CuPy: arrays that ``.get()`` themselves."""

    def get(self):
        return np.asarray(self)


class _Buffer:
    def __init__(self, lo_ok=True, hi_ok=True, digest=7):
        self.lo_ok, self.hi_ok, self.digest = lo_ok, hi_ok, digest

    def guards_intact(self):
        return (np.array(self.lo_ok).view(_HostArray), np.array(self.hi_ok).view(_HostArray))

    def data_hash(self, seed):
        return np.array([self.digest], dtype=np.uint64).view(_HostArray)


def test_violations_name_every_broken_guard_band_and_modified_input_from_one_transfer():
    from sandbox.worker.checks import violations

    cp = types.SimpleNamespace(stack=lambda xs: np.stack(xs).view(_HostArray), uint64=np.uint64,
                               concatenate=lambda xs: np.concatenate(xs).view(_HostArray))
    h = types.SimpleNamespace(cp=cp, bands_broken=lambda buffers: np.array(
        [not ok for b in buffers for ok in b.guards_intact()], dtype=np.uint64).view(_HostArray))
    groups = {"input": {"x": _Buffer(digest=9), "y": _Buffer()}, "output": {"out": _Buffer(hi_ok=False)},
              "scratch": {"tmp": _Buffer(lo_ok=False)}}
    before = {"x": np.array([8], dtype=np.uint64).view(_HostArray), "y": np.array([7], dtype=np.uint64).view(_HostArray)}
    assert violations(h, groups, before, seed=1) == [
        "out-of-bounds write: the guard band above output 'out' was overwritten",
        "out-of-bounds write: the guard band below scratch 'tmp' was overwritten",
        "input 'x' was modified by the kernel (inputs are read-only)"]
    clean = {"input": {"y": _Buffer()}, "output": {"out": _Buffer()}, "scratch": {}}
    assert violations(h, clean, {"y": before["y"]}, seed=1) == []
