"""The reference role: regenerate a trial's inputs from its seed, compute the trusted reference and compare
every output of the candidate handed over with it. It never loads candidate code.

Outputs arrive as ``.npy`` files, or, for large ones where the GPU worker and this one share the device, as
CUDA IPC handles to copies the GPU worker keeps until its next request: read device to device, with no trip
through host memory or a file. ``run_compares`` takes every trial of a stage in one request and stops at the
first that fails; a trial's reference is kept for the next one with the same inputs (the timing stage's
launches compared in full often share the last round's inputs)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..judging.compare import compare
from ..tasks.dtypes import to_compute
from ..tasks.task_reference import ReferenceOutputError, checked_outputs, load_reference
from ..wire import (CompareTask, CompareTrial, Compared, Compares, HarnessCode, OutputCheck, OutputsCompared,
                    TrialChecks, WorkerError)
from .harness import Harness, reference_inputs
from .stopwatch import Stopwatch


class ReferenceCache:
    """The last reference computed (key -> expected outputs), and the harness that hashes regenerated inputs."""

    def __init__(self):
        self.key, self.expected, self.harness = None, None, None

    def hasher(self, code: HarnessCode) -> Harness:
        if self.harness is None:
            self.harness = Harness(code.arch, code.cubin)
        return self.harness


def run_compares(req: Compares, cache: ReferenceCache | None = None) -> Compared | WorkerError:
    """Every trial of ``req`` with what they share (``req.task``); stops after the first trial with a failed
    check."""
    cache = cache or ReferenceCache()
    t0 = time.perf_counter()
    done, watch = [], Stopwatch()
    for trial in req.trials:
        reply = run_compare(req.task, trial, cache)
        if not reply.ok:
            return reply
        watch.add(reply.split_s)
        done.append(TrialChecks(trial.label, reply.checks))
        if not all(c.passed for c in reply.checks):
            break
    seconds = time.perf_counter() - t0
    return Compared(done, seconds, watch.report(seconds))


def run_compare(task: CompareTask, trial: CompareTrial,
                cache: ReferenceCache | None = None) -> OutputsCompared | WorkerError:
    """Reference role: regenerate the inputs from the seed, compute the reference, compare each run."""
    xp = _xp(task.backend)
    t0 = time.perf_counter()
    watch = Stopwatch(xp.cuda.get_current_stream().synchronize if xp.__name__ == "cupy" else None)
    cache = cache or ReferenceCache()
    key = json.dumps([xp.__name__, task.task_folder, trial.sizes, trial.inputs, trial.seed, task.scalars],
                     sort_keys=True, default=str)
    if cache.key == key:
        expected = cache.expected
    else:
        cache.key = cache.expected = None  # the last reference's memory goes before the next is computed
        module = load_reference(Path(task.task_folder) / "reference.py")  # only for a reference not cached
        with watch("inputs"):
            ins = reference_inputs(xp, trial.inputs, trial.seed)
            if trial.input_hashes and xp.__name__ == "cupy":
                h = cache.hasher(task.harness)
                for name, digest in trial.input_hashes.items():
                    if int(h.hash_array(ins[name], task.hash_seed).get()[0]) != digest:
                        return WorkerError(f"regenerated input {name!r} differs from the worker's "
                                           "(infrastructure fault)")
        try:
            with watch("reference"):
                values = {s["name"]: to_compute(xp, ins[s["name"]], s["dtype"]) for s in trial.inputs}
                returned = module.reference(xp, **values, **trial.sizes, **task.scalars)
        except Exception as exc:  # the task's own code failed: a task error, with the exception's words
            return WorkerError(f"{module.__file__}: reference() raised {type(exc).__name__}: {exc}", task_error=True)
        try:
            with watch("reference"):
                expected = checked_outputs(xp, returned, trial.outputs)
        except ReferenceOutputError as exc:
            return WorkerError(f"{module.__file__}: {exc}", task_error=True)
        del ins, values, returned
        cache.key, cache.expected = key, expected
    checks = []
    for spec in trial.outputs:
        name = spec["name"]
        ref = expected[name]
        tol = task.tolerance[name]
        for run in trial.runs:
            with watch("outputs"):
                got = _fetch(xp, run.files[name])
            with watch("compare"):
                stats = compare(xp, to_compute(xp, got, spec["dtype"]), ref, tol.atol, tol.rtol, tol.spread)
            checks.append(OutputCheck(output=name, run=run.label, **stats))
    seconds = time.perf_counter() - t0
    return OutputsCompared(checks, seconds, dict(watch.seconds))


def _fetch(xp, entry):
    """An output handed over: a CUDA IPC handle (copied here, then closed), or a ``.npy`` file."""
    return open_handed(xp, entry) if isinstance(entry, dict) else xp.asarray(_load(entry))


def _load(path: str):
    """A saved output, memory-mapped (read once, straight from the page cache); empty arrays cannot be mapped."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:
        return np.load(path, allow_pickle=False)


def open_handed(cp, entry: dict):
    """A copy, in this process, of a device array another process handed over by a CUDA IPC handle."""
    dtype = np.dtype(entry["dtype"])
    nbytes = int(np.prod(entry["shape"], dtype=np.int64)) * dtype.itemsize
    ptr = cp.cuda.runtime.ipcOpenMemHandle(entry["ipc"])
    try:
        mem = cp.cuda.UnownedMemory(ptr, nbytes, None)
        out = cp.ndarray(tuple(entry["shape"]), dtype, cp.cuda.MemoryPointer(mem, 0)).copy()
        cp.cuda.get_current_stream().synchronize()   # the copy is done before the mapping goes
        return out
    finally:
        cp.cuda.runtime.ipcCloseMemHandle(ptr)


def _xp(backend: str):
    if backend == "cupy":
        import cupy

        return cupy
    return np
