"""How exactly an imported task's outputs must match, measured by running the module on the CPU at the check
sizes, in its own precision and in float64, on the problem's own inputs and on the input variants.

The rules (docs/pytorch-checks.md states them for users):

- Each output's *typical magnitude* T is the smallest standard deviation of its float64 reference over every
  check size and input variant (and the benchmark size: run when the CPU can, else extrapolated from
  doubling each size symbol, where only a shrinking spread is followed). A size where the output is
  structurally flat (its spread under a millionth of its largest spread: a group norm over one element, a
  mean over one value) is left out: a tolerance is never relative to a near-zero spread. The standard
  deviation, not the RMS, so that an output dominated by its mean still rejects a constant.
- The float32 module's own error against float64 gives ``need``: the smallest atol at which the module
  itself passes (after ``rtol * |expected|``), on every check size and variant.
- ``atol = max(FLOOR * T, 2 * need, min(error, CAP * T / 2))`` where ``error`` is the largest absolute
  float32 error (so another draw's error near a cancelling sum still passes), ``rtol`` by dtype; and
  ``atol <= CAP * T`` is required. Where a
  variant's honest error breaks the cap (sums of large-magnitude inputs, say), that variant is dropped for
  the task and the task says so; where the problem's own inputs break it, no tolerance can both accept
  float32 arithmetic and reject wrong answers, and the import is refused.
- An output with no spread within any size and variant (a loss, a scalar) is judged by the magnitude of the
  values it takes instead: T is their smallest RMS. It is *constant* only where that value is the same at every
  size and variant within twice its float32 error (identically zero, often): a kernel that writes the constant is
  right, the task marks the output ``constant = true``, and its atol is that error, never more.
- Refused: a reference that is NaN or infinite on the problem's own inputs, a float32 module with NaN or
  infinities where float64 has none, and float32 and float64 paths that disagree beyond float32 error (for a
  constant, by more than CAP x max(1, its magnitude)).
- The ``parameters`` variant draws the parameters and buffers the module initialises to one value
  (``sandbox.pytorch.parameters``), forward's arguments its own; what forward updates in place (running
  statistics in training mode) is recorded as ``mutated``.

Float32 accumulation over K terms errs by about 6e-8 * sqrt(K / 2) of the output's spread; TF32, half
precision and bfloat16 by 5e-4 or more: FLOOR (2e-4 for float32) separates them, CAP (1e-2) keeps zeros, a
constant and noise at a tenth of the output's spread from passing.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from ..tasks.dtypes import to_compute
from ..tasks.inputs import generate
from .parameters import PARAMETERS, draw_into, drawn_parameters
from .problem import Problem, ProblemError, run_forward
from .shapes import Analysis
from .sizes import Sizer

SEED = 20261201
VARIANTS = ("normal", "wide", "kinks")     # beside the problem's own inputs ("module")
OFFSET = "offset"     # normalization tasks' variant too: a common centre far from zero against the spread (OFFSETS)
OFFSETS = {OFFSET: dict(kind="normal", offset=64.0, scale=1.0)}   # where E[x^2] - E[x]^2 in float32 cancels
RTOL = {"float64": 1e-9, "float32": 1e-4, "float16": 5e-3, "bfloat16": 1e-2}
FLOOR = {"float64": 1e-9, "float32": 2e-4, "float16": 1e-2, "bfloat16": 2e-2}
CAP = {"float64": 1e-6, "float32": 1e-2, "float16": 5e-2, "bfloat16": 1e-1}
FLAT = 1e-6           # a spread under FLAT x the output's largest spread is structural, not typical
CONSTANT = 1e-12      # spread (relative to max(1, RMS)) under which an output is one value


@dataclass
class Sample:
    """One output at one size and input variant."""

    label: str
    variant: str
    numel: int
    spread: float       # standard deviation of the reference
    rms: float
    mean: float
    need: float         # atol the module's own result needs there (0 for a native reference)
    error: float        # largest |own - reference| there
    parity: bool        # NaN and infinities where the reference has them
    nonfinite: bool = False   # the reference has NaN or infinities


@dataclass
class Numerics:
    reference_dtype: str                             # float64, or native: the module's own dtypes
    tolerance: dict[str, tuple[float, float]]        # output key (out0...) -> (atol, rtol)
    reasons: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)   # input variants kept beside the problem's own
    constant: dict[str, float] = field(default_factory=dict)  # output key -> its one value
    typical: dict[str, float] = field(default_factory=dict)   # output key -> T
    drawn: dict[str, dict] = field(default_factory=dict)      # parameter or buffer -> the distribution it is drawn
                                                              # from beside the module's own values (PARAMETERS)
    mutated: list[str] = field(default_factory=list)          # parameters and buffers forward updates in place


def torch_equal(o, p) -> bool:
    """Bitwise equal, NaN where NaN."""
    if o.is_floating_point():
        return bool(o.isnan().equal(p.isnan())) and bool(o.nan_to_num().equal(p.nan_to_num()))
    return bool(o.equal(p))


def _to64(t):
    return t.double() if t.is_floating_point() else t


def variant_args(args: list, variant: str, seed: int) -> list:
    """The problem's own forward arguments with every floating tensor redrawn from ``variant`` (same shape and
    dtype), as the sandbox's generator draws it."""
    import numpy as np
    import torch

    if variant in ("module", PARAMETERS):
        return args
    out = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            name = str(a.dtype).removeprefix("torch.")
            spec = dict(dist=variant, kind=variant, shape=list(a.shape), dtype=name, scale=1.0, low=-1.0, high=1.0)
            spec.update(OFFSETS.get(variant, {}))
            drawn = generate(np, spec, seed + 7919 * i)
            a = torch.from_numpy(np.ascontiguousarray(to_compute(np, drawn, name))).to(a.dtype)
        out.append(a)
    return out


