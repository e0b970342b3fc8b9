"""The element types a task may declare, with their NumPy and C spellings.

bfloat16 has no NumPy (or CuPy) type: its arrays are held as their uint16 bit patterns (the upper half of
the float32 with the same value), which is exactly what a ``__nv_bfloat16`` buffer holds on the device.
``from_float64`` rounds to them (round to nearest even, as ``__float2bfloat16_rn`` does) and ``to_compute``
reads them back as float32, exactly. Everything that computes on values (a reference, a comparison) goes
through ``to_compute``; everything that moves bytes (buffers, hashes, guards) takes the bits as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def is_cupy(xp) -> bool:
    """Whether the array backend ``xp`` is CuPy (the GPU), not NumPy."""
    return getattr(xp, "__name__", "") == "cupy"


@dataclass(frozen=True)
class DType:
    name: str
    numpy: str        # the storage type: what a NumPy or CuPy array of this dtype holds
    ctype: str
    is_float: bool


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float64", "float64", "double", True),
        DType("float32", "float32", "float", True),
        DType("float16", "float16", "__half", True),
        DType("bfloat16", "uint16", "__nv_bfloat16", True),
        DType("int64", "int64", "long long", False),
        DType("int32", "int32", "int", False),
        DType("uint32", "uint32", "unsigned int", False),
        DType("int8", "int8", "signed char", False),
        DType("uint8", "uint8", "unsigned char", False),
    )
}

SCALAR_TYPES = ("int32", "int64", "float32", "float64")
BITS = ("bfloat16",)   # dtypes stored as bit patterns of another NumPy type


def by_storage(numpy_name: str) -> DType:
    """The task dtype of an array's NumPy type (uint16 is bfloat16's: no task dtype is uint16)."""
    return DTYPES.get(numpy_name) or next(d for d in DTYPES.values() if d.numpy == numpy_name)


def np_dtype(name: str) -> np.dtype:
    """The NumPy type an array of this dtype is stored as (uint16 for bfloat16)."""
    return np.dtype(DTYPES[name].numpy)


storage_dtype = np_dtype


def itemsize(name: str) -> int:
    return np_dtype(name).itemsize


def from_float64(xp, values, name: str):
    """``values`` (any real array) rounded to dtype ``name``, in its storage type. A float64 array goes to a 16-bit
    type through float32, as CuPy's conversion does: the same bits from NumPy and CuPy."""
    if name == "float16" and values.dtype == xp.float64:
        return values.astype(xp.float32).astype(xp.float16)
    if name != "bfloat16":
        return values.astype(np_dtype(name))
    f = values.astype(xp.float32)
    bits = f.view(xp.uint32)
    nan = xp.isnan(f)
    # round to nearest, ties to even, on the dropped 16 bits; NaN kept quiet (a carry could turn it into inf)
    rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
    return xp.where(nan, xp.uint32(0x7FC0), rounded).astype(xp.uint16)


def to_compute(xp, array, name: str):
    """An array of dtype ``name`` as values NumPy/CuPy compute with (bfloat16 bits -> float32, exactly)."""
    if name != "bfloat16":
        return array
    return (array.astype(xp.uint32) << xp.uint32(16)).view(xp.float32)


def special_values(name: str) -> list[float]:
    """Signed zeros, +-1, the smallest normal and subnormal numbers and the largest finite ones of a float dtype
    (integer dtypes: 0, +-1 and the type's extremes)."""
    if name == "bfloat16":
        tiny, sub, big = 2.0**-126, 2.0**-133, 3.3895313892515355e38
    elif DTYPES[name].is_float:
        info = np.finfo(np_dtype(name))
        tiny, sub, big = float(info.tiny), float(info.smallest_subnormal), float(info.max)
    else:
        info = np.iinfo(np_dtype(name))
        return [0.0, 1.0, float(info.max), float(info.min)] + ([-1.0] if info.min < 0 else [])
    return [0.0, -0.0, 1.0, -1.0, tiny, -tiny, sub, -sub, big, -big]
