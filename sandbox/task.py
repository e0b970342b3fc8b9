"""Tasks: what to compute, at which sizes, how exactly, and the kernel to start from.

A task is a folder with ``task.toml`` (this schema), ``reference.py`` (the trusted reference and
an optional vendor implementation) and ``baseline.cu`` (a candidate in the format of
``sandbox.candidate``). Every problem in a task gets one ``TaskError`` naming the file, the key and
what was expected.
"""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import expr
from .dtypes import DTYPES, SCALAR_TYPES

CATEGORIES = ("elementwise", "reduction", "scan", "normalization", "data-movement", "compute",
              "tensor-core", "stencil", "atomics", "fusion", "attention")
DISTRIBUTIONS = ("normal", "uniform", "int", "ones")


class TaskError(ValueError):
    """A malformed task: the message names the file, the key and what was expected."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorSpec(_Strict):
    """An input or output array, contiguous and row-major."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Name used in launch args and the reference.")
    dtype: str = Field(description="Element type: " + ", ".join(DTYPES))
    shape: list[str | int] = Field(min_length=1, description="Dimensions as expressions of the size symbols.")
    distributions: list[Literal["normal", "uniform", "int", "ones"]] = Field(
        default_factory=list, description="Random input distributions, rotated across trials (inputs only).")
    low: float = Field(-1.0, description="Lower bound for uniform/int distributions.")
    high: float = Field(1.0, description="Upper bound for uniform/int distributions (exclusive for int).")
    scale: float = Field(1.0, description="Standard deviation for the normal distribution.")

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        if v not in DTYPES:
            raise ValueError(f"expected one of {', '.join(DTYPES)}, got {v!r}")
        return v

    @field_validator("shape")
    @classmethod
    def _valid_dims(cls, v: list[str | int]) -> list[str | int]:
        for dim in v:
            expr.parse(str(dim))
        return v

    @model_validator(mode="after")
    def _integer_inputs_use_integer_distributions(self) -> "TensorSpec":
        if self.dtype in DTYPES and not DTYPES[self.dtype].is_float:
            bad = [d for d in self.distributions if d not in ("int", "ones")]
            if bad:
                raise ValueError(f"{self.name}: integer dtype {self.dtype} needs 'int' or 'ones' distributions, not {bad}")
        return self