def _run(problem: Problem, overrides: dict[str, int], float64: bool, variant: str = "module", built=None):
    """The module's outputs at one size on one input variant, and in float64 with ``float64``. ``built``: a
    ``_Built`` of this size to run again instead of building the module anew (the build is seeded, so it is the
    same module: a deep network's construction and float64 copy cost more than its runs at a check size)."""
    if built is None:
        built = _Built(problem, overrides)
    model, args = built.fresh(float64=False)
    drawn = draw_into(model, built.drawn, SEED) if variant == PARAMETERS else {}
    args = variant_args(args, variant, SEED)
    outs = run_forward(model, args)
    if not drawn:
        built.updated.update(built.mutated())
    if not float64:
        return model, args, outs, None
    m64, _ = built.fresh(float64=True)
    if drawn:
        import torch

        state = dict([*m64.named_parameters(), *m64.named_buffers()])
        with torch.no_grad():
            for key, value in drawn.items():
                state[key].copy_(value.double())
    args64 = [_to64(a) if hasattr(a, "dtype") else a for a in args]
    return model, args, outs, run_forward(m64, args64)


class _Built:
    """The module and the problem's own inputs at one size, built once, with its float64 copy made on first use;
    ``fresh`` restores the parameters and buffers as built before each run (a forward in training mode updates a
    batch norm's running statistics)."""

    def __init__(self, problem: Problem, overrides: dict[str, int], single: set[str] = frozenset()):
        self.model, self.args = problem.build(overrides, "cpu", seed=SEED)
        self.state = copy.deepcopy(self.model.state_dict())
        self.drawn = drawn_parameters(self.model, single)
        self.varied = {k for k, t in [*self.model.named_parameters(), *self.model.named_buffers()]
                       if t.is_floating_point() and t.numel() > 1 and k not in self.drawn}
        self.updated: set[str] = set()   # what forward was seen to update in place (``mutated``)
        self.m64 = self.state64 = None

    def mutated(self) -> list[str]:
        """The parameters and buffers whose values differ from the module's as built (after a forward)."""
        now = self.model.state_dict()
        return [k for k, v in self.state.items() if not torch_equal(v, now[k])]

    def fresh(self, float64: bool):
        if not float64:
            self.model.load_state_dict(self.state)
            return self.model, self.args
        if self.m64 is None:
            self.model.load_state_dict(self.state)
            self.m64 = copy.deepcopy(self.model).double()
            self.state64 = copy.deepcopy(self.m64.state_dict())
        self.m64.load_state_dict(self.state64)
        return self.m64, None


