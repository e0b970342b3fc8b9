"""A discrete search driven by ask/tell: the space, the memory of values, the budget and early stop.

A ``Search`` hands out batches of points (``ask``) and takes their values (``tell``); the strategy
that picks the points is a generator from ``agent.tune.strategies``. Lower values are better; a failed
point (compile error, launch error, wrong result) has the value ``inf`` and the search moves past
it. ``SharedEvaluations`` lets points that compile to the same code share one evaluation.

    search = Search(space, "default", budget=40, seed=0, start=space.start)
    while batch := search.ask():
        for point in batch:
            search.tell(point, objective(point))
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Hashable

from .points import INF, Memory, Point, Space
from .strategies import get_strategy

NON_ADAPTIVE = frozenset({"exhaustive", "random"})   # strategies whose next points do not depend on values


class Search:
    """One search: strategy, budget (counted evaluations) and early stop against the current best.

    ``budget`` counts evaluations (``tell(..., evaluated=True)``); points told with
    ``evaluated=False`` (duplicates, failures found before running) are free. ``patience``: stop after
    this many evaluations in a row that do not beat the best by more than ``min_gain`` (relative).
    ``max_points``: stop after this many points have values, free ones included (bounds compiles).

    A strategy that does not read values (``NON_ADAPTIVE``) may have several batches handed out at once, so
    that a caller can measure many points together; ``upcoming`` names the points likely to be asked next
    (to compile them ahead).
    """

    def __init__(self, space: Space, strategy: str = "default", budget: int | None = None, seed: int = 0,
                 start: Point | None = None, patience: int | None = None, min_gain: float = 0.01,
                 max_points: int | None = None):
        self.space = space
        self.strategy = strategy
        self.budget = budget
        self.patience = patience
        self.min_gain = min_gain
        self.max_points = max_points
        self.memory = Memory()
        self.start = start if start is not None else tuple(0 for _ in space.choices)
        self._gen = get_strategy(strategy)(space, self.memory, random.Random(seed), self.start, budget)
        self._batch: list[Point] = []
        self._ahead: deque[list[Point]] = deque()   # batches pulled from a non-adaptive strategy, not yet asked
        self._handed: set[Point] = set()
        self._outstanding: set[Point] = set()       # handed out and awaiting a value
        self.evaluations = 0
        self._since_gain = 0
        self._gain_ref = INF
        self._exhausted = False

    @property
    def stop_reason(self) -> str:
        if self.budget is not None and self.evaluations >= self.budget:
            return f"budget of {self.budget} evaluations used"
        if self.patience is not None and self._since_gain >= self.patience:
            return (f"stopped early: {self._since_gain} evaluations in a row without beating the best by "
                    f"more than {self.min_gain:.0%}")
        if self.max_points is not None and len(self.memory.values) >= self.max_points:
            return f"{len(self.memory.values)} configurations tried, the limit"
        if self._exhausted:
            return "the strategy has nothing left to try"
        return ""

    @property
    def finished(self) -> bool:
        return bool(self.stop_reason)

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.evaluations)

    @property
    def adaptive(self) -> bool:
        """Whether the strategy's next points depend on the values of the last ones."""
        return self.strategy not in NON_ADAPTIVE

    def ask(self) -> list[Point]:
        """The next points to evaluate, or [] when finished or while handed-out points await values (an adaptive
        strategy's, or as many as the budget has left)."""
        while not self.finished:
            self._outstanding = {p for p in self._outstanding if p not in self.memory}
            room = None if self.budget is None else self.remaining - len(self._outstanding)
            new = [p for p in self._batch if p not in self.memory and p not in self._handed]
            if room is not None:
                new = new[:max(0, room)]
            if new:
                self._handed.update(new)
                self._outstanding.update(new)
                return new
            if (room is not None and room <= 0) or (self._outstanding and self.adaptive):
                return []
            try:
                self._batch = self._ahead.popleft() if self._ahead else list(dict.fromkeys(next(self._gen)))
            except StopIteration:
                self._exhausted = not self._outstanding
                return []
        return []

    def upcoming(self, n: int) -> list[Point]:
        """Up to ``n`` points without a value that the search is likely to ask for next, without handing them
        out: a non-adaptive strategy's own next points; for the others, the neighbours of the best point
        (a coordinate sweep's next lines run through it)."""
        if self.adaptive:
            best = self.memory.best_point
            if best is None:
                return []
            near = [q for d in range(len(self.space.choices)) for q in self.space.line(best, d)]
            return [q for q in near if q not in self.memory and q not in self._handed][:n]
        out = [p for p in self._batch if p not in self.memory and p not in self._handed]
        for batch in self._ahead:
            out += [p for p in batch if p not in self.memory]
        while len(out) < n:
            try:
                batch = list(dict.fromkeys(next(self._gen)))
            except StopIteration:
                break
            self._ahead.append(batch)
            out += [p for p in batch if p not in self.memory]
        return list(dict.fromkeys(out))[:n]

    def tell(self, point: Point, value: float, evaluated: bool = True) -> None:
        if point in self.memory:
            return
        self.memory.record(point, value)
        v = self.memory.value(point)
        gain = v < INF and (self._gain_ref == INF or v < self._gain_ref * (1 - self.min_gain))
        if gain:
            self._gain_ref = v
        if evaluated:
            self.evaluations += 1
            self._since_gain = 0 if gain else self._since_gain + 1

    @property
    def best(self) -> tuple[Point | None, float]:
        return self.memory.best_point, self.memory.best_value


class SharedEvaluations:
    """Points with the same key (same code, same launch plan) share one evaluation.

    ``route(point, key)`` answers whether the point needs a new evaluation: a ``None`` key is a
    failure found before running (its value is ``failure``), a known key answers at once, a key
    already being evaluated waits for that evaluation. ``resolve(key, value)`` tells every waiting point.
    """

    def __init__(self, search: Search):
        self.search = search
        self.values: dict[Hashable, float] = {}
        self.pending: dict[Hashable, list[Point]] = {}
        self.duplicates = 0
        self.failed_early = 0

    def route(self, point: Point, key: Hashable | None, failure: float = INF) -> bool:
        if key is None:
            self.failed_early += 1
            self.search.tell(point, failure, evaluated=False)
            return False
        if key in self.values:
            self.duplicates += 1
            self.search.tell(point, self.values[key], evaluated=False)
            return False
        if key in self.pending:
            self.duplicates += 1
            self.pending[key].append(point)
            return False
        self.pending[key] = [point]
        return True

    def resolve(self, key: Hashable, value: float, counted: bool = True) -> None:
        """``counted=False`` for a value measured outside the search (the configuration it started from)."""
        self.values[key] = value
        for i, point in enumerate(self.pending.pop(key, [])):
            self.search.tell(point, value, evaluated=counted and i == 0)

    @property
    def outstanding(self) -> int:
        return len(self.pending)


def minimize(search: Search, key_of: Callable[[Point], Hashable | None], measure: Callable[[Hashable], float]) -> Search:
    """Run ``search`` to its end against a synchronous objective: ``key_of(point)`` names the
    experiment (None: fails before running), ``measure(key)`` its value. Offline replays of cached
    measurements and the tests drive searches this way; the tuner does the same across the loop."""
    shared = SharedEvaluations(search)
    while batch := search.ask():
        for point in batch:
            key = key_of(point)
            if shared.route(point, key):
                shared.resolve(key, measure(key))
    return search
