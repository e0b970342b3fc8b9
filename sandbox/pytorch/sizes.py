"""The sizes of an imported task: the problem's own values as the benchmark size, a tiny size and odd
check sizes small enough for a float64 reference, and held-out sizes near the benchmark one.

A symbol with a step (it only runs at multiples of 8, say) takes values ``r + k * step`` where ``r`` is
its own value modulo the step. Every size is run on the meta device and its shapes compared with the
fitted expressions before it is used; a size that does not run is replaced by a smaller one or left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..tasks import expr
from .problem import Problem, run_forward
from .shapes import Analysis, ProbeFailed, probe

CHECK_ELEMENTS = 1 << 21        # largest tensor of a check size, elements
CHECK_FLOPS = 1 << 31           # counted FLOPs of a check size
ODD_TARGETS = (257, 131, 67, 33, 17)
SMALL_TARGET = 5


@dataclass
class SizePlan:
    benchmark: dict[str, int]
    check: list[dict[str, int]] = field(default_factory=list)
    heldout: list[dict[str, int]] = field(default_factory=list)


class Sizer:
    def __init__(self, problem: Problem, analysis: Analysis):
        self.problem, self.a = problem, analysis
        self.bench = analysis.benchmark
        self._valid: dict[tuple, bool] = {}
        self._flops: dict[tuple, int] = {}     # counted at each probed size, for FLOPs no expression fits
        self._runs: dict[tuple, bool] = {}

    def valid(self, values: dict[str, int]) -> bool:
        key = tuple(sorted(values.items()))
        if key not in self._valid:
            try:
                p = probe(self.problem, {s: v for s, v in values.items() if v != self.bench[s]})
            except ProbeFailed:
                self._valid[key] = False
            else:
                self._valid[key] = not self.a.agrees(p, values)
                self._flops[key] = p.flops
        return self._valid[key]

    def runs(self, values: dict[str, int]) -> bool:
        """Valid (sandbox.pytorch.shapes' fit holds on meta) and the module runs on the CPU there: some sizes pass on
        meta and fail on data (a transposed convolution whose output would be empty)."""
        if not self.valid(values):
            return False
        key = tuple(sorted(values.items()))
        if key not in self._runs:
            self._runs[key] = self.cheap(values) and runs_on_cpu(self.problem, {s: v for s, v in values.items()
                                                                                  if v != self.bench[s]})
        return self._runs[key]

    def snap(self, sym: str, target: float, odd: bool = False) -> int:
        """The value of ``sym``'s progression nearest ``target``; with ``odd``, an odd value, or with an even
        step an odd multiple of it (the nearest thing to odd that the progression has)."""
        g = self.a.symbols[sym]
        r = self.bench[sym] % g or g
        value = r + max(0, round((target - r) / g)) * g
        if odd and value % 2 == 0 and (g % 2 == 1 or (r == g and (value // g) % 2 == 0)):
            value += g
        return value

    def largest_tensor(self, values: dict[str, int]) -> int:
        return max((math.prod(s) for s in self.a.shapes_at(values).values()), default=1)

    def flops(self, values: dict[str, int]) -> int:
        if self.a.flops != "0" or self.a.base.flops <= 0:
            return expr.evaluate(self.a.flops, values)
        self.valid(values)
        return self._flops.get(tuple(sorted(values.items())), CHECK_FLOPS + 1)

    def cheap(self, values: dict[str, int]) -> bool:
        return self.largest_tensor(values) <= CHECK_ELEMENTS and self.flops(values) <= CHECK_FLOPS

    # ---- the sizes -----------------------------------------------------------------------------------

    def tiny(self) -> dict[str, int]:
        """Each symbol in turn at its smallest value that still runs on meta (every symbol 1 where possible); where
        that size fails on data, one symbol raised until it runs."""
        cur = dict(self.bench)
        for sym in sorted(self.a.symbols, key=lambda s: self.bench[s]):
            g = self.a.symbols[sym]
            r = self.bench[sym] % g or g
            for k in [*range(8), *(2**j for j in range(3, 40))]:
                value = r + k * g
                if value >= cur[sym]:
                    break
                if self.valid({**cur, sym: value}):
                    cur[sym] = value
                    break
        if not self.cheap(cur) or self.runs(cur):  # too large to run here: it is checked as it is, as before
            return cur
        for sym in sorted(self.a.symbols, key=lambda s: self.bench[s]):  # one symbol larger, until it runs on data
            g = self.a.symbols[sym]
            for k in [*range(1, 8), *(2**j for j in range(3, 40))]:
                value = cur[sym] + k * g
                if value > self.bench[sym]:
                    break
                if self.runs({**cur, sym: value}):
                    return {**cur, sym: value}
        return cur

    def odd(self, target: int, floor: dict[str, int]) -> dict[str, int] | None:
        values = {s: min(self.bench[s], max(floor[s], self.snap(s, target, odd=True))) for s in self.a.symbols}
        return values if self.runs(values) else None

    def plan(self) -> SizePlan:
        plan = SizePlan(dict(self.bench))
        if not self.a.symbols:
            plan.check = [dict(self.bench)]
            return plan
        tiny = self.tiny()
        sizes = [tiny]
        small = self.odd(SMALL_TARGET, tiny)
        if small and self.cheap(small):
            sizes.append(small)
        for target in ODD_TARGETS:
            medium = self.odd(target, tiny)
            if medium and self.cheap(medium):
                sizes.append(medium)
                break
        plan.check = _distinct(sizes, [])
        plan.heldout = _distinct([h for h in self.heldout(tiny) if h], [self.bench] + plan.check)
        return plan

    def heldout(self, tiny: dict[str, int]) -> list[dict[str, int] | None]:
        """Near the benchmark size: every symbol one step off (odd where it can be), and a reshaped size
        (the largest symbol doubled, the next halved; a single symbol at three quarters)."""
        near = {}
        for s in self.a.symbols:
            g, v = self.a.symbols[s], self.bench[s]
            near[s] = v - g if v - g >= tiny[s] else v + g
        order = sorted(self.a.symbols, key=lambda s: -self.bench[s])
        reshaped = dict(self.bench)
        if len(order) >= 2:
            reshaped[order[0]] = self.snap(order[0], 2 * self.bench[order[0]])
            reshaped[order[1]] = max(tiny[order[1]], self.snap(order[1], self.bench[order[1]] / 2))
        else:
            reshaped[order[0]] = max(tiny[order[0]], self.snap(order[0], self.bench[order[0]] * 3 / 4, odd=True))
        limit = 2 * self.largest_tensor(self.bench)
        return [v if self.valid(v) and self.largest_tensor(v) <= limit else None for v in (near, reshaped)]


def runs_on_cpu(problem: Problem, overrides: dict[str, int]) -> bool:
    try:
        model, args = problem.build(overrides, "cpu", seed=0)
        run_forward(model, args)
    except Exception:  # the module's own code failing at these sizes
        return False
    return True


def _distinct(sizes: list[dict[str, int]], exclude: list[dict[str, int]]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = []
    for s in sizes:
        if s not in out and s not in exclude:
            out.append(s)
    return out


def plan_sizes(problem: Problem, analysis: Analysis) -> SizePlan:
    return Sizer(problem, analysis).plan()
