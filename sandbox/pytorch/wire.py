"""What crosses between the host and a process running problem code: a ``Call`` (one line of JSON on the command
pipe) and its ``Reply`` (JSON in the call's folder), with NumPy arrays as
``{"__array__": dtype, "shape": [...], "data": base64}``. Never pickle: the host must not run code that a
hostile problem wrote into its reply."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field

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


@dataclass
class Call:
    """One call of a sandbox function (``module:function``) in a fresh confined child: its folder (home), the
    arguments, and the paths it may read and write beside the defaults."""
    id: int
    home: str
    target: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)

    def to_line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> Call:
        raw = json.loads(line)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


@dataclass
class Reply:
    """A call's outcome: ``ok`` with its result, or the kind of failure (setup, exit, refused, raised) and its
    first line; with the confinement the call ran under."""
    ok: bool
    result: object = None
    kind: str = ""
    error: str = ""
    confinement: dict = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return dumps(asdict(self))

    @classmethod
    def from_bytes(cls, data: bytes) -> Reply:
        """ValueError where the bytes are not a reply."""
        try:
            raw = loads(data)
        except (ValueError, KeyError, TypeError):
            raise ValueError("not JSON") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("ok"), bool):
            raise ValueError("no ok field")
        return cls(ok=raw["ok"], result=raw.get("result"), kind=str(raw.get("kind") or ""),
                   error=str(raw.get("error") or ""),
                   confinement=raw.get("confinement") if isinstance(raw.get("confinement"), dict) else {})
