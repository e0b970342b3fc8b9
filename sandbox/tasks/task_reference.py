"""A task's ``reference.py``: imported as trusted code, and what its functions return checked.

``reference(xp, **inputs, **sizes, **scalars)`` must return a dict with one array per declared
output, of the declared shape, in a floating type at least as precise as the output for floating-point
outputs (float64 where rounding matters: it is the yardstick) and an integer type for integer ones. Anything else is a ``ReferenceOutputError`` naming the output and what was
expected, never a TypeError deep inside a comparison.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType

from .task_spec import TaskError


class ReferenceOutputError(TaskError):
    """reference() or vendor() returned something that is not the task's outputs."""


def load_reference(path: Path) -> ModuleType:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    spec = importlib.util.spec_from_file_location(f"kernelwright_reference_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken reference is a task error, reported with its file
        raise TaskError(f"{path}: cannot import: {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(module, "reference", None)):
        raise TaskError(f"{path}: reference: expected a function reference(xp, **arrays_and_sizes)")
    return module


def checked_outputs(xp, returned, outputs: list[dict], function: str = "reference()", exact_dtype: bool = False) -> dict:
    """``returned`` as {name: array}, after checking it against ``outputs`` (dicts with name, dtype, shape).

    The reference must give floating-point outputs at least as precise as declared and integer outputs as
    integers whose values fit the declared type; a vendor
    implementation (``exact_dtype``) must give each output in the task's own dtype.
    """
    import numpy as np

    if not isinstance(returned, dict):
        raise ReferenceOutputError(f"{function} returned {type(returned).__name__}, expected a dict {{output name: array}} "
                             f"with {', '.join(repr(o['name']) for o in outputs)}")
    declared = [o["name"] for o in outputs]
    missing = [n for n in declared if n not in returned]
    extra = sorted(str(k) for k in returned if k not in declared)
    if missing or extra:
        raise ReferenceOutputError(f"{function} returned outputs {sorted(map(str, returned))}, the task declares {declared}"
                             + (f" (missing: {missing})" if missing else "") + (f" (unknown: {extra})" if extra else ""))
    out = {}
    for spec in outputs:
        name, value = spec["name"], returned[spec["name"]]
        if value is None:
            raise ReferenceOutputError(f"{function} output {name!r} is None, expected an array")
        try:
            array = xp.asarray(value)
        except Exception as exc:
            raise ReferenceOutputError(f"{function} output {name!r} is not an array ({type(value).__name__}: {exc})") from None
        if tuple(array.shape) != tuple(spec["shape"]):
            raise ReferenceOutputError(f"{function} output {name!r} has shape {tuple(array.shape)}, the task says {tuple(spec['shape'])}")
        want = np.dtype("float32" if spec["dtype"] == "bfloat16" else spec["dtype"])  # bfloat16: its values
        got = np.dtype(array.dtype)
        if exact_dtype:
            ok, expected = got == want, spec["dtype"]
        elif want.kind == "f":
            ok = got.kind == "f" and got.itemsize >= want.itemsize
            expected = f"a floating type at least as precise as {spec['dtype']} (compute the reference in float64)"
        else:
            ok, expected = got.kind in "iub", "an integer type"
        if not ok:
            raise ReferenceOutputError(f"{function} output {name!r} is {got.name}, expected {expected}")
        if want.kind in "iu" and array.size:
            lo, hi, info = int(array.min()), int(array.max()), np.iinfo(want)
            if lo < info.min or hi > info.max:
                raise ReferenceOutputError(f"{function} output {name!r} holds values in [{lo}, {hi}], beyond "
                                           f"{spec['dtype']}'s range: no kernel could match it")
        out[name] = array
    return out
