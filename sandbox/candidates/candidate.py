"""Candidates: CUDA C++ device code plus a declarative launch plan. No host code ever runs.

A candidate is one ``.cu`` file. Its launch plan is TOML inside a comment that opens with
``/*@kernelwright`` and closes with ``@*/``::

    /*@kernelwright
    flags = ["--extra-device-vectorization"]      # optional, from the allow-list below

    [knobs]                                       # optional: macro -> values, the first is the default
    BLOCK = [256, 128, 512]

    [[scratch]]                                   # optional intermediate buffers
    name = "partial"
    dtype = "float32"
    size = "ceil_div(n, BLOCK)"                   # elements
    init = "poison"                               # or "zero" (a memset timed as part of the plan)

    [[launch]]                                    # one or more, run in order on one stream
    kernel = "vector_add"                         # an extern "C" name, or a template-id like "k<BLOCK>"
    grid = "ceil_div(n, BLOCK)"                   # an expression, or a list of up to 3
    block = "BLOCK"
    shared = "0"                                  # dynamic shared memory in bytes (optional)
    args = ["a", "b", "c", "n"]                   # arrays, scalars, or integer expressions
    @*/

Integer-expression arguments are passed as 32-bit ``int``; write ``"n*m:i64"`` for ``long long``
(``:i32``, ``:u32``, ``:i64``, ``:u64`` are accepted).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..tasks import expr
from ..tasks.dtypes import DTYPES
from ..tasks.task import Task
from .fast_math import approximate_tokens
from .source_filter import FilterError, read_tokens, token_problems

PLAN_OPEN, PLAN_CLOSE = "/*@kernelwright", "@*/"
MAX_LAUNCHES = 16
MAX_SOURCE_CHARS = 100_000

INT_ARG_TYPES = {"i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64"}

# Allowed NVRTC options. Fast math, and the flags that make up part of it, are further gated by the task
# (Task.spec.allow_fast_math).
FAST_MATH_FLAGS = ("--use_fast_math", "--ftz=true", "--prec-div=false", "--prec-sqrt=false")
FLAG_PATTERNS = (
    r"--use_fast_math",
    r"--extra-device-vectorization",
    r"--maxrregcount=(1[6-9]|[2-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])",
    r"--fmad=(true|false)",
    r"--ftz=(true|false)",
    r"--prec-div=(true|false)",
    r"--prec-sqrt=(true|false)",
    r"--restrict",
    r"-std=c\+\+(17|20)",
    r"--ptxas-options=-O[0-3]",
    r"--ptxas-options=-dlcm=(ca|cg)",
    r"--ptxas-options=-dscm=(cg|cs|wt)",
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CandidateError(ValueError):
    """A malformed candidate: the message says what is wrong and what was expected."""


@dataclass(frozen=True)
class Scratch:
    name: str
    dtype: str
    size: str
    init: Literal["poison", "zero"] = "poison"


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Candidate:
    """A parsed candidate. ``knob_values`` holds the chosen value of every knob (the default first)."""

    source: str
    launches: tuple[Launch, ...]
    scratch: tuple[Scratch, ...] = ()
    flags: tuple[str, ...] = ()
    knobs: dict[str, tuple[int, ...]] = field(default_factory=dict)
    knob_values: dict[str, int] = field(default_factory=dict)
    label: str = "candidate"

    @property
    def key(self) -> str:
        """A hash of what is compiled: source, flags and knob values. Two keys can share one identity
        (``sandbox.candidates.plan.identity``: the machine code and launch plans), which is what a search
        deduplicates on."""
        h = hashlib.sha256(self.source.encode())
        h.update(repr((self.flags, sorted(self.knob_values.items()))).encode())
        return h.hexdigest()[:16]

    def with_knobs(self, values: dict[str, int]) -> "Candidate":
        unknown = set(values) - set(self.knobs)
        if unknown:
            raise CandidateError(f"unknown knobs {sorted(unknown)} (declared: {sorted(self.knobs)})")
        merged = {**self.knob_values, **values}
        return replace(self, knob_values=merged)

    def with_flags(self, flags: tuple[str, ...] | list[str]) -> "Candidate":
        for f in flags:
            check_flag(f)
        return replace(self, flags=tuple(flags))

    def defines(self) -> dict[str, int]:
        return dict(self.knob_values)

    def render(self) -> str:
        """The candidate as a file, with the chosen knob values and flags written into its plan."""
        body = strip_plan(self.source)
        return f"{PLAN_OPEN}\n{self.plan_toml()}{PLAN_CLOSE}\n{body.lstrip(chr(10))}"

    def plan_toml(self) -> str:
        out = []
        if self.flags:
            out.append(f"flags = [{', '.join(_q(f) for f in self.flags)}]\n")
        if self.knobs:
            out.append("\n[knobs]\n")
            for name, values in self.knobs.items():
                chosen = self.knob_values.get(name, values[0])
                ordered = [chosen] + [v for v in values if v != chosen]
                out.append(f"{name} = [{', '.join(str(v) for v in ordered)}]\n")
        for s in self.scratch:
            out.append(f"\n[[scratch]]\nname = {_q(s.name)}\ndtype = {_q(s.dtype)}\nsize = {_q(s.size)}\ninit = {_q(s.init)}\n")
        for launch in self.launches:
            out.append(f"\n[[launch]]\nkernel = {_q(launch.kernel)}\n")
            out.append(f"grid = {_dims(launch.grid)}\nblock = {_dims(launch.block)}\n")
            if launch.shared != "0":
                out.append(f"shared = {_q(launch.shared)}\n")
            out.append(f"args = [{', '.join(_q(a) for a in launch.args)}]\n")
        return "".join(out)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dims(d: tuple[str, ...]) -> str:
    return _q(d[0]) if len(d) == 1 else "[" + ", ".join(_q(x) for x in d) + "]"


def strip_plan(source: str) -> str:
    """The source without its launch plan block (the CUDA code alone)."""
    start = source.find(PLAN_OPEN)
    if start < 0:
        return source
    end = source.find(PLAN_CLOSE, start)
    return source[:start] + source[end + len(PLAN_CLOSE):]


def check_flag(flag: str) -> None:
    if not any(re.fullmatch(p, flag) for p in FLAG_PATTERNS):
        allowed = ", ".join(p.replace("\\", "") for p in FLAG_PATTERNS)
        raise CandidateError(f"flag {flag!r} is not allowed (allowed: {allowed})")


def escape_surrogates(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (half of a pair, as a model's answer may hold) written as the six
    characters ``\\udXXX``: text that can be encoded, hashed and written like any other."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def parse_candidate(text: str, label: str = "candidate") -> Candidate:
    """Parse a candidate file's text (source with its embedded plan); a lone surrogate in it is escaped first."""
    text = escape_surrogates(text)
    if len(text) > MAX_SOURCE_CHARS:
        raise CandidateError(f"the candidate is {len(text):,} characters long; at most {MAX_SOURCE_CHARS:,} are accepted")
    start = text.find(PLAN_OPEN)
    if start < 0:
        raise CandidateError(f"no launch plan: expected a comment block starting with {PLAN_OPEN!r} and ending with {PLAN_CLOSE!r}")
    end = text.find(PLAN_CLOSE, start)
    if end < 0:
        raise CandidateError(f"the launch plan opened with {PLAN_OPEN!r} is never closed with {PLAN_CLOSE!r}")
    try:
        plan = tomllib.loads(text[start + len(PLAN_OPEN):end])
    except tomllib.TOMLDecodeError as exc:
        raise CandidateError(f"launch plan: invalid TOML: {exc} (top-level keys such as flags must come before [tables])") from None
    unknown = set(plan) - {"flags", "knobs", "scratch", "launch"}
    if unknown:
        raise CandidateError(f"launch plan: unknown keys {sorted(unknown)} (expected flags, knobs, scratch, launch)")

    flags = plan.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise CandidateError("launch plan: flags: expected a list of strings")
    for f in flags:
        check_flag(f)

    knobs: dict[str, tuple[int, ...]] = {}
    for name, values in (plan.get("knobs") or {}).items():
        if not _IDENT.match(name):
            raise CandidateError(f"launch plan: knobs.{name}: expected a C identifier")
        if not isinstance(values, list) or not values or not all(type(v) is int for v in values):
            raise CandidateError(f"launch plan: knobs.{name}: expected a non-empty list of integers (the first is the default)")
        if len(set(values)) != len(values):
            raise CandidateError(f"launch plan: knobs.{name}: values repeat")
        knobs[name] = tuple(values)

    scratch = []
    for i, s in enumerate(plan.get("scratch", [])):
        where = f"launch plan: scratch[{i}]"
        if not isinstance(s, dict) or set(s) - {"name", "dtype", "size", "init"} or not {"name", "dtype", "size"} <= set(s):
            raise CandidateError(f"{where}: expected keys name, dtype, size and optionally init")
        if s["dtype"] not in DTYPES:
            raise CandidateError(f"{where}.dtype: expected one of {', '.join(DTYPES)}, got {s['dtype']!r}")
        if s.get("init", "poison") not in ("poison", "zero"):
            raise CandidateError(f"{where}.init: expected 'poison' or 'zero'")
        size = _expr_text(s["size"], f"{where}.size")
        scratch.append(Scratch(str(s["name"]), s["dtype"], size, s.get("init", "poison")))

    raw_launches = plan.get("launch")
    if not isinstance(raw_launches, list) or not raw_launches:
        raise CandidateError("launch plan: expected at least one [[launch]] table")
    if len(raw_launches) > MAX_LAUNCHES:
        raise CandidateError(f"launch plan: at most {MAX_LAUNCHES} launches")
    launches = []
    for i, raw in enumerate(raw_launches):
        where = f"launch plan: launch[{i}]"
        missing = {"kernel", "grid", "block", "args"} - set(raw)
        if missing:
            raise CandidateError(f"{where}: missing keys {sorted(missing)}")
        extra = set(raw) - {"kernel", "grid", "block", "shared", "args"}
        if extra:
            raise CandidateError(f"{where}: unknown keys {sorted(extra)}")
        if not isinstance(raw["kernel"], str) or not raw["kernel"].strip():
            raise CandidateError(f"{where}.kernel: expected the kernel's name")
        if not isinstance(raw["args"], list) or not all(isinstance(a, str) for a in raw["args"]):
            raise CandidateError(f"{where}.args: expected a list of strings (array names, scalar names or integer expressions)")
        launches.append(Launch(
            kernel=raw["kernel"].strip(),
            grid=_dims_of(raw["grid"], f"{where}.grid"),
            block=_dims_of(raw["block"], f"{where}.block"),
            shared=_expr_text(raw.get("shared", "0"), f"{where}.shared"),
            args=tuple(a.strip() for a in raw["args"]),
        ))
    return Candidate(source=text, launches=tuple(launches), scratch=tuple(scratch), flags=tuple(flags),
                     knobs=knobs, knob_values={k: v[0] for k, v in knobs.items()}, label=label)


