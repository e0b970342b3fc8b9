"""A KernelBench-format problem file, loaded with its size constants set to other values.

The format: a ``Model(nn.Module)`` class, ``get_inputs()`` (the arguments of ``forward``) and
``get_init_inputs()`` (the arguments of ``Model(...)``), built from module-level constants such as
``batch_size = 128``. Every module-level integer literal (also inside a tuple literal) is a
``Constant``; ``Problem.namespace(values)`` executes the source with some of them set to other values,
each by an assignment placed right after the statement that defines it, so that constants derived from
them (``bias_shape = (out_channels, 1, 1)``) follow. The source is the task's own trusted code.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..tasks.task import TaskError
from . import require_torch

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
TORCH_DTYPES = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int64": "int64",
                "int32": "int32", "int8": "int8", "uint8": "uint8", "uint32": "uint32"}


class ProblemError(TaskError):
    """A problem file that cannot be imported: the message names the file and the construct."""


class MissingPackage(ProblemError):
    """The problem imports a package that is not installed: nothing about its sizes can be learnt."""


@dataclass(frozen=True)
class Constant:
    """A module-level integer literal: ``name = 4096``, element ``index`` of ``name = (64, 1, 1)``, one name of
    ``depth, height, width = 16, 32, 32`` or of ``height = width = 128`` (each its own constant)."""

    symbol: str          # its name as a size symbol: the target, or target_index for a tuple element
    target: str
    index: int | None
    value: int
    statement: int       # position in the module body

    @property
    def where(self) -> str:
        return self.target if self.index is None else f"{self.target}[{self.index}]"


_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b if b else None, ast.Pow: lambda a, b: a**b if 0 <= b <= 64 else None}


def _int_literal(node: ast.AST) -> int | None:
    """An integer literal, or arithmetic of integer literals (``2048 * 2``, ``2 ** 20``); None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        a, b = _int_literal(node.left), _int_literal(node.right)
        return None if a is None or b is None else _ARITHMETIC[type(node.op)](a, b)
    return None


def _constants(tree: ast.Module) -> dict[str, Constant]:
    found: dict[str, Constant] = {}
    for pos, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        unpacked = [t for t in targets if isinstance(t, (ast.Tuple, ast.List))]
        if (len(unpacked) == 1 and len(targets) == 1 and isinstance(value, (ast.Tuple, ast.List))
                and len(value.elts) == len(unpacked[0].elts)):  # depth, height, width = 16, 32, 32
            for t, item in zip(unpacked[0].elts, value.elts):
                if isinstance(t, ast.Name) and (v := _int_literal(item)) is not None:
                    found[t.id] = Constant(t.id, t.id, None, v, pos)
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]  # several for a = b = 8
        if len(names) != len(targets):
            continue
        if (v := _int_literal(value)) is not None:
            for name in names:
                found[name] = Constant(name, name, None, v, pos)
        elif isinstance(value, (ast.Tuple, ast.List)) and value.elts:
            items = [_int_literal(e) for e in value.elts]
            if all(i is not None for i in items):
                for name in names:
                    for k, v in enumerate(items):
                        found[f"{name}_{k}"] = Constant(f"{name}_{k}", name, k, v, pos)
    return found


