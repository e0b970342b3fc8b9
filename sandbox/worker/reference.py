"""The reference role: regenerate a trial's inputs from its seed, compute the trusted reference and compare
every saved output of the candidate with it. It never loads candidate code."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..compare import compare
from ..task_reference import ReferenceOutputError, checked_outputs, load_reference
from .harness import Harness, reference_inputs


def run_compare(req: dict) -> dict:
    """Reference role: regenerate the inputs from the seed, compute the reference, compare each run."""
    xp = _xp(req.get("backend", "cupy"))
    t0 = time.perf_counter()
    module = load_reference(Path(req["task_folder"]) / "reference.py")
    ins = reference_inputs(xp, req["inputs"], req["seed"])
    if req.get("input_hashes") and xp.__name__ == "cupy":
        h = Harness(req["arch"], req["harness_cubin"])
        for name, expected in req["input_hashes"].items():
            if int(h.hash_array(ins[name], req["hash_seed"]).get()[0]) != expected:
                return {"ok": False, "error": f"regenerated input {name!r} differs from the worker's (infrastructure fault)"}
    try:
        returned = module.reference(xp, **ins, **req["sizes"], **req["scalars"])
    except Exception as exc:  # the task's own code failed: a task error, with the exception's words
        return {"ok": False, "task_error": True, "error": f"{module.__file__}: reference() raised {type(exc).__name__}: {exc}"}
    try:
        expected = checked_outputs(xp, returned, req["outputs"])
    except ReferenceOutputError as exc:
        return {"ok": False, "task_error": True, "error": f"{module.__file__}: {exc}"}
    checks = []
    for spec in req["outputs"]:
        name = spec["name"]
        ref = expected[name]
        atol, rtol = req["tolerance"][name]
        for run in req["runs"]:
            got = xp.asarray(_load(run["files"][name]))
            stats = compare(xp, got, ref, atol, rtol)
            checks.append(dict(output=name, run=run["label"], **stats))
    return {"ok": True, "checks": checks, "seconds": time.perf_counter() - t0}


def _load(path: str):
    """A saved output, memory-mapped (read once, straight from the page cache); empty arrays cannot be mapped."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:
        return np.load(path, allow_pickle=False)


def _xp(backend: str):
    if backend == "cupy":
        import cupy

        return cupy
    return np
