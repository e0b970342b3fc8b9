"""Which constants of a problem are sizes, and every tensor's shape as an expression of them.

Everything is found by running the problem on PyTorch's ``meta`` device (shapes and FLOP counts, no
data), first as written, then with one constant changed at a time:
- a constant is a **size symbol** when some dimension of an input, parameter or output equals it and
  follows it to other values, and no dimension shrinks as it grows (a kernel, window or stride size
  shrinks the output; an axis number is no dimension at all). Such constants stay **fixed**, with the
  reason. A size that only runs at multiples of a step (a channel count shared by groups) keeps the step;
- each dimension is fitted as ``(a * s + b) // c`` of one symbol, a product of symbols, or an integer
  combination of symbols, and every fit is checked again at every size the task will use;
- FLOPs (matrix products and convolutions, as counted by ``torch.utils.flop_counter``) as a constant
  times the first output's element count times the symbols that only the reduction depends on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..tasks import expr
from . import require_torch
from .problem import MissingPackage, Problem, ProblemError, dtype_name, run_forward

STEPS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class Probe:
    values: dict[str, int]                   # the symbols changed from the problem's own values
    shapes: dict[str, tuple[int, ...]]       # "in0", "param:conv.weight", "out0" -> shape
    dtypes: dict[str, str]
    flops: int
    ops: list[int] = field(default_factory=list)   # FLOPs of each counted operation, in the order they ran


class ProbeFailed(Exception):
    """The problem does not run at these values (the message says why)."""


RECURRENT = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _recurrent_mode(ops: list[int]):
    """A TorchFunctionMode that answers PyTorch's fused recurrent layers (LSTM, GRU, RNN) on the meta device with
    their output shapes and the FLOPs of their matrix products (2 * rows * cols of every weight matrix, per time step
    and batch row). On meta, PyTorch runs them step by step in Python: minutes for a long sequence."""
    torch = require_torch()
    from torch.overrides import TorchFunctionMode

    class Recurrent(TorchFunctionMode):
        def __init__(self, ops: list[int]):
            super().__init__()
            self.ops = ops

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if (name in RECURRENT and not kwargs and len(args) == 9 and isinstance(args[0], torch.Tensor)
                    and args[0].device.type == "meta" and isinstance(args[2], (list, tuple))):
                x, hx, params, _, _, _, _, bidirectional, batch_first = args
                h0 = hx[0] if isinstance(hx, (list, tuple)) else hx
                if x.dim() == 3:
                    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
                else:
                    steps, batch = x.shape[0], 1
                width = (2 if bidirectional else 1) * h0.shape[-1]
                out = torch.empty((*x.shape[:-1], width), dtype=x.dtype, device="meta")
                for w in params:
                    if w.dim() == 2:
                        self.ops.append(2 * w.shape[0] * w.shape[1] * steps * batch)
                states = [torch.empty_like(h) for h in (hx if isinstance(hx, (list, tuple)) else [hx])]
                return (out, *states)
            return func(*args, **(kwargs or {}))

    return Recurrent(ops)


def _counter(ops: list[int]):
    """torch's FLOP counter, also noting each counted operation's FLOPs in ``ops``."""
    from torch.utils.flop_counter import FlopCounterMode

    class Counter(FlopCounterMode):
        def _count_flops(self, func_packet, out, args, kwargs):
            if func_packet in self.flop_registry:
                ops.append(int(self.flop_registry[func_packet](*args, **kwargs, out_val=out)))
            return super()._count_flops(func_packet, out, args, kwargs)

    return Counter(display=False)


def probe(problem: Problem, values: dict[str, int]) -> Probe:
    """Shapes, dtypes and FLOPs of one evaluation on the meta device; ProbeFailed when it does not run."""
    require_torch()
    try:
        model, args = problem.build(values, "meta")
        counted, recurrent = [], []
        with _counter(counted) as counter, _recurrent_mode(recurrent):
            outs = run_forward(model, args)
    except MissingPackage:
        raise
    except ProblemError as exc:
        raise ProbeFailed(str(exc).split(": ", 1)[-1]) from None
    except Exception as exc:  # the module's own code failing at these sizes
        raise ProbeFailed(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    tensors = {f"in{i}": a for i, a in enumerate(args) if hasattr(a, "shape")}
    tensors.update({f"param:{k}": t for k, t in list(model.named_parameters()) + list(model.named_buffers())})
    tensors.update({f"out{i}": o for i, o in enumerate(outs)})
    shapes = {k: tuple(int(d) for d in t.shape) for k, t in tensors.items()}
    empty = [k for k, s in shapes.items() if any(d < 1 for d in s)]
    if empty:
        raise ProbeFailed(f"{_label(empty[0])} is empty: shape {shapes[empty[0]]}")
    dtypes = {}
    for k, t in tensors.items():
        try:
            dtypes[k] = dtype_name(t)
        except ProblemError as exc:
            raise ProblemError(f"{problem.path}: {_label(k)}: {exc}") from None
    total = int(counter.get_total_flops())
    ops = counted + recurrent if sum(counted) == total else []  # per operation where this torch lets us count so
    return Probe(dict(values), shapes, dtypes, total + sum(recurrent), ops)


def _label(key: str) -> str:
    if key.startswith("param:"):
        return f"parameter {key[6:]!r}"
    kind, index = ("input", key[2:]) if key.startswith("in") else ("output", key[3:])
    return f"{kind} {index}"


@dataclass
class Analysis:
    base: Probe
    origin: dict[str, int]                                      # every constant's value in the problem file
    symbols: dict[str, int] = field(default_factory=dict)       # symbol -> step
    fixed: dict[str, str] = field(default_factory=dict)         # constant -> why it keeps its value
    ties: dict[str, list[str]] = field(default_factory=dict)    # symbol -> constants that always equal it
    dims: dict[str, list[str]] = field(default_factory=dict)    # tensor key -> dimension expressions
    flops: str = "0"
    probes: list[Probe] = field(default_factory=list)

    @property
    def benchmark(self) -> dict[str, int]:
        return {s: self.origin[s] for s in self.symbols}

    def shapes_at(self, values: dict[str, int]) -> dict[str, tuple[int, ...]]:
        return {k: tuple(expr.evaluate(d, values) for d in dims) for k, dims in self.dims.items()}

    def agrees(self, p: Probe, values: dict[str, int]) -> str:
        """'' when every fitted shape matches the probe at ``values`` (all symbols bound), else what differs."""
        for key, shape in self.shapes_at(values).items():
            if p.shapes.get(key) != shape:
                return f"{_label(key)}: the fitted shape gives {shape}, the problem {p.shapes.get(key)}"
        return ""


def analyse(problem: Problem) -> Analysis:
    try:
        base = probe(problem, {})
    except ProbeFailed as exc:
        raise ProblemError(f"{problem.path}: cannot run it on PyTorch's meta device (shapes without data): {exc}") from None
    a = Analysis(base, origin=problem.values())
    singles: dict[str, list[Probe]] = {}
    for sym, c in problem.constants.items():
        verdict = _detect(problem, base, sym, c.value)
        if isinstance(verdict, str):
            if verdict:
                a.fixed[sym] = verdict
            continue
        a.symbols[sym], singles[sym] = verdict
    _tie(problem, a, base, singles)
    while True:
        a.dims, failed = {}, set()
        for key, shape in base.shapes.items():
            a.dims[key] = []
            for axis in range(len(shape)):
                fitted = _fit_dim(base, {s: singles[s] for s in a.symbols}, a.origin, key, axis)
                if isinstance(fitted, set):
                    failed |= fitted
                    fitted = str(shape[axis])
                a.dims[key].append(fitted)
        if not failed:
            break
        for sym in failed:
            a.fixed[sym] = "a dimension depends on it in a way no simple expression fits"
            del a.symbols[sym]
    a.probes = [base] + [p for s in a.symbols for p in singles[s]]
    a.flops = _fit_flops(a, singles)
    return a


def _tie(problem: Problem, a: Analysis, base: Probe, singles: dict[str, list[Probe]]) -> None:
    """Constants that run at no other value alone but share a value (a batch size that must equal a feature
    count, say) are tried together: where that runs, the first is the symbol and the others follow it."""
    groups: dict[int, list[str]] = {}
    for sym, why in a.fixed.items():
        if why.startswith(NO_OTHER_VALUE):
            groups.setdefault(a.origin[sym], []).append(sym)
    for value, group in groups.items():
        if len(group) < 2:
            continue
        problem.ties[group[0]] = group[1:]
        verdict = _detect(problem, base, group[0], value)
        if isinstance(verdict, str):
            del problem.ties[group[0]]
            continue
        a.symbols[group[0]], singles[group[0]] = verdict
        for sym in group:
            del a.fixed[sym]
    a.ties = {k: list(v) for k, v in problem.ties.items()}


NO_OTHER_VALUE = "no other value of it runs"


def _detect(problem: Problem, base: Probe, sym: str, v: int) -> tuple[int, list[Probe]] | str:
    """(step, two probes) for a size symbol, or why it stays fixed ('' when no shape depends on it)."""
    if v < 1:
        return ""
    first_error, changes = "", False
    for g in STEPS:
        if g > max(v, 1) and g > 1:
            break
        try:
            p1 = probe(problem, {sym: v + g})
        except ProbeFailed as exc:
            first_error = first_error or str(exc)
            continue
        if p1.shapes == base.shapes:
            return ""
        changes = True
        if not _tracks(base, p1, v, v + g):
            return "it changes shapes but is no dimension of any tensor (an axis number, a stride, a padding?)"
        if _shrinks(base, p1):
            return "a larger value makes some dimension smaller (a kernel, window or stride size?)"
        try:
            p3 = probe(problem, {sym: v + 3 * g})
        except ProbeFailed as exc:
            first_error = first_error or str(exc)
            continue
        if _tracks(base, p3, v, v + 3 * g):
            return g, [p1, p3]
    if not changes and not first_error:
        return ""
    return f"{NO_OTHER_VALUE} ({first_error})" if first_error else "it cannot be varied on its own"


def _tracks(base: Probe, p: Probe, v: int, v2: int) -> bool:
    for key, shape in base.shapes.items():
        other = p.shapes.get(key)
        if other is not None and len(other) == len(shape):
            if any(d == v and e == v2 for d, e in zip(shape, other)):
                return True
    return False


def _shrinks(base: Probe, p: Probe) -> bool:
    for key, shape in base.shapes.items():
        other = p.shapes.get(key)
        if other is None or len(other) != len(shape) or any(e < d for d, e in zip(shape, other)):
            return True
    return False


def _fit_dim(base: Probe, singles: dict[str, list[Probe]], origin: dict[str, int], key: str, axis: int) -> str | set:
    """The dimension's expression, or the set of symbols it depends on when nothing fits."""
    d0 = base.shapes[key][axis]
    points: dict[str, list[tuple[int, int]]] = {}
    for sym, probes in singles.items():
        v = origin[sym]
        pts = []
        for p in probes:
            shape = p.shapes.get(key)
            if shape is None or len(shape) != len(base.shapes[key]):
                return {sym}
            pts.append((p.values[sym], shape[axis]))
        if any(y != d0 for _, y in pts):
            points[sym] = [(v, d0)] + pts
    if not points:
        return str(d0)
    if len(points) == 1:
        (sym, pts), = points.items()
        fitted = _fit_floor(pts)
        return _render(sym, *fitted) if fitted else {sym}
    return _fit_product(points, d0) or _fit_sum(points, d0) or set(points)