class Problem:
    """One problem file: its constants, and its namespace with some of them set to other values."""

    def __init__(self, path: str | Path, source: str | None = None):
        self.path = Path(path)
        try:
            self.source = self.path.read_text() if source is None else source
        except OSError as exc:
            raise ProblemError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        try:
            self.tree = ast.parse(self.source, filename=str(self.path))
        except SyntaxError as exc:
            raise ProblemError(f"{self.path}: line {exc.lineno}: cannot parse: {exc.msg}") from None
        defined = {n.name for n in self.tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        missing = [name for name in REQUIRED if name not in defined]
        if missing:
            raise ProblemError(f"{self.path}: no {', '.join(missing)} defined at module level (a KernelBench problem "
                               "defines class Model(nn.Module), get_inputs() and get_init_inputs())")
        self.constants = _constants(self.tree)
        self.ties: dict[str, list[str]] = {}   # a symbol -> constants that always take its value
        self._cache: dict[tuple, dict] = {}
        self._init_on_cpu = False
        self._meta_models: dict[str, object] = {}   # the last meta module, by its init inputs

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def values(self) -> dict[str, int]:
        return {c.symbol: c.value for c in self.constants.values()}

    def namespace(self, values: dict[str, int] | None = None) -> dict:
        """The executed module with ``values`` (symbol -> int) in place of the literals; cached."""
        unknown = set(values or {}) - set(self.constants)
        if unknown:
            raise ProblemError(f"{self.path}: no integer constants named {sorted(unknown)}")
        values = dict(values or {})
        for sym, tied in self.ties.items():
            if sym in values:
                values.update({t: values[sym] for t in tied})
        values = {k: int(v) for k, v in values.items() if self.constants[k].value != v}
        key = tuple(sorted(values.items()))
        if key not in self._cache:
            self._cache[key] = self._execute(values)
            if len(self._cache) > 64:
                self._cache.pop(next(iter(self._cache)))
        return self._cache[key]

    def _execute(self, values: dict[str, int]) -> dict:
        tree = ast.parse(self.source, filename=str(self.path))
        by_statement: dict[int, list[Constant]] = {}
        for sym in values:
            c = self.constants[sym]
            by_statement.setdefault(c.statement, []).append(c)
        body = []
        for pos, stmt in enumerate(tree.body):
            body.append(stmt)
            for target in sorted({c.target for c in by_statement.get(pos, [])}):
                body.append(ast.copy_location(self._assignment(target, values), stmt))
        tree.body = body
        ast.fix_missing_locations(tree)
        # A real module in sys.modules: torch.compile (dynamo) imports the module a function was defined in.
        tag = hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()[:8]
        module = types.ModuleType(f"kernelwright_problem_{self.digest}_{tag}")
        module.__file__ = str(self.path)
        module.__builtins__ = builtins
        ns = module.__dict__
        try:
            exec(compile(tree, str(self.path), "exec"), ns)  # the task's own problem file (trusted)
        except ModuleNotFoundError as exc:
            raise MissingPackage(f"{self.path}: it imports {exc.name!r}, which is not installed here (install that "
                               "package to import this problem)") from None
        except Exception as exc:
            raise ProblemError(f"{self.path}: executing it failed: {type(exc).__name__}: {_line(exc)}") from None
        sys.modules[module.__name__] = module
        torch = require_torch()
        if not (isinstance(ns.get("Model"), type) and issubclass(ns["Model"], torch.nn.Module)):
            raise ProblemError(f"{self.path}: Model is not a subclass of torch.nn.Module")
        return ns

    def _assignment(self, target: str, values: dict[str, int]) -> ast.stmt:
        parts = [c for c in self.constants.values() if c.target == target]
        if parts[0].index is None:
            value: ast.expr = ast.Constant(values.get(target, parts[0].value))
        else:
            ordered = sorted(parts, key=lambda c: c.index)
            value = ast.Tuple([ast.Constant(values.get(c.symbol, c.value)) for c in ordered], ast.Load())
        return ast.Assign([ast.Name(target, ast.Store())], value)

    # ---- building the module and its inputs ------------------------------------------------------

    def _self_contained(self) -> bool:
        """Whether no class or function but get_inputs/get_init_inputs reads a module-level name that the file
        assigns: then the module depends on the constants only through get_init_inputs(), and a meta module built
        from equal init inputs serves again (deep models take seconds to build)."""
        assigned = {t.id for stmt in self.tree.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                    for t in ast.walk(target) if isinstance(t, ast.Name)}
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)) and stmt.name not in REQUIRED[1:]:
                nodes = list(ast.walk(stmt))
                local = {a.arg for n in nodes if isinstance(n, ast.arguments)
                         for a in n.posonlyargs + n.args + n.kwonlyargs + [n.vararg, n.kwarg] if a is not None}
                local |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                if any(isinstance(n, ast.Name) and n.id in assigned - local for n in nodes):
                    return False
        return True

    def _construct(self, ns: dict, init: list, device: str):
        """``Model(*init)`` on ``device``. An ``__init__`` that reads data (``.item()`` of a tensor it made) cannot
        run on the meta device: there the module is built on the CPU and moved to meta (remembered per problem)."""
        torch = require_torch()
        if device == "meta" and not self._init_on_cpu:
            try:
                return ns["Model"](*init)
            except Exception as exc:
                if not _needs_data(exc):
                    raise
                self._init_on_cpu = True
        if device == "meta":
            with torch.device("cpu"):
                return ns["Model"](*init).to("meta")
        return ns["Model"](*init)

    def build(self, values: dict[str, int] | None, device: str = "cpu", seed: int | None = None):
        """``(model, arguments)`` created on ``device``; with ``seed``, reproducible on that device."""
        torch = require_torch()
        ns = self.namespace(values)
        with torch.device(device):
            if seed is not None:
                torch.manual_seed(seed)
            init = list(_call(self.path, ns, "get_init_inputs"))
            for i, item in enumerate(init):
                if isinstance(item, torch.Tensor):
                    raise ProblemError(f"{self.path}: get_init_inputs() item {i} is a tensor; only numbers and tuples "
                                       "of numbers can be imported (make it a parameter of the module)")
            key = repr(init) if device == "meta" and seed is None and self._self_contained() else None
            try:
                model = self._meta_models.get(key) if key else None
                if model is None:
                    model = self._construct(ns, init, device)
                    if key:
                        self._meta_models = {key: model}
            except Exception as exc:
                raise ProblemError(f"{self.path}: Model(*get_init_inputs()) failed: {type(exc).__name__}: "
                                   f"{_line(exc)}") from None
            if seed is not None:
                torch.manual_seed(seed + 1)
            args = list(_call(self.path, ns, "get_inputs"))
        for i, a in enumerate(args):
            if not isinstance(a, (torch.Tensor, int, float)) or isinstance(a, bool):
                raise ProblemError(f"{self.path}: get_inputs() item {i} is a {type(a).__name__}; only tensors, ints "
                                   "and floats can be imported")
        return model, args


