"""The schema of ``task.toml``: validated models with a description per field, and the evaluation of
everything a task computes from one size (derived sizes, constraints, shapes, integer ranges, the
roofline), done for every size when a task loads. Unknown keys are errors."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from . import expr
from .dtypes import DTYPES, SCALAR_TYPES, itemsize
from .torch_spec import TorchSpec


def _one_of(value: str, known) -> str:
    if value not in known:
        raise ValueError(f"expected one of {', '.join(known)}, got {value!r}")
    return value

class TaskError(ValueError):
    """A malformed task: the message names the file, the key and what was expected."""


# The categories of the suite; a task may name another (a lowercase word, e.g. "loss").
CATEGORIES = ("elementwise", "reduction", "scan", "normalization", "data-movement", "compute",
              "tensor-core", "stencil", "atomics", "fusion", "attention")
DISTRIBUTIONS = ("normal", "uniform", "int", "ones", "module", "wide", "kinks", "special", "rows", "ties", "near_one")
KINDS = ("normal", "uniform", "int", "constant", "special", "kinks", "wide", "rows", "ties", "near_one")
INTEGER_KINDS = ("int", "ones", "module", "constant", "special")
INT64_MAX = 2**63 - 1
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    spread: float = Field(0.0, ge=0, le=0.05, description=(
        "Where the expected output is compared, atol grows to this fraction of its standard deviation there, if "
        "larger: an honest float32 error grows with the output's magnitude (a longer sum, larger inputs), a "
        "wrong answer's with the output itself. 0: atol as written."))


class Distribution(_Strict):
    """A named distribution with parameters of its own: the magnitudes an honest kernel must handle (exp()
    arguments past float32's overflow, a common offset far above the spread, integer-valued data, one constant,
    IEEE special values), next to the input's usual ones."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Shown in check labels; not a built-in kind's name.")
    kind: Literal["normal", "uniform", "int", "constant", "special", "kinks", "wide", "rows", "ties", "near_one"] = Field(
        description="normal: offset + N(0, scale); uniform: offset + U(low, high); int: integers in [low, high) (also "
        "for float inputs); constant: every element = value; special: elements drawn from values (default: signed "
        "zeros, +-1, the dtype's smallest normal and subnormal and largest finite numbers); kinks: values at and "
        "beside 0, +-0.5, +-1, +-3, +-6; wide: N(0, 100^2); rows: each row (last dimension) with a centre and a "
        "spread of its own and amplitudes mixed within it; ties: offset + scale * k / 2 for integers k in [-4, 4] "
        "(ties, and maxima clustered); near_one: 1 + offset + N(0, (scale / 1000)^2), a long product's factors. "
        "The offset and scale of normal, wide, rows and ties are multiplied by one factor in [1, 1.25] per draw.")
    offset: float = Field(0.0, description="Added to every value.")
    scale: float | None = Field(None, gt=0, description="Standard deviation for normal (default: the input's scale).")
    low: float | None = Field(None, description="Lower bound for uniform and int (default: the input's low).")
    high: float | None = Field(None, description="Upper bound for uniform and int (default: the input's high).")
    value: float | None = Field(None, description="The value of a constant distribution.")
    values: list[float] = Field(default_factory=list, description="The values a special distribution draws from "
                                "(TOML's inf, -inf and nan allowed).")

    @field_validator("name")
    @classmethod
    def _not_a_kind(cls, v: str) -> str:
        if v in DISTRIBUTIONS:
            raise ValueError(f"{v!r} is a built-in distribution; name this one differently")
        return v

    @model_validator(mode="after")
    def _parameters_fit_the_kind(self) -> "Distribution":
        if self.kind == "constant" and self.value is None:
            raise ValueError(f"distribution {self.name!r}: kind 'constant' needs a value")
        if self.kind != "constant" and self.value is not None:
            raise ValueError(f"distribution {self.name!r}: value applies to kind 'constant' only")
        if self.values and self.kind != "special":
            raise ValueError(f"distribution {self.name!r}: values apply to kind 'special' only")
        given = self.model_fields_set
        unused = {"normal": {"low", "high"}, "wide": {"low", "high", "scale"}, "uniform": {"scale"},
                  "int": {"scale", "offset"}, "constant": {"low", "high", "scale", "offset"},
                  "special": {"low", "high", "scale", "offset"}, "kinks": {"low", "high", "scale"},
                  "rows": {"low", "high"}, "ties": {"low", "high"}, "near_one": {"low", "high"}}[self.kind]
        if given & unused:
            raise ValueError(f"distribution {self.name!r}: {', '.join(sorted(given & unused))} do not apply to kind "
                             f"{self.kind!r}")
        if self.kind in ("uniform", "int") and self.low is not None and self.high is not None and self.high <= self.low:
            raise ValueError(f"distribution {self.name!r}: high ({self.high:g}) must exceed low ({self.low:g})")
        return self

    def integral(self) -> bool:
        """Whether every value it draws is an integer (what an integer input may take)."""
        if self.kind == "int":
            return True
        if self.kind == "constant":
            return float(self.value).is_integer()
        if self.kind == "special":
            return bool(self.values) and all(float(v).is_integer() for v in self.values)
        return False


