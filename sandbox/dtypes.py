"""The element types a task may declare, with their NumPy and C spellings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    numpy: str
    ctype: str
    is_float: bool


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float64", "float64", "double", True),
        DType("float32", "float32", "float", True),
        DType("float16", "float16", "__half", True),
        DType("int64", "int64", "long long", False),
        DType("int32", "int32", "int", False),
        DType("uint32", "uint32", "unsigned int", False),
        DType("int8", "int8", "signed char", False),
        DType("uint8", "uint8", "unsigned char", False),
    )
}

SCALAR_TYPES = ("int32", "int64", "float32", "float64")


def np_dtype(name: str) -> np.dtype:
    return np.dtype(DTYPES[name].numpy)


def itemsize(name: str) -> int:
    return np_dtype(name).itemsize