def _needs_data(exc: Exception) -> bool:
    text = str(exc)
    return isinstance(exc, (NotImplementedError, RuntimeError)) and ("meta" in text or "item" in text)


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _call(path: Path, ns: dict, name: str):
    try:
        out = ns[name]()
    except Exception as exc:
        raise ProblemError(f"{path}: {name}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(out, (list, tuple)):
        raise ProblemError(f"{path}: {name}() returned a {type(out).__name__}, expected a list")
    return out


def run_forward(model, args: list, params: dict | None = None) -> list:
    """``model(*args)`` (with ``params`` in place of its parameters and buffers), as a list of tensors."""
    torch = require_torch()
    with torch.no_grad():
        out = torch.func.functional_call(model, params, tuple(args)) if params else model(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise ProblemError(f"forward() output {i} is a {type(o).__name__}; only tensors can be compared")
    return outs


def dtype_name(t) -> str:
    """The task dtype of a tensor, or a ProblemError naming the one that cannot be imported."""
    name = str(t.dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES:
        raise ProblemError(f"dtype {name} is not supported (supported: {', '.join(TORCH_DTYPES)})")
    return TORCH_DTYPES[name]


@lru_cache(maxsize=16)
def load(path: str, mtime_ns: int) -> Problem:
    return Problem(path)


def problem_at(path: str | Path) -> Problem:
    """The problem of a file, cached while the file is unchanged."""
    p = Path(path)
    return load(str(p.resolve()), p.stat().st_mtime_ns)