DistributionEntry = Annotated[
    Annotated[Literal["normal", "uniform", "int", "ones", "module", "wide", "kinks", "special", "rows", "ties",
                      "near_one"], Tag("kind")]
    | Annotated[Distribution, Tag("named")],
    Discriminator(lambda v: "kind" if isinstance(v, str) else "named")]


class TensorSpec(_Strict):
    """An input or output array, contiguous and row-major; ``shape = []`` is a scalar (one element)."""

    name: str = Field(pattern=_NAME, description="Name used in launch args and the reference.")
    dtype: str = Field(description="Element type: " + ", ".join(DTYPES))
    shape: list[str | int] = Field(description="Dimensions as expressions of the size symbols; [] for a scalar.")
    distributions: list[DistributionEntry] = Field(
        default_factory=list, description="Random input distributions (built-in kinds or named ones), rotated across "
        "trials (inputs only): trial t draws input number i from entry (t + i) mod len; 'module': generated by the "
        "task's PyTorch problem from the trial's seed.")
    low: float | str = Field(-1.0, description="Lower bound for uniform/int distributions; a string is an "
                             "integer expression of the sizes (inputs only).")
    high: float | str = Field(1.0, description="Upper bound for uniform/int distributions (exclusive for int); "
                              "a string is an integer expression of the sizes, e.g. \"C\" (inputs only).")
    scale: float = Field(1.0, description="Standard deviation for the normal distribution (inputs only).")
    tolerance: Tolerance | None = Field(None, description="This output's tolerance, in place of its dtype's (outputs only).")
    constant: bool = Field(False, description="The output is one value at every size and for every input (outputs "
                           "only): the task is degenerate there, a kernel that writes that value is correct, and "
                           "check-task says so instead of failing the constant impostor.")

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        return _one_of(v, DTYPES)

    @field_validator("shape")
    @classmethod
    def _valid_dims(cls, v: list[str | int]) -> list[str | int]:
        for dim in v:
            expr.parse(str(dim))
        return v

    @field_validator("low", "high")
    @classmethod
    def _valid_bound(cls, v: float | str) -> float | str:
        if isinstance(v, str):
            expr.parse(v)
        return v

    @model_validator(mode="after")
    def _integer_inputs_use_integer_distributions(self) -> "TensorSpec":
        names = [d if isinstance(d, str) else d.name for d in self.distributions]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: a distribution is listed twice in {names}")
        if self.dtype in DTYPES and not DTYPES[self.dtype].is_float:
            bad = [d if isinstance(d, str) else d.name for d in self.distributions
                   if (d not in INTEGER_KINDS if isinstance(d, str) else not d.integral())]
            if bad:
                raise ValueError(f"{self.name}: integer dtype {self.dtype} needs distributions of integers ('int', "
                                 f"'ones', 'special', or named ones of kind int, or constant/special with integer "
                                 f"values), not {bad}")
        return self

    def bound_names(self) -> set[str]:
        return set().union(*(expr.names(b) for b in (self.low, self.high) if isinstance(b, str)))


class ScalarSpec(_Strict):
    """A scalar kernel argument with a fixed value (e.g. ``eps``)."""

    name: str = Field(pattern=_NAME)
    dtype: str
    value: float | int

    @field_validator("dtype")
    @classmethod
    def _scalar_dtype(cls, v: str) -> str:
        return _one_of(v, SCALAR_TYPES)