def _sample(label: str, variant: str, o, e, rtol: float) -> Sample:
    o, e = o.double().reshape(-1), e.double().reshape(-1)
    finite = e.isfinite() & o.isfinite()
    parity = bool(o.isnan().equal(e.isnan())) and bool((o.isinf() & (o > 0)).equal(e.isinf() & (e > 0))) \
        and bool((o.isinf() & (o < 0)).equal(e.isinf() & (e < 0)))
    ef, of = e[finite], o[finite]
    nonfinite = not bool(e.isfinite().all())
    if ef.numel() == 0:
        return Sample(label, variant, int(e.numel()), 0.0, 0.0, 0.0, 0.0, 0.0, parity, nonfinite)
    need = float(((of - ef).abs() - rtol * ef.abs()).clamp(min=0).max())
    return Sample(label, variant, int(e.numel()), float(ef.std(unbiased=False)), float(ef.pow(2).mean().sqrt()),
                  float(ef.mean()), need, float((of - ef).abs().max()), parity, nonfinite)


def measure(problem: Problem, a: Analysis, checks: list[dict[str, int]], variants: tuple[str, ...] = VARIANTS) -> Numerics:
    """The tolerance under the rules above, and which of ``variants`` the task keeps."""
    outs = [k for k in a.base.shapes if k.startswith("out")]
    floating = [k for k in outs if a.base.dtypes[k] in RTOL]
    bench = a.benchmark
    ref64, reasons = True, []
    samples: dict[str, list[Sample]] = {k: [] for k in floating}
    sizer = Sizer(problem, a)
    labelled = [(f"check[{i}]", v) for i, v in enumerate(checks)]
    if bench not in checks and (not a.symbols or sizer.cheap(bench)):
        labelled.append(("benchmark", bench))
    medium = None   # the module's own outputs at the last check size, which _shrinking starts from
    single = {k[6:] for k in a.base.shapes if k.startswith("param:") and all(str(d).isdigit() for d in a.dims[k])}
    drawn, varied, mutated = {}, set(), set()   # drawn: initialised to one value wherever it has several
    for label, values in labelled:
        overrides = {s: v for s, v in values.items() if v != bench[s]}
        built = _Built(problem, overrides, single)
        drawn.update({k: v for k, v in built.drawn.items() if k not in drawn})
        varied |= built.varied
        for variant in ("module", *variants, *([PARAMETERS] if built.drawn else [])):
            try:
                model, args, got, got64 = _run(problem, overrides, ref64, variant, built)
            except ProblemError:
                raise
            except Exception as exc:
                if variant != "module":
                    continue   # a variant outside the module's domain (e.g. indices): the module's own inputs only
                if not ref64:
                    raise ProblemError(f"{problem.path}: forward fails on the CPU at {values}: {type(exc).__name__}: {exc}") from None
                ref64 = False
                reasons.append(f"the reference runs in the module's own precision: forward fails in float64 ({type(exc).__name__})")
                model, args, got, got64 = _run(problem, overrides, False, variant, built)
            if variant == "module":
                again = run_forward(model, args)
                if not all(torch_equal(o, p) for o, p in zip(got, again)):
                    raise ProblemError(f"{problem.path}: forward is not deterministic (two runs on the same inputs differ: "
                                       "dropout or other randomness in training mode?)")
                if label == f"check[{len(checks) - 1}]":
                    medium = got, got64
            expected = got64 if ref64 else got
            for key, o, e in zip(outs, got, expected):
                if key in samples:
                    samples[key].append(_sample(label, variant, o, e, RTOL[a.base.dtypes[key]]))
        mutated |= built.updated
    drawn = {k: v for k, v in drawn.items() if k not in varied}
    shrink = _shrinking(problem, a, sizer, checks[-1], medium, floating, ref64) \
        if a.symbols and "benchmark" not in dict(labelled) else {}
    tried = [*variants, *([PARAMETERS] if drawn else [])]
    kept = [v for v in tried if all(any(s.variant == v for s in samples[k]) for k in floating)] if floating else tried
    for v in tried:
        if v not in kept:
            reasons.append(f"input variant {v!r} left out: forward does not run on it")
    n = Numerics("float64" if ref64 else "native", {}, reasons, kept, drawn=drawn, mutated=sorted(mutated))
    while True:
        worst = _settle(problem, a, samples, shrink, n)
        if worst is None:
            break
        n.variants.remove(worst[0])
        n.reasons.append(worst[1])
    for key in outs:
        if key not in floating:
            n.tolerance[key] = (0.0, 0.0)
    return n


