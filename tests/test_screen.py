"""Screening's orchestration without a GPU: batches, splitting around a crash or a hang, statistics."""

from __future__ import annotations

import dataclasses
import types

import pytest

from sandbox import load_candidate, load_task
from sandbox.host.pool import WorkerDied, WorkerTimeout
from sandbox.host.screener import Screener
from sandbox.result import Cost, Status


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
                  gpu=worker, harness={}, setup_timeout_s=120.0)

    def call(req, timeout):
        if not worker.alive:  # as WorkerProcess.call: a dead worker is started again
            worker.alive, worker.started = True, worker.started + 1
        if req["op"] == "screen_setup":
            worker.setups.append(worker.started)
            return {"ok": True}
        labels = [int(c["cubin"].decode()) for c in req["candidates"]]
        calls.append(labels)
        assert worker.setups[-1] == worker.started, "a batch reached a worker that was not set up"
        for i in labels:
            if behaviour.get(i) in ("crash", "hang"):
                worker.alive = False
                if behaviour[i] == "crash":
                    raise WorkerDied("gpu worker died (exit code 3)", "illegal address")
                raise WorkerTimeout("gpu worker passed its limit")
        results = []
        for c in req["candidates"]:
            i = int(c["cubin"].decode())
            if behaviour.get(i) == "wrong":
                results.append(dict(key=c["key"], status="wrong", error="first run: output 'c' differs", gpu_s=0.1,
                                    samples=[], baseline_samples=[]))
                continue
            base_ms = [1.0 + 0.001 * r for r in range(req["rounds"])]
            results.append(dict(key=c["key"], status="ok", error="", gpu_s=0.1, baseline_samples=base_ms,
                                samples=[m / (i + 1) for m in base_ms]))
        return {"ok": True, "results": results}

    worker.call_ok = call
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
