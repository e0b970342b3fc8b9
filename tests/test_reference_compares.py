"""The reference worker's side of a stage's comparisons without a GPU (NumPy backend): one request for every
trial, stopping at the first that fails, one reference for launches that share their inputs; and how the
sandbox settles whether outputs travel by CUDA IPC handle."""

from __future__ import annotations

import types

import numpy as np
import pytest

from sandbox import load_task
from sandbox.host.referee import Referee
from sandbox.tasks.inputs import input_specs, output_specs
from sandbox.wire import CompareTask, CompareTrial, Compares, HarnessCode, IpcSent, IpcSum, RunOutputs, WorkerError, tolerances
from sandbox.worker import reference
from sandbox.worker.harness import reference_inputs

pytestmark = pytest.mark.timeout(120)


def _trial(task, tmp_path, label, seed, wrong=False):
    sizes = {"n": 1000}
    specs = input_specs(task, sizes, 0)
    ins = reference_inputs(np, specs, seed)
    out = (ins["a"] + ins["b"]).astype(np.float32)
    if wrong:
        out[7] += 1.0
    path = tmp_path / f"{label}.npy"
    np.save(path, out)
    return CompareTrial(label=label, sizes=task.env(sizes), inputs=specs, outputs=output_specs(task, sizes), seed=seed,
                        runs=[RunOutputs("run1", {"c": str(path)})])


def test_one_request_compares_every_trial_stops_at_the_first_failure_and_reuses_a_reference(tmp_path, monkeypatch):
    task = load_task("vector_add")
    computed = []
    module = reference.load_reference(task.folder / "reference.py")
    real = module.reference
    monkeypatch.setattr(module, "reference", lambda xp, **kw: computed.append(1) or real(xp, **kw))
    monkeypatch.setattr(reference, "load_reference", lambda path: module)
    trials = [_trial(task, tmp_path, "a", 1), _trial(task, tmp_path, "b", 2), _trial(task, tmp_path, "b2", 2),
              _trial(task, tmp_path, "c", 3, wrong=True), _trial(task, tmp_path, "d", 4)]
    req = Compares(CompareTask(task_folder=str(task.folder), scalars={}, tolerance=tolerances(task), backend="numpy"),
                   trials)
    reply = reference.run_compares(req)
    assert reply.ok and [t.label for t in reply.trials] == ["a", "b", "b2", "c"]   # d is never compared
    assert [t.checks[0].passed for t in reply.trials] == [True, True, True, False]
    assert reply.trials[3].checks[0].first_mismatch["index"] == [7]
    assert len(computed) == 3                     # b and b2 share their inputs: one reference for both
    split = reply.split_s                         # where the worker's seconds went, for bench/sandbox_bench.py
    assert {"inputs", "reference", "outputs", "compare", "other"} == set(split)
    assert sum(split.values()) == pytest.approx(reply.seconds, abs=1e-3)


def _workers(gpu_reply, ref_reply):
    gpu = types.SimpleNamespace(call_ok=lambda req, timeout: gpu_reply)
    ref = types.SimpleNamespace(call=lambda req, timeout: ref_reply)
    return Referee(gpu, ref, HarnessCode("sm_90", b""), 60)


def test_outputs_travel_by_ipc_handle_only_where_the_probe_reads_the_pattern_back():
    entry = {"ipc": b"x" * 64, "dtype": "<u4", "shape": [4]}
    assert _workers(IpcSent(entry, 6), IpcSum(6)).ipc is True
    wrong = _workers(IpcSent(entry, 6), IpcSum(5))
    assert wrong.ipc is False and "differs" in wrong.ipc_error
    refused = _workers(IpcSent(None, error="CUDARuntimeError: not supported"), WorkerError("unused"))
    assert refused.ipc is False and "not supported" in refused.ipc_error


def test_a_probe_started_ahead_runs_once_on_its_own_thread_and_the_first_ipc_waits_for_it():
    import threading

    entry = {"ipc": b"x" * 64, "dtype": "<u4", "shape": [4]}
    release, threads, calls = threading.Event(), [], []

    def gpu_call(req, timeout):
        threads.append(threading.current_thread().name)
        calls.append(req)
        release.wait(10)          # the GPU worker busy loading the harness: the caller goes on meanwhile
        return IpcSent(entry, 6)

    referee = Referee(types.SimpleNamespace(call_ok=gpu_call), types.SimpleNamespace(call=lambda req, t: IpcSum(6)),
                      HarnessCode("sm_90", b""), 60)
    referee.probe_ahead()
    referee.probe_ahead()                             # a second start while the first runs starts nothing
    assert referee._ipc is None                       # returned at once: the probe is still under way
    release.set()
    assert referee.ipc is True and referee.ipc is True
    assert len(calls) == 1 and threads == ["ipc-probe"]