class Sizes(_Strict):
    benchmark: dict[str, int] = Field(description="The size timed for speedups.")
    check: list[dict[str, int]] = Field(min_length=1, description="Sizes checked for correctness (tiny and odd ones).")
    heldout: list[dict[str, int]] = Field(default_factory=list, description="Generalization sizes, re-checked before a winner is declared.")
    derived: dict[str, str | int] = Field(default_factory=dict, description="Size symbols computed from the others, in "
                                          "order (an expression may use the ones before it), e.g. OH = \"(H - 3) // 2 + 1\".")
    constraints: list[str] = Field(default_factory=list, description="Conditions every size must meet, e.g. \"KW <= L\".")

    @field_validator("derived")
    @classmethod
    def _valid_derived(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        for name, text in v.items():
            if not re.fullmatch(_NAME, name):
                raise ValueError(f"derived size {name!r}: expected an identifier")
            expr.parse(str(text))
        return v

    @field_validator("constraints")
    @classmethod
    def _valid_constraints(cls, v: list[str]) -> list[str]:
        for text in v:
            expr.parse_condition(text)
        return v


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
    category: str = Field(pattern=r"^[a-z][a-z0-9-]*$", description="A lowercase word; the suite's are in CATEGORIES.")
    description: str = Field(min_length=20)
    inputs: list[TensorSpec] = Field(min_length=1)
    outputs: list[TensorSpec] = Field(min_length=1)
    scalars: list[ScalarSpec] = Field(default_factory=list)
    sizes: Sizes
    tolerance: dict[str, Tolerance] = Field(default_factory=dict, description="Per output dtype; an output's own "
                                            "tolerance takes precedence.")
    roofline: Roofline
    vendor: str | None = Field(None, description="Name of the vendor library the vendor() function calls, if any.")
    allow_fast_math: bool = Field(False, description="Whether --use_fast_math passes the tolerance.")
    torch: TorchSpec | None = Field(None, description="A PyTorch module as reference, input generator and baselines "
                                    "(sandbox.pytorch); baseline.cu is then optional.")

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
        derived = list(self.sizes.derived)
        clash = (symbols | set(derived)) & set(names)
        if clash:
            raise ValueError(f"size symbols clash with array or scalar names: {sorted(clash)}")
        if symbols & set(derived):
            raise ValueError(f"sizes.derived redefines size symbols {sorted(symbols & set(derived))}")
        known = set(symbols)
        for name, text in self.sizes.derived.items():
            _known(expr.names(str(text)), known, f"sizes.derived.{name}")
            known.add(name)
        for text in self.sizes.constraints:
            _known(expr.condition_names(text), known, f"sizes.constraints: {text!r}")
        for label, sizes in self.all_sizes():
            if set(sizes) != symbols:
                raise ValueError(f"sizes.{label} defines {sorted(sizes)}, expected exactly {sorted(symbols)}")
        for kind, group in (("inputs", self.inputs), ("outputs", self.outputs)):
            for t in group:
                for dim in t.shape:
                    _known(expr.names(str(dim)), known, f"{kind}.{t.name}.shape")
                _known(t.bound_names(), known, f"{kind}.{t.name} low/high")
        for key in ("flops", "bytes"):
            _known(expr.names(str(getattr(self.roofline, key))), known, f"roofline.{key}")
        for t in self.inputs:
            if t.tolerance is not None:
                raise ValueError(f"inputs.{t.name}.tolerance: a tolerance applies to outputs only")
            if t.constant:
                raise ValueError(f"inputs.{t.name}.constant: applies to outputs only")
        for t in self.outputs:
            misplaced = t.model_fields_set & {"distributions", "low", "high", "scale"}
            if misplaced:
                raise ValueError(f"outputs.{t.name}: {', '.join(sorted(misplaced))} apply to inputs only")
            if t.tolerance is None and t.dtype not in self.tolerance:
                raise ValueError(f"tolerance has no entry for output dtype {t.dtype!r} (of {t.name!r}), "
                                 f"and the output has no tolerance of its own")
        module_inputs = [t.name for t in self.inputs if "module" in t.distributions]
        if self.torch is None and module_inputs:
            raise ValueError(f"inputs {module_inputs} use the 'module' distribution, which needs a [torch] table")
        if self.torch is not None:
            self._consistent_torch()
        for label, sizes in self.all_sizes():
            check_size(self, label, sizes)
        return self

    def _consistent_torch(self) -> None:
        t = self.torch
        inputs, outputs = {i.name for i in self.inputs}, [o.name for o in self.outputs]
        scalars = {s.name for s in self.scalars}
        unknown = [n for n in t.arguments if n not in inputs | scalars]
        if unknown:
            raise ValueError(f"torch.arguments names {unknown}, which are no inputs or scalars")
        unknown = [n for n in t.parameters if n not in inputs]
        if unknown:
            raise ValueError(f"torch.parameters names {unknown}, which are no inputs")
        if t.outputs + list(t.updated.values()) != outputs:
            raise ValueError(f"torch.outputs {t.outputs} and then torch.updated's outputs must list the outputs in "
                             f"order: {outputs}")
        unknown = [n for n in t.mutated if n not in t.parameters] + [n for n in t.updated if n not in t.mutated]
        if unknown:
            raise ValueError(f"torch.mutated and torch.updated name {unknown}: mutated ones must be torch.parameters, "
                             "updated ones mutated")
        missing = inputs - set(t.arguments) - set(t.parameters)
        if missing:
            raise ValueError(f"inputs {sorted(missing)} are neither torch.arguments nor torch.parameters")

    def all_sizes(self) -> list[tuple[str, dict[str, int]]]:
        out = [("benchmark", self.sizes.benchmark)]
        out += [(f"check[{i}]", s) for i, s in enumerate(self.sizes.check)]
        out += [(f"heldout[{i}]", s) for i, s in enumerate(self.sizes.heldout)]
        return out


def _known(used: set[str], known: set[str], where: str) -> None:
    unknown = used - known
    if unknown:
        raise ValueError(f"{where} uses unknown symbols {sorted(unknown)} (size symbols: {sorted(known)})")


def bind(spec: TaskSpec, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` plus every derived size, after checking the constraints; ExprError says what failed."""
    env = dict(sizes)
    for name, text in spec.sizes.derived.items():
        env[name] = expr.evaluate(str(text), env)
    for text in spec.sizes.constraints:
        if not expr.holds(text, env):
            raise expr.ExprError(f"the constraint {text!r} does not hold")
    return env


def check_size(spec: TaskSpec, label: str, sizes: dict[str, int]) -> None:
    """Evaluate everything the task computes from one size: one ValueError naming the key and the size."""
    at = f"sizes.{label} ({describe_sizes(sizes)})"
    for name, value in sizes.items():
        if not 1 <= value <= INT64_MAX:
            raise ValueError(f"{at}: {name} = {value}, expected 1..{INT64_MAX} (int64)")
    try:
        env = bind(spec, sizes)
    except expr.ExprError as exc:
        raise ValueError(f"{at}: {exc}") from None
    for kind, group in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for t in group:
            where = f"{kind}.{t.name}"
            try:
                dims = [expr.evaluate(str(d), env) for d in t.shape]
                bounds = [expr.evaluate(b, env) if isinstance(b, str) else b for b in (t.low, t.high)]
            except expr.ExprError as exc:
                raise ValueError(f"{where} at {at}: {exc}") from None
            if any(d < 1 for d in dims):
                raise ValueError(f"{where}.shape is {dims} at {at}: every dimension must be >= 1 "
                                 f"(add a constraint to sizes.constraints, or fix the size)")
            count = 1
            for d in dims:
                count *= d
            if count * itemsize(t.dtype) > INT64_MAX:
                raise ValueError(f"{where} has {count} elements at {at}: more bytes than int64 can count")
            drawn = t.distributions or ([] if DTYPES[t.dtype].is_float else ["int"])
            if kind == "inputs" and "int" in drawn and int(bounds[1]) <= int(bounds[0]):
                raise ValueError(f"{where}: the int distribution needs high > low, got low = {bounds[0]:g}, "
                                 f"high = {bounds[1]:g} at {at}")
    for key in ("flops", "bytes"):
        try:
            value = expr.evaluate(str(getattr(spec.roofline, key)), env)
        except expr.ExprError as exc:
            raise ValueError(f"roofline.{key} at {at}: {exc}") from None
        if value < 0:
            raise ValueError(f"roofline.{key} = {value} at {at}: expected >= 0")


def describe_sizes(sizes: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())
