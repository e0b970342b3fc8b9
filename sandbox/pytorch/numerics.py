"""How exactly an imported task's outputs must match: the module run on the CPU at the check sizes, in its
own precision and in float64, tells whether a float64 reference works, whether ``forward`` is
deterministic, and how large the outputs are, from which the tolerance follows.

The tolerance separates float32 arithmetic from a precision downgrade. Float32 accumulation over K terms
errs by about 6e-8 * sqrt(K / 2) times the output's RMS (under 5e-5 RMS at the largest element even for
K = 65536); TF32 tensor cores, half-precision inputs and bfloat16 err by 5e-4 RMS or more on a typical
element. So float32 outputs get ``rtol = 1e-4`` and ``atol = 2e-4 * RMS``, where RMS is the reference
output's root mean square extrapolated to the benchmark size (each symbol's effect on it measured by
doubling the symbol at a check size). On zero-mean inputs that separates the two; where an output is
dominated by its mean (sums of uniform [0, 1) inputs), the RMS is mostly mean and the tolerance admits
more relative to the output's fluctuations. Half-precision outputs get 1e-2 instead of 2e-4, integer
outputs must be exact. Where the module's own float32 result misses that tolerance at a check size, the absolute
tolerance is widened to four times its error there, and the task says so.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from .problem import Problem, ProblemError, run_forward
from .shapes import Analysis
from .sizes import Sizer

SEED = 20261201
RELATIVE = {"float64": (1e-9, 1e-9), "float32": (2e-4, 1e-4), "float16": (1e-2, 5e-3)}


@dataclass
class Numerics:
    reference_dtype: str                             # float64, or native: the module's own dtypes
    tolerance: dict[str, tuple[float, float]]        # dtype -> (atol, rtol)
    reasons: list[str] = field(default_factory=list)


def torch_equal(o, p) -> bool:
    """Bitwise equal, NaN where NaN."""
    if o.is_floating_point():
        return bool(o.isnan().equal(p.isnan())) and bool(o.nan_to_num().equal(p.nan_to_num()))
    return bool(o.equal(p))


def _to64(t):
    return t.double() if t.is_floating_point() else t


def _run(problem: Problem, values: dict[str, int], overrides: dict[str, int], float64: bool):
    model, args = problem.build(overrides, "cpu", seed=SEED)
    outs = run_forward(model, args)
    if not float64:
        return model, args, outs, None
    m64 = copy.deepcopy(model).double()
    args64 = [_to64(a) if hasattr(a, "dtype") else a for a in args]
    return model, args, outs, run_forward(m64, args64)


def measure(problem: Problem, a: Analysis, checks: list[dict[str, int]]) -> Numerics:
    torch_outs = [k for k in a.base.shapes if k.startswith("out")]
    bench = a.benchmark
    ref64, reasons = True, []
    errors: dict[str, float] = {}
    rms: dict[str, list[float]] = {k: [] for k in torch_outs}
    for values in checks:
        overrides = {s: v for s, v in values.items() if v != bench[s]}
        try:
            model, args, outs, outs64 = _run(problem, values, overrides, ref64)
        except ProblemError:
            raise
        except Exception as exc:
            if not ref64:
                raise ProblemError(f"{problem.path}: forward fails on the CPU at {values}: {type(exc).__name__}: {exc}") from None
            ref64 = False
            reasons.append(f"the reference runs in the module's own precision: forward fails in float64 ({type(exc).__name__})")
            model, args, outs, outs64 = _run(problem, values, overrides, False)
        again = run_forward(model, args)
        for o, p in zip(outs, again):
            if not (torch_equal(o, p)):
                raise ProblemError(f"{problem.path}: forward is not deterministic (two runs on the same inputs differ: "
                                   "dropout or other randomness in training mode?)")
        expected = outs64 if ref64 else outs
        for key, o, e in zip(torch_outs, outs, expected):
            if o.is_floating_point():
                rms[key].append(float(e.double().pow(2).mean().sqrt()))
                err = float((o.double() - e.double()).abs().max()) if o.numel() else 0.0
                errors[key] = max(errors.get(key, 0.0), err / max(rms[key][-1], 1e-30))
    scale = _scale(problem, a, checks[-1], torch_outs, rms) if checks else {}
    tolerance: dict[str, tuple[float, float]] = {}
    for key in torch_outs:
        dtype = a.base.dtypes[key]
        if dtype not in RELATIVE:
            tolerance[dtype] = (0.0, 0.0)
            continue
        rel_atol, rtol = RELATIVE[dtype]
        atol = rel_atol * scale.get(key, 1.0)
        if errors.get(key, 0.0) > rel_atol:  # the module's own float32 result misses the rule
            atol = max(atol, 4 * errors[key] * scale.get(key, 1.0))
            reasons.append(f"{key}: the module's own {dtype} result errs by {errors[key]:.2g} RMS at a check size, "
                           "so the absolute tolerance is 4x that")
        old = tolerance.get(dtype, (0.0, 0.0))
        tolerance[dtype] = (_round_up(max(old[0], atol)), max(old[1], rtol))
    for key in torch_outs:
        if key in scale:
            reasons.append(f"output {key[3:]}: reference RMS about {scale[key]:.3g} at the benchmark size")
    return Numerics("float64" if ref64 else "native", tolerance, reasons)


def _scale(problem: Problem, a: Analysis, medium: dict[str, int], outs: list[str], rms: dict) -> dict[str, float]:
    """Each floating output's RMS at the benchmark size, extrapolated from ``medium`` (the last check size)."""
    bench = a.benchmark
    sizer = Sizer(problem, a)
    base = {k: v[-1] for k, v in rms.items() if v}
    estimate = dict(base)
    for sym in a.symbols:
        if medium[sym] >= bench[sym]:
            continue
        doubled = {**medium, sym: sizer.snap(sym, 2 * medium[sym])}
        if doubled[sym] <= medium[sym] or not sizer.valid(doubled):
            continue
        overrides = {s: v for s, v in doubled.items() if v != bench[s]}
        _, _, outs32, outs64 = _run(problem, doubled, overrides, False)  # an RMS needs no float64
        for key, e in zip(outs, outs64 or outs32):
            if key in base and base[key] > 0 and e.is_floating_point():
                r = float(e.double().pow(2).mean().sqrt())
                exponent = min(1.5, max(0.0, math.log(max(r, 1e-30) / base[key]) / math.log(doubled[sym] / medium[sym])))
                estimate[key] *= (bench[sym] / medium[sym]) ** exponent
    return {k: max(v, 1e-30) for k, v in estimate.items()}


def _round_up(x: float) -> float:
    """Up to two significant digits, so the toml stays readable."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return round(math.ceil(x / 10**e) * 10**e, -e) if e < 0 else float(math.ceil(x))