def _settle(problem: Problem, a: Analysis, samples: dict[str, list[Sample]], shrink: dict[str, float], n: Numerics):
    """Every output's tolerance under the rules, with ``n.variants``; or (variant, why) for the variant to drop
    first when a tolerance cannot meet its cap (or a variant breaks NaN/infinity parity). A ProblemError when
    the problem's own inputs cannot meet it."""
    n.tolerance.clear(), n.constant.clear(), n.typical.clear()
    notes = []
    for key, all_samples in samples.items():
        dtype = a.base.dtypes[key]
        use = [s for s in all_samples if s.variant == "module" or s.variant in n.variants]
        name = f"output {key[3:]}"
        own_finite = not any(s.nonfinite for s in use if s.variant == "module")
        for s in use:
            if s.nonfinite and own_finite and s.variant != "module":
                return s.variant, (f"input variant {s.variant!r} left out: outside the problem's domain ({name} is NaN "
                                   f"or infinite at {s.label} there, never on the problem's own inputs)")
            if not s.parity and s.variant != "module":
                return s.variant, (f"input variant {s.variant!r} left out: the float32 module's NaN/infinities differ "
                                   f"from float64's on {name} at {s.label}")
        guests = [s for s in use if s.variant in OFFSETS]   # judged by the tolerance the others need, never widening it
        use = [s for s in use if s.variant not in OFFSETS]
        own = [s for s in use if s.variant == "module"]
        bad = next((s for s in own if s.nonfinite), None)
        if bad is not None:
            raise ProblemError(f"{problem.path}: {name}: the reference is NaN or infinite on the problem's own inputs "
                               f"at {bad.label}: no comparison can tell a right answer there from a wrong one")
        bad = next((s for s in own if not s.parity), None)
        if bad is not None:
            raise ProblemError(f"{problem.path}: {name}: the module's own {dtype} result is NaN or infinite where its "
                               f"float64 result is not, at {bad.label}: the float32 and float64 paths disagree")
        largest = max(s.spread for s in use)
        need = max(s.need for s in use)
        if all(s.spread <= CONSTANT * max(1.0, s.rms) for s in use):
            # one value per size and input (a loss, a norm, a scalar): judged by the magnitude of the values it
            # takes; constant only where that value is the same at every size and input, within float32 error
            values = [s.mean for s in use]
            scale = max(1.0, max(s.rms for s in use))
            if 2 * need > CAP[dtype] * scale:
                worst = max((s for s in use if s.variant != "module"), key=lambda s: s.need, default=None)
                if worst is not None and 2 * worst.need > CAP[dtype] * scale:
                    return worst.variant, (f"input variant {worst.variant!r} left out: the float32 module errs by "
                                           f"{worst.need:.2g} on {name} at {worst.label} there")
                raise ProblemError(f"{problem.path}: {name}: the module's own {dtype} result differs from its float64 "
                                   f"result by up to {need:.2g}, beyond {dtype} error ({CAP[dtype]:g} of its magnitude "
                                   f"{scale:.3g}): the float32 and float64 paths disagree, and no tolerance accepts "
                                   "the one without accepting wrong answers")
            if max(values) - min(values) <= max(CONSTANT * scale, 2 * max(2 * need, 1e-6)):
                value = use[0].mean
                n.constant[key] = value
                n.tolerance[key] = (_round_up(max(2 * need, 1e-6)), RTOL[dtype])
                notes.append(f"{name} is {value:.6g} at every size and input: a kernel that writes {value:.6g} is "
                             "correct (marked constant = true)")
                guest = _unfit(guests, n.tolerance[key][0], dtype, name)
                if guest is not None:
                    return guest
                continue
            typical = [s.rms for s in use if s.rms > FLAT * scale]
            if not typical:
                raise ProblemError(f"{problem.path}: {name} is under {FLAT * scale:.2g} at every size and input, "
                                   "and not one value: no tolerance tells it from zeros")
        else:
            typical = [s.spread for s in use if s.numel >= 2 and s.spread > FLAT * largest]
        if key in shrink:
            typical.append(shrink[key])
        t = min(typical)
        # one draw's need underestimates another's where sums cancel to near zero (an element's error follows
        # the terms' size, not the result's): widen towards the largest absolute error, up to half the cap
        atol = max(FLOOR[dtype] * t, 2 * need, min(max(s.error for s in use), CAP[dtype] * t / 2))
        if atol > CAP[dtype] * t:
            worst = max((s for s in use if s.variant != "module"), key=lambda s: s.need, default=None)
            if worst is not None and 2 * worst.need > CAP[dtype] * t:
                return worst.variant, (f"input variant {worst.variant!r} left out: the float32 module errs by "
                                       f"{worst.need:.2g} on {name} at {worst.label} there, over {CAP[dtype]:g} of the "
                                       f"output's typical spread {t:.3g}")
            raise ProblemError(f"{problem.path}: {name}: the module's own {dtype} result errs by up to {need:.2g} "
                               f"against float64, over {CAP[dtype]:g} of the output's typical spread ({t:.3g}): no "
                               "tolerance accepts float32 arithmetic and rejects wrong answers")
        n.tolerance[key] = (_round_up(atol), RTOL[dtype])
        n.typical[key] = t
        guest = _unfit(guests, n.tolerance[key][0], dtype, name)
        if guest is not None:
            return guest
        notes.append(f"{name}: typical spread {t:.3g}, float32 error needs atol {need:.2g} (largest error "
                     f"{max(s.error for s in use):.2g}); atol = max({FLOOR[dtype]:g} x spread, 2 x need, min(largest "
                     f"error, {CAP[dtype] / 2:g} x spread)), at most {CAP[dtype]:g} x spread")
    n.reasons[:] = [r for r in n.reasons if not r.startswith("output ")] + notes
    return None


