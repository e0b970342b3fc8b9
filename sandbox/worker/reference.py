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

from ..compare import compare
from ..task_reference import ReferenceOutputError, checked_outputs, load_reference
from ..dtypes import to_compute
from .harness import Harness, reference_inputs
from .stopwatch import Stopwatch


class ReferenceCache:
    """The last reference computed (key -> expected outputs), and the harness that hashes regenerated inputs."""

    def __init__(self):
        self.key, self.expected, self.harness = None, None, None

    def hasher(self, req: dict) -> Harness:
        if self.harness is None:
            self.harness = Harness(req["arch"], req["harness_cubin"])
        return self.harness


def run_compares(req: dict, cache: ReferenceCache | None = None) -> dict:
    """Every trial of ``req["trials"]`` (each: label, sizes, inputs, outputs, seed, runs, input_hashes), with
    the fields they share at the top of ``req``; stops after the first trial with a failed check."""
    cache = cache or ReferenceCache()
    shared = {k: v for k, v in req.items() if k != "trials"}
    t0 = time.perf_counter()
    done, watch = [], Stopwatch()
    for trial in req["trials"]:
        reply = run_compare({**shared, **trial}, cache)
        if not reply["ok"]:
            return reply
        watch.add(reply["split_s"])
        done.append(dict(label=trial["label"], checks=reply["checks"]))
        if not all(c["passed"] for c in reply["checks"]):
            break
    seconds = time.perf_counter() - t0
    return {"ok": True, "trials": done, "seconds": seconds, "split_s": watch.report(seconds)}


def run_compare(req: dict, cache: ReferenceCache | None = None) -> dict:
    """Reference role: regenerate the inputs from the seed, compute the reference, compare each run."""
    xp = _xp(req.get("backend", "cupy"))
    t0 = time.perf_counter()
    watch = Stopwatch(xp.cuda.get_current_stream().synchronize if xp.__name__ == "cupy" else None)
    cache = cache or ReferenceCache()
    key = json.dumps([xp.__name__, req["task_folder"], req["sizes"], req["inputs"], req["seed"], req["scalars"]],
                     sort_keys=True, default=str)
    if cache.key == key:
        expected = cache.expected
    else:
        cache.key = cache.expected = None  # the last reference's memory goes before the next is computed
        module = load_reference(Path(req["task_folder"]) / "reference.py")  # only for a reference not cached
        with watch("inputs"):
            ins = reference_inputs(xp, req["inputs"], req["seed"])
            if req.get("input_hashes") and xp.__name__ == "cupy":
                h = cache.hasher(req)
                for name, digest in req["input_hashes"].items():
                    if int(h.hash_array(ins[name], req["hash_seed"]).get()[0]) != digest:
                        return {"ok": False,
                                "error": f"regenerated input {name!r} differs from the worker's (infrastructure fault)"}
        try:
            with watch("reference"):
                values = {s["name"]: to_compute(xp, ins[s["name"]], s["dtype"]) for s in req["inputs"]}
                returned = module.reference(xp, **values, **req["sizes"], **req["scalars"])
        except Exception as exc:  # the task's own code failed: a task error, with the exception's words
            return {"ok": False, "task_error": True,
                    "error": f"{module.__file__}: reference() raised {type(exc).__name__}: {exc}"}
        try:
            with watch("reference"):
                expected = checked_outputs(xp, returned, req["outputs"])
        except ReferenceOutputError as exc:
            return {"ok": False, "task_error": True, "error": f"{module.__file__}: {exc}"}
        del ins, values, returned
        cache.key, cache.expected = key, expected
    checks = []
    for spec in req["outputs"]:
        name = spec["name"]
        ref = expected[name]
        atol, rtol, spread = req["tolerance"][name]
        for run in req["runs"]:
            with watch("outputs"):
                got = _fetch(xp, run["files"][name])
            with watch("compare"):
                stats = compare(xp, to_compute(xp, got, spec["dtype"]), ref, atol, rtol, spread)
            checks.append(dict(output=name, run=run["label"], **stats))
    seconds = time.perf_counter() - t0
    return {"ok": True, "checks": checks, "seconds": seconds, "split_s": dict(watch.seconds)}


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
