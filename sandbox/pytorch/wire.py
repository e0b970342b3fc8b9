"""What crosses between the host and a process running problem code: JSON, with NumPy arrays as
``{"__array__": dtype, "shape": [...], "data": base64}``. Never pickle: the host must not run code that a
hostile problem wrote into its reply."""

from __future__ import annotations

import base64
import json

import numpy as np

ARRAY = "__array__"


def _default(value):
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        return {ARRAY: a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} cannot cross to the host")


def _hook(obj: dict):
    if ARRAY in obj:
        dtype = np.dtype(obj[ARRAY])
        if dtype.hasobject:
            raise ValueError("an object array cannot cross to the host")
        return np.frombuffer(base64.b64decode(obj["data"]), dtype=dtype).reshape(obj["shape"]).copy()
    return obj


def dumps(value) -> bytes:
    return json.dumps(value, default=_default, allow_nan=True).encode()


def loads(data: bytes):
    return json.loads(data.decode(), object_hook=_hook)