def load_candidate(path: str | Path) -> Candidate:
    """Read and parse a candidate ``.cu`` file (source and launch plan); bad input is a CandidateError."""
    path = Path(path)
    if not path.is_file():
        raise CandidateError(f"{path}: no such file")
    if path.stat().st_size > MAX_SOURCE_CHARS * 4:
        raise CandidateError(f"{path}: {path.stat().st_size:,} bytes; a candidate file holds at most "
                             f"{MAX_SOURCE_CHARS:,} characters")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CandidateError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    try:
        return parse_candidate(text, label=path.stem)
    except CandidateError as exc:
        raise CandidateError(f"{path}: {exc}") from None


def _expr_text(value: object, where: str) -> str:
    if type(value) is int:
        value = str(value)
    if not isinstance(value, str):
        raise CandidateError(f"{where}: expected an integer expression as a string")
    try:
        expr.parse(value)
    except expr.ExprError as exc:
        raise CandidateError(f"{where}: {exc}") from None
    return value


def _dims_of(value: object, where: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= 3:
        raise CandidateError(f"{where}: expected an expression or a list of 1 to 3 expressions")
    return tuple(_expr_text(v, where) for v in items)


def split_arg(arg: str) -> tuple[str, str | None]:
    """``"n*m:i64"`` -> (``"n*m"``, ``"int64"``); a plain arg has no explicit type."""
    if ":" in arg:
        text, _, kind = arg.rpartition(":")
        if kind not in INT_ARG_TYPES:
            raise CandidateError(f"argument {arg!r}: unknown type suffix {kind!r} (expected {', '.join(INT_ARG_TYPES)})")
        return text.strip(), INT_ARG_TYPES[kind]
    return arg, None


def validate_for_task(c: Candidate, task: Task) -> None:
    """Check the plan's names against the task; raise CandidateError naming what does not fit."""
    arrays = {t.name for t in task.spec.inputs + task.spec.outputs}
    scalars = {s.name for s in task.spec.scalars}
    symbols = set(task.all_symbols)
    scratch = {s.name for s in c.scratch}
    clash = (set(c.knobs) | scratch) & (arrays | scalars | symbols)
    if clash:
        raise CandidateError(f"knob or scratch names clash with the task's names: {sorted(clash)}")
    if len(scratch) != len(c.scratch):
        raise CandidateError("scratch buffer names repeat")
    ints = symbols | set(c.knobs)
    for s in c.scratch:
        _known(s.size, ints, f"scratch {s.name!r} size")
    fast = [f for f in c.flags if f in FAST_MATH_FLAGS]
    if fast and not task.spec.allow_fast_math:
        raise CandidateError(f"{' '.join(fast)} is not allowed for task {task.name!r}: its tolerance does not admit "
                             f"fast math")
    for i, launch in enumerate(c.launches):
        for d in launch.grid + launch.block + (launch.shared,):
            _known(d, ints, f"launch[{i}]")
        for arg in launch.args:
            text, typed = split_arg(arg)
            if typed is None and (text in arrays or text in scalars or text in scratch):
                continue
            _known(text, ints, f"launch[{i}] argument {arg!r} (not an array, scalar or integer expression)")
    for out in task.spec.outputs:
        if not any(out.name in launch.args for launch in c.launches):
            raise CandidateError(f"output {out.name!r} is passed to no launch")


def _known(text: str, known: set[str], where: str) -> None:
    try:
        unknown = expr.names(text) - known
    except expr.ExprError as exc:
        raise CandidateError(f"{where}: {exc}") from None
    if unknown:
        raise CandidateError(f"{where}: unknown names {sorted(unknown)} (sizes and knobs: {sorted(known)})")


def static_problems(c: Candidate, task: Task | None = None) -> list[str]:
    """Policy checks done before compiling: reasons to reject the candidate outright (sandbox.candidates.source_filter);
    with ``task``, also approximate math where the task does not allow fast math."""
    try:
        tokens, line = read_tokens(c.source)  # read once for both checks
    except FilterError as exc:
        return [str(exc)]
    problems = token_problems(tokens, line)
    if task is not None and not task.spec.allow_fast_math:
        problems += approximate_tokens(tokens, line)
    return problems