class ScalarSpec(_Strict):
    """A scalar kernel argument with a fixed value (e.g. ``eps``)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    dtype: str
    value: float | int

    @field_validator("dtype")
    @classmethod
    def _scalar_dtype(cls, v: str) -> str:
        if v not in SCALAR_TYPES:
            raise ValueError(f"expected one of {', '.join(SCALAR_TYPES)}, got {v!r}")
        return v


class Sizes(_Strict):
    benchmark: dict[str, int] = Field(description="The size timed for speedups.")
    check: list[dict[str, int]] = Field(min_length=1, description="Sizes checked for correctness (tiny and odd ones).")
    heldout: list[dict[str, int]] = Field(default_factory=list, description="Generalization sizes, re-checked before a winner is declared.")


class Tolerance(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class Roofline(_Strict):
    flops: str | int = Field(description="Useful floating-point operations, an expression of the sizes.")
    bytes: str | int = Field(description="Minimum bytes moved to and from device memory, an expression of the sizes.")
    compute: Literal["fp32", "fp16_tensor", "none"] = Field(
        "fp32", description="Which measured compute ceiling bounds this task.")

    @field_validator("flops", "bytes")
    @classmethod
    def _valid_expression(cls, v: str | int) -> str | int:
        expr.parse(str(v))
        return v


class TaskSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    version: int = Field(1, ge=1, description="Bumped when the task's meaning changes.")
    category: str
    description: str = Field(min_length=20)
    inputs: list[TensorSpec] = Field(min_length=1)
    outputs: list[TensorSpec] = Field(min_length=1)
    scalars: list[ScalarSpec] = Field(default_factory=list)
    sizes: Sizes
    tolerance: dict[str, Tolerance]
    roofline: Roofline
    vendor: str | None = Field(None, description="Name of the vendor library the vendor() function calls, if any.")
    allow_fast_math: bool = Field(False, description="Whether --use_fast_math passes the tolerance.")

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str) -> str:
        if v not in CATEGORIES:
            raise ValueError(f"expected one of {', '.join(CATEGORIES)}, got {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "TaskSpec":
        tensors = self.inputs + self.outputs
        names = [t.name for t in tensors] + [s.name for s in self.scalars]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"names used twice: {', '.join(sorted(dupes))}")
        symbols = set(self.sizes.benchmark)
        if not symbols:
            raise ValueError("sizes.benchmark defines no size symbols")
        if symbols & set(names):
            raise ValueError(f"size symbols clash with array or scalar names: {sorted(symbols & set(names))}")
        for label, sizes in self.all_sizes():
            if set(sizes) != symbols:
                raise ValueError(f"sizes.{label} defines {sorted(sizes)}, expected exactly {sorted(symbols)}")
            if any(v < 1 for v in sizes.values()):
                raise ValueError(f"sizes.{label}: every size must be >= 1, got {sizes}")
        for t in tensors:
            for dim in t.shape:
                unknown = expr.names(str(dim)) - symbols
                if unknown:
                    raise ValueError(f"{t.name}.shape uses unknown symbols {sorted(unknown)}")
        for key in ("flops", "bytes"):
            unknown = expr.names(str(getattr(self.roofline, key))) - symbols
            if unknown:
                raise ValueError(f"roofline.{key} uses unknown symbols {sorted(unknown)}")
        for t in self.outputs:
            if t.dtype not in self.tolerance:
                raise ValueError(f"tolerance has no entry for output dtype {t.dtype!r} (of {t.name!r})")
        return self

    def all_sizes(self) -> list[tuple[str, dict[str, int]]]:
        out = [("benchmark", self.sizes.benchmark)]
        out += [(f"check[{i}]", s) for i, s in enumerate(self.sizes.check)]
        out += [(f"heldout[{i}]", s) for i, s in enumerate(self.sizes.heldout)]
        return out


class Task:
    """A loaded task: the validated spec plus its folder, reference module and baseline source."""

    def __init__(self, spec: TaskSpec, folder: Path):
        self.spec = spec
        self.folder = folder

    name = property(lambda self: self.spec.name)

    @property
    def symbols(self) -> list[str]:
        return list(self.spec.sizes.benchmark)

    @property
    def baseline_path(self) -> Path:
        return self.folder / "baseline.cu"

    @property
    def reference_path(self) -> Path:
        return self.folder / "reference.py"

    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the task's files: results are only comparable within one fingerprint."""
        h = hashlib.sha256()
        for name in ("task.toml", "reference.py", "baseline.cu"):
            h.update(name.encode() + b"\0" + (self.folder / name).read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def shape(self, tensor: TensorSpec, sizes: dict[str, int]) -> tuple[int, ...]:
        return tuple(expr.evaluate(str(d), sizes) for d in tensor.shape)

    def numel(self, tensor: TensorSpec, sizes: dict[str, int]) -> int:
        n = 1
        for d in self.shape(tensor, sizes):
            n *= d
        return n

    def tensor(self, name: str) -> TensorSpec:
        for t in self.spec.inputs + self.spec.outputs:
            if t.name == name:
                return t
        raise KeyError(name)

    def flops(self, sizes: dict[str, int]) -> int:
        return expr.evaluate(str(self.spec.roofline.flops), sizes)

    def bytes(self, sizes: dict[str, int]) -> int:
        return expr.evaluate(str(self.spec.roofline.bytes), sizes)

    def tolerance(self, dtype: str) -> Tolerance:
        return self.spec.tolerance[dtype]

    def reference_module(self) -> ModuleType:
        """Import reference.py (trusted code: the task's own reference and vendor functions)."""
        return load_reference(self.reference_path)

    def __repr__(self) -> str:
        return f"Task({self.name!r}, {self.folder})"


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


def suite_dir() -> Path:
    """The task suite: kernels/ in a checkout, sandbox/_suite in an installed wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_suite", here.parent / "kernels"):
        if candidate.is_dir():
            return candidate
    raise TaskError(f"no task suite found next to {here}")


def suite_names() -> list[str]:
    return sorted(p.parent.name for p in suite_dir().glob("*/task.toml"))


def _format_validation(path: Path, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing"
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)


def load_task(name_or_path: str | Path) -> Task:
    """Load a task by suite name or by path (a task folder or its task.toml)."""
    path = Path(name_or_path)
    if path.name == "task.toml":
        folder = path.parent
    elif path.is_dir():
        folder = path
    else:
        folder = suite_dir() / str(name_or_path)
        if not (folder / "task.toml").is_file():
            known = ", ".join(suite_names())
            raise TaskError(f"{name_or_path}: no such task (not a folder with task.toml; suite tasks: {known})")
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{folder}: task.toml is missing")
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{toml_path}: invalid TOML: {exc}") from None
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskError(_format_validation(toml_path, exc)) from None
    if spec.name != folder.name:
        raise TaskError(f"{toml_path}: name: expected the folder name {folder.name!r}, got {spec.name!r}")
    for required in ("reference.py", "baseline.cu"):
        if not (folder / required).is_file():
            raise TaskError(f"{folder / required}: file is missing (every task needs task.toml, reference.py, baseline.cu)")
    return Task(spec, folder)


def describe_sizes(sizes: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())