def _unfit(guests: list[Sample], atol: float, dtype: str, name: str):
    """(variant, why) for the first guest variant (``OFFSETS``) whose inputs the float32 module itself cannot meet
    within ``atol`` (what the problem's own inputs and the other variants need; per comparison at least ``FLOOR`` x
    the expected output's spread): it is left out rather than loosening the tolerance; None if every one fits."""
    for s in guests:
        if 2 * s.need > max(atol, FLOOR[dtype] * s.spread):
            return s.variant, (f"input variant {s.variant!r} left out: the float32 module errs by {s.need:.2g} on "
                               f"{name} at {s.label} there, beyond the tolerance the other inputs need ({atol:.2g})")
    return None


def _shrinking(problem: Problem, a: Analysis, sizer: Sizer, medium: dict[str, int], found: tuple, outs: list[str],
               float64: bool) -> dict[str, float]:
    """Each output's spread at the benchmark size where the CPU cannot run it: the spread at ``medium`` (the
    last check size, where the module's own inputs gave the outputs ``found``: float32's and float64's) carried
    to the benchmark size by doubling each symbol, following only a shrinking spread (a growing one would loosen
    nothing: the tolerance is capped by the smallest spread anyway)."""
    bench = a.benchmark
    o, o64 = found
    base = {k: float(e.double().std(unbiased=False)) for k, e in zip([k for k in a.base.shapes if k.startswith("out")],
                                                                    o64 or o) if k in outs}
    estimate = dict(base)
    for sym in a.symbols:
        if medium[sym] >= bench[sym]:
            continue
        doubled = {**medium, sym: sizer.snap(sym, 2 * medium[sym])}
        if doubled[sym] <= medium[sym] or not sizer.valid(doubled) or not sizer.cheap(doubled):
            continue
        _, _, outs32, outs64 = _run(problem, {s: v for s, v in doubled.items() if v != bench[s]}, float64)
        for key, e in zip([k for k in a.base.shapes if k.startswith("out")], outs64 or outs32):
            if key in base and base[key] > 0:
                r = float(e.double().std(unbiased=False))
                exponent = min(0.0, max(-1.5, math.log(max(r, 1e-300) / base[key]) / math.log(doubled[sym] / medium[sym])))
                estimate[key] *= (bench[sym] / medium[sym]) ** exponent
    return {k: v for k, v in estimate.items() if base.get(k, 0) > 0}


def _round_up(x: float) -> float:
    """Up to two significant digits, so the toml stays readable."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return round(math.ceil(x / 10**e) * 10**e, -e) if e < 0 else float(math.ceil(x))