def _fit_floor(points: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    """(a, b, c) with y == (a*x + b) // c at every point, smallest c and |a| first."""
    for c in range(1, 17):
        for a in sorted(range(-16, 17), key=lambda k: (abs(k), k < 0)):
            if a == 0:
                continue
            lo = max(y * c - a * x for x, y in points)
            hi = min((y + 1) * c - 1 - a * x for x, y in points)
            if lo <= hi:
                b = 0 if lo <= 0 <= hi else (lo if abs(lo) < abs(hi) else hi)
                return a, b, c
    return None


def _render(sym: str, a: int, b: int, c: int) -> str:
    text = sym if a == 1 else f"-{sym}" if a == -1 else f"{a} * {sym}"
    if b:
        text += f" + {b}" if b > 0 else f" - {-b}"
    return text if c == 1 else f"({text}) // {c}"


def _fit_product(points: dict[str, list[tuple[int, int]]], d0: int) -> str | None:
    base_prod = math.prod(pts[0][0] for pts in points.values())
    if d0 % base_prod:
        return None
    k = d0 // base_prod
    for sym, pts in points.items():
        others = base_prod // pts[0][0]
        if any(y != k * x * others for x, y in pts):
            return None
    return " * ".join(([str(k)] if k != 1 else []) + sorted(points))


def _fit_sum(points: dict[str, list[tuple[int, int]]], d0: int) -> str | None:
    coef = {}
    for sym, pts in points.items():
        (x0, y0), (x1, y1) = pts[0], pts[1]
        if (y1 - y0) % (x1 - x0):
            return None
        coef[sym] = (y1 - y0) // (x1 - x0)
        if any(y != y0 + coef[sym] * (x - x0) for x, y in pts):
            return None
    b = d0 - sum(coef[s] * pts[0][0] for s, pts in points.items())
    terms = [s if coef[s] == 1 else f"{coef[s]} * {s}" for s in sorted(points)]
    return " + ".join(terms) + (f" + {b}" if b > 0 else f" - {-b}" if b < 0 else "")


def _fit_flops(a: Analysis, singles: dict[str, list[Probe]]) -> str:
    """FLOPs = k * (elements of output 0) * (symbols only the reduction depends on), else k * a product of powers
    of the symbols (a transposed or strided convolution, a recurrent layer), checked at every probe; or '0'."""
    if a.base.flops <= 0:
        return "0"
    singles = {s: p for s, p in singles.items() if s in a.symbols}  # symbols dropped after their probes are no size
    env0 = {s: a.origin[s] for s in a.symbols}
    for text in (_flops_by_output(a, singles, env0), _flops_by_powers(a, singles, env0),
                 _flops_by_operation(a, singles, env0)):
        if text and all(expr.evaluate(text, {**env0, **{s: v for s, v in p.values.items() if s in env0}}) == p.flops
                        for p in a.probes):
            return text
    return "0"


def _flops_by_output(a: Analysis, singles: dict[str, list[Probe]], env0: dict[str, int]) -> str | None:
    if "out0" not in a.dims:
        return None
    numel = " * ".join(f"({d})" if not d.isidentifier() and not d.isdigit() else d for d in a.dims["out0"]) or "1"
    q0 = a.base.flops / expr.evaluate(numel, env0)
    extra = []
    for sym, probes in singles.items():
        p = probes[0]
        q = p.flops / expr.evaluate(numel, {**env0, **p.values})
        ratio = p.values[sym] / env0[sym]
        if math.isclose(q, q0 * ratio, rel_tol=1e-9):
            extra.append(sym)
        elif not math.isclose(q, q0, rel_tol=1e-9):
            return None
    k = q0 / math.prod(env0[s] for s in extra)
    if abs(k - round(k)) > 1e-9 or round(k) < 1:
        return None
    return " * ".join(([str(round(k))] if round(k) != 1 else []) + [numel] + sorted(extra))


def _monomial(f0: int, at: dict[str, tuple[int, int]], env0: dict[str, int]) -> tuple[int, tuple] | None:
    """(k, ((symbol, power), ...)) with f == k * prod(symbol ** power), from f0 at ``env0`` and ``at``: symbol ->
    (its other value, f there); None where no such product fits."""
    if f0 <= 0:
        return None
    powers = []
    for sym, (v, f) in sorted(at.items()):
        if f <= 0:
            return None
        e = math.log(f / f0) / math.log(v / env0[sym])
        if abs(e - round(e)) > 1e-6 or not 0 <= round(e) <= 3:
            return None
        if round(e):
            powers.append((sym, round(e)))
    k = f0 / math.prod(env0[s] ** e for s, e in powers)
    if abs(k - round(k)) > 1e-6 * max(1.0, k) or round(k) < 1:
        return None
    return round(k), tuple(powers)


def _render_terms(terms: dict[tuple, int]) -> str:
    parts = []
    for powers, k in sorted(terms.items(), key=lambda t: (-sum(e for _, e in t[0]), t[0])):
        factors = [s for s, e in powers for _ in range(e)]  # the expression language has no power
        parts.append(" * ".join(([str(k)] if k != 1 or not factors else []) + factors))
    return " + ".join(parts)


def _flops_by_powers(a: Analysis, singles: dict[str, list[Probe]], env0: dict[str, int]) -> str | None:
    fit = _monomial(a.base.flops, {s: (p[0].values[s], p[0].flops) for s, p in singles.items()}, env0)
    return _render_terms({fit[1]: fit[0]}) if fit else None


def _flops_by_operation(a: Analysis, singles: dict[str, list[Probe]], env0: dict[str, int]) -> str | None:
    """A sum over the counted operations (a deep model's layers), each a number times a product of symbols, like
    terms collected; where the operations are the same at every probe."""
    ops = a.base.ops
    if not ops or any(len(p[0].ops) != len(ops) for p in singles.values()):
        return None
    terms: dict[tuple, int] = {}
    for i, f0 in enumerate(ops):
        at = {s: (p[0].values[s], p[0].ops[i]) for s, p in singles.items()}
        if f0 == 0 and all(f == 0 for _, f in at.values()):
            continue
        fit = _monomial(f0, at, env0)
        if fit is None:
            return None
        terms[fit[1]] = terms.get(fit[1], 0) + fit[0]
    text = _render_terms(terms)
    return text if text and len(text) <= 500 else None
