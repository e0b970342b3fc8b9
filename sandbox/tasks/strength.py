"""Check strength: wrong answers run through a task's own comparison, which must reject each of them.

An impostor is an output a wrong kernel would write: all zeros, one constant (the reference's mean, the
best a constant can do), an input passed through where its shape is the output's, the reference with noise
at ten times the tolerance, and for a PyTorch task the float32 module with one operation skipped. It passes
the task when it passes the comparison on every check size and every input distribution: exactly what a
kernel must do to be called correct. A task where an impostor passes cannot tell that wrong answer from a
right one, unless the output is marked ``constant`` and the impostor writes one value (then zeros or the constant
are right answers; an input copied, noise or a skipped step that passes is still a failed check).

The reference outputs come from the caller (``check_task`` computes them with the task's own reference);
this module only compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np

from ..judging.compare import compare, spread_atol
from .dtypes import DTYPES, from_float64, to_compute

NOISE = 10.0   # the noise impostor sits this many tolerances from the reference
ULP = {"float64": (2.0**-52, 2.0**-1022), "float32": (2.0**-23, 2.0**-126), "float16": (2.0**-10, 2.0**-14),
       "bfloat16": (2.0**-7, 2.0**-126)}   # (relative spacing, smallest normal)

ONE_VALUE = ("zeros", "constant")   # the impostors that write one value: right answers of a constant output, and
                                   # the only ones (an input copied, noise or a skipped step passing one is a loose
                                   # tolerance)
Verdict = Literal["rejected", "passes", "right_answer", "not_applicable"]


@dataclass
class Case:
    """One check: the inputs as generated (storage dtypes) and the reference's outputs."""

    label: str
    inputs: dict
    expected: dict


@dataclass
class ImpostorResult:
    impostor: str            # zeros, constant, identity:<input>, noise, skip-op:<op>
    output: str
    verdict: Verdict
    detail: str = ""


@dataclass
class Strength:
    results: list[ImpostorResult] = field(default_factory=list)

    @property
    def passing(self) -> list[ImpostorResult]:
        return [r for r in self.results if r.verdict == "passes"]

    def summary(self) -> str:
        def names(verdict):
            seen = []
            for r in self.results:
                if r.verdict == verdict:
                    label = f"{r.impostor} ({r.output})"
                    if label not in seen:
                        seen.append(label)
            return ", ".join(seen)

        parts = []
        for verdict, head in (("passes", "PASSES"), ("rejected", "rejects"), ("right_answer", "right answers"),
                              ("not_applicable", "not applicable")):
            text = names(verdict)
            if text:
                parts.append(f"{head}: {text}")
        return "; ".join(parts)


def _store(values: np.ndarray, dtype: str) -> np.ndarray:
    """An impostor's values as a kernel of this dtype would write them."""
    if DTYPES[dtype].is_float:
        return from_float64(np, np.asarray(values, dtype=np.float64), dtype)
    info = np.iinfo(np.dtype(DTYPES[dtype].numpy))
    return np.clip(np.rint(np.nan_to_num(values)), info.min, info.max).astype(DTYPES[dtype].numpy)


def _passes(got: np.ndarray, expected: np.ndarray, dtype: str, tol) -> bool:
    with np.errstate(all="ignore"):
        return bool(compare(np, to_compute(np, got, dtype), expected, tol.atol, tol.rtol, tol.spread)["passed"])


