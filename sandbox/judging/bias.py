"""Bias inside the tolerance: an output whose error has one sign in every check.

Each check carries its output's signed error against the float64 reference (``result.Bias``: the mean of
d = (got - expected) / (atol + rtol |expected|) with a 95% interval, and the same signed toward the reference's
magnitude). A kernel that rounds to nearest errs both ways: its mean signed error is a small part of its mean
absolute error, and where one check's errors share a sign (a row normalised by a sum that rounded up) the next
check's sum rounds the other way. A kernel that truncates, or rounds one way, errs with one sign in every check.
An output is flagged when, in each of at least ``MIN_CHECKS`` checks, the mean signed error (or the error toward
zero) is at least ``ONE_SIDED`` of the mean absolute error, its interval excludes 0, and its sign is the same in all.
A flag is reported with the verdict, not a rejection: the errors stay inside the tolerance.
"""

from __future__ import annotations


MIN_CHECKS = 3
ONE_SIDED = 0.5


def bias_flags(checks: list) -> list[str]:
    """One line per flagged output of ``checks`` (``result.Check`` records, which call this for their
    ``Result``; empty: none), naming the output, the direction and the largest mean."""
    by_output: dict[str, list] = {}
    for c in checks:
        if c.bias is not None and c.bias.mean_abs > 0 and c.passed:
            by_output.setdefault(c.output, []).append(c.bias)
    flags = []
    for output, biases in by_output.items():
        if len(biases) < MIN_CHECKS:
            continue
        for name, words in (("mean", ("above", "below")), ("away", ("away from zero", "toward zero"))):
            signs = {_sign(b, name) for b in biases}
            if len(signs) == 1 and 0 not in signs:
                worst = max(biases, key=lambda b: abs(getattr(b, name)))
                low, high = (worst.low, worst.high) if name == "mean" else (worst.away_low, worst.away_high)
                flags.append(f"{output} errs {words[0] if signs == {1} else words[1]} in all {len(biases)} checks "
                             f"(mean {getattr(worst, name):+.3g} of the tolerance, 95% [{low:+.3g}, {high:+.3g}], "
                             f"mean |error| {worst.mean_abs:.3g})")
                break
    return flags


def _sign(b, name: str) -> int:
    """+1 or -1 where the check's mean is one-sided and significant, else 0."""
    mean = getattr(b, name)
    low, high = (b.low, b.high) if name == "mean" else (b.away_low, b.away_high)
    if abs(mean) < ONE_SIDED * b.mean_abs or low <= 0 <= high:
        return 0
    return 1 if mean > 0 else -1
