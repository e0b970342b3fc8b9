"""The vocabulary of a discrete search: a point (one index per dimension), the space of points, the memory of
values told so far. Both ``agent.tune.search`` (the driver) and ``agent.tune.strategies`` (what to try next) read it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Iterator

Point = tuple[int, ...]   # one index into each dimension's choices
INF = math.inf


@dataclass(frozen=True)
class Space:
    """The product of named dimensions; a point picks one choice in each."""

    names: tuple[str, ...]
    choices: tuple[tuple[Any, ...], ...]
    # dimensions a model's picks hold at the best point's choice, left to sweeps (compiler options: many leave
    # the machine code as it was, which no model of the time can tell from a real change)
    held: tuple[int, ...] = ()

    def __post_init__(self):
        if len(self.names) != len(self.choices) or any(not c for c in self.choices):
            raise ValueError("every dimension needs a name and at least one choice")

    @property
    def size(self) -> int:
        return math.prod(len(c) for c in self.choices)

    def point_at(self, index: int) -> Point:
        """The ``index``-th point in row-major order (the last dimension varies fastest)."""
        out = []
        for c in reversed(self.choices):
            index, i = divmod(index, len(c))
            out.append(i)
        return tuple(reversed(out))

    def points(self) -> Iterator[Point]:
        return (self.point_at(i) for i in range(self.size))

    def random_point(self, rng: random.Random) -> Point:
        return tuple(rng.randrange(len(c)) for c in self.choices)

    def line(self, point: Point, dim: int) -> list[Point]:
        """The other points that differ from ``point`` in dimension ``dim`` only."""
        return [point[:dim] + (i,) + point[dim + 1:] for i in range(len(self.choices[dim])) if i != point[dim]]

    def decode(self, point: Point) -> dict[str, Any]:
        return {n: c[i] for n, c, i in zip(self.names, self.choices, point)}


class Memory:
    """Every value told so far, and the best point."""

    def __init__(self):
        self.values: dict[Point, float] = {}
        self.best_point: Point | None = None

    def __contains__(self, point: Point) -> bool:
        return point in self.values

    def value(self, point: Point) -> float:
        return self.values.get(point, INF)

    @property
    def best_value(self) -> float:
        return self.value(self.best_point) if self.best_point is not None else INF

    def record(self, point: Point, value: float) -> None:
        value = INF if value is None or math.isnan(value) else float(value)
        self.values[point] = value
        if value < self.best_value:
            self.best_point = point

    def ranked(self) -> list[Point]:
        """Points with a finite value, best first."""
        return sorted((p for p, v in self.values.items() if v < INF), key=self.values.__getitem__)