def measure(task, cases: list[Case], extra: dict[str, tuple[Callable[[Case], dict | None], str]] | None = None) -> Strength:
    """Run every impostor through ``task``'s comparison on ``cases``, in their order, up to the first check that
    rejects it; ``extra`` adds named impostors: a function returning whole outputs for a case (None where it does not
    apply: it is asked of the first case, and an impostor applies to every case or to none) and the reason it does
    not apply."""
    strength = Strength()
    rng = np.random.default_rng(20261202)
    for out in task.spec.outputs:
        tol = task.output_tolerance(out)
        shape_of = lambda c: tuple(np.shape(c.expected[out.name]))  # noqa: E731

        def run(name: str, make: Callable[[Case], np.ndarray | None], why_na: str = "") -> None:
            # in the cases' order (check-task's: the check sizes in turn, an imported task's smallest first): one
            # failed check rejects an impostor, so the checks after it are not run (a skipped operation runs the
            # module at each)
            for i, c in enumerate(cases):
                made = make(c)
                if made is None:
                    strength.results.append(ImpostorResult(name, out.name, "not_applicable", why_na))
                    return
                if not _passes(_store(made, out.dtype), c.expected[out.name], out.dtype, tol):
                    strength.results.append(ImpostorResult(name, out.name, "rejected",
                                                           f"fails {c.label} ({i + 1} of {len(cases)} checks run)"))
                    return
            if not cases:
                strength.results.append(ImpostorResult(name, out.name, "not_applicable", why_na))
            elif out.constant and name in right:
                strength.results.append(ImpostorResult(name, out.name, "right_answer",
                                                       f"{out.name} is marked constant: this writes its value"))
            else:
                strength.results.append(ImpostorResult(name, out.name, "passes",
                                                       f"passes all {len(cases)} checks: the task cannot tell it from a "
                                                       "right answer"))

        # one value for every check, as a kernel that writes a constant writes it: the mean of every reference value
        pooled = np.concatenate([np.ravel(np.asarray(c.expected[out.name], dtype=np.float64)) for c in cases] or [[]])
        pooled = pooled[np.isfinite(pooled)]
        value = float(pooled.mean()) if pooled.size else 1.0
        # a constant output's right answers: the constant where the reference is one value everywhere, zeros where
        # that value is zero (passing a looser tolerance is no right answer)
        scale = max(1.0, float(np.abs(pooled).max())) if pooled.size else 1.0
        one = bool(pooled.size) and float(pooled.max() - pooled.min()) <= 1e-12 * scale
        right = ONE_VALUE if one and abs(value) <= 1e-12 * scale else ("constant",) if one else ()
        run("zeros", lambda c: np.zeros(shape_of(c)))
        run("constant", lambda c: np.full(shape_of(c), value))
        for inp in task.spec.inputs:
            def ident(c, inp=inp):
                x = c.inputs[inp.name]
                if tuple(np.shape(x)) != shape_of(c):
                    return None
                return to_compute(np, x, inp.dtype).astype(np.float64)
            if all(tuple(np.shape(c.inputs[inp.name])) == shape_of(c) for c in cases):
                run(f"identity:{inp.name}", ident)
        if not any(r.impostor.startswith("identity:") and r.output == out.name for r in strength.results):
            strength.results.append(ImpostorResult("identity", out.name, "not_applicable",
                                                   f"no input has {out.name}'s shape"))

        def noisy(c):
            e = np.asarray(c.expected[out.name], dtype=np.float64)
            sign = np.where(rng.random(e.shape) < 0.5, -1.0, 1.0)
            step = NOISE * (spread_atol(np, e, tol.atol, tol.spread) + tol.rtol * np.abs(e))
            if not DTYPES[out.dtype].is_float:
                step = np.maximum(step, 1.0)   # an exact integer output: off by one or more
            else:   # an exact float output (data movement): off by a few units in the last place
                eps, tiny = ULP[out.dtype]
                step = np.maximum(step, 4 * eps * np.abs(e) + tiny)
            return np.where(np.isfinite(e), e + sign * step, e)
        run(f"noise x{NOISE:g}", noisy)
        for name, (make, why) in (extra or {}).items():
            def pick(c, make=make):
                got = make(c)
                return None if got is None or out.name not in got else to_compute(np, np.asarray(got[out.name]), out.dtype).astype(np.float64)
            run(name, pick, why)
    return strength
