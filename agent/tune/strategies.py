"""Search strategies: generators that yield batches of points and read the values back from memory.

Each strategy is ``f(space, memory, rng, start, budget) -> Iterator[list[Point]]``. When the
generator resumes, every point of the batch it yielded has a value in ``memory`` (``inf`` for a
failure). The driver (``agent.tune.search.Search``) counts the budget and stops early; a strategy only
decides what to try next. All of them try ``start`` (the configuration being tuned) first.

- ``exhaustive``: every point, in order.
- ``random``: uniform sampling without replacement.
- ``default``: a short random start, then coordinate sweeps (every choice of one dimension at a
  time, moving to the best) until a local optimum; from then on one point at a time by expected
  improvement (as ``bayes`` picks it, the space's held dimensions, the compiler options, as the best
  point has them), and a coordinate sweep from every point that becomes the best; where no such point
  is left, restarts as an iterated local search (the best point not yet swept, a kick of two
  dimensions, or a random point).
  Sweeps alone stall where dimensions interact (a tile size that only pays with another thread
  count: every single-dimension move from the pair is slower or does not compile); the model's picks
  leave such a basin, the sweeps then refine what they find.
- ``bayes``: the same random start, then one point at a time by expected improvement under a
  Gaussian-process model of log time (``agent.tune.surrogate``), among all untried points (a random
  sample of them and the neighbours of the best ones where the space is large).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Generator, Iterator

from .points import INF, Memory, Point, Space

Strategy = Callable[[Space, Memory, random.Random, Point, "int | None"], Iterator[list[Point]]]


def exhaustive(space: Space, memory: Memory, rng: random.Random, start: Point, budget: int | None):
    yield [start]
    for point in space.points():
        if point not in memory:
            yield [point]


def random_sampling(space: Space, memory: Memory, rng: random.Random, start: Point, budget: int | None):
    yield [start]
    if space.size <= 1_000_000:
        for index in rng.sample(range(space.size), space.size):
            point = space.point_at(index)
            if point not in memory:
                yield [point]
        return
    misses = 0
    while misses < 1000:
        point = space.random_point(rng)
        if point in memory:
            misses += 1
            continue
        misses = 0
        yield [point]


def _random_start_count(space: Space, budget: int | None) -> int:
    """About a tenth of the budget, between 2 and 2 per dimension."""
    dims = sum(1 for c in space.choices if len(c) > 1)
    share = budget // 10 if budget else dims
    return max(2, min(share, 2 * max(dims, 1)))


def _sweep(space: Space, memory: Memory, center: Point) -> Generator[list[Point], None, Point]:
    """Coordinate descent from ``center``: one dimension at a time, move to the best of its line."""
    dims = [d for d, c in enumerate(space.choices) if len(c) > 1]
    moved = True
    while moved:
        moved = False
        for d in dims:
            line = space.line(center, d)
            todo = [p for p in line if p not in memory]
            if todo:
                yield todo
            best = min(line, key=memory.value)
            if memory.value(best) < memory.value(center):
                center = best
                moved = True
    return center


def _kick(space: Space, point: Point, rng: random.Random, dims: int = 2) -> Point:
    movable = [d for d, c in enumerate(space.choices) if len(c) > 1]
    out = list(point)
    for d in rng.sample(movable, min(dims, len(movable))):
        out[d] = rng.choice([i for i in range(len(space.choices[d])) if i != point[d]])
    return tuple(out)


def _opening(space: Space, memory: Memory, rng: random.Random, start: Point, budget: int | None):
    """The start, then a short random sample (``_random_start_count``)."""
    yield [start]
    sample = _initial_sample(space, memory, rng, budget)
    if sample:
        yield sample


def local_search(space: Space, memory: Memory, rng: random.Random, start: Point, budget: int | None):
    yield from _opening(space, memory, rng, start, budget)
    model = _ExpectedImprovement(space)
    swept: set[Point] = set()
    stale = 0
    while len(memory.values) < space.size and stale < 50:
        best = memory.best_point
        before = len(memory.values)
        if best is not None and best not in swept:
            swept.add(best)
            swept.add((yield from _sweep(space, memory, best)))
        elif (point := model.pick(memory, rng, best)) is not None:
            yield [point]
        else:  # nothing left to pick with the held dimensions as the best has them: iterated local search
            unswept = [p for p in memory.ranked() if p not in swept]
            roll = rng.random()
            if unswept and roll < 0.4:
                center = unswept[0]
            elif roll < 0.7:
                center = _kick(space, best if best is not None else start, rng)
            else:
                center = space.random_point(rng)
            swept.add(center)
            if center not in memory:
                yield [center]
            swept.add((yield from _sweep(space, memory, center)))
        stale = stale + 1 if len(memory.values) == before else 0


BAYES_FULL_SPACE = 20_000   # up to this size every untried point is scored; above it, a sample


def _initial_sample(space: Space, memory: Memory, rng: random.Random, budget: int | None) -> list[Point]:
    sample: list[Point] = []
    while len(sample) < min(_random_start_count(space, budget), space.size - 1):
        point = space.random_point(rng)
        if point not in memory and point not in sample:
            sample.append(point)
    return sample


def _training_points(memory: Memory, rng: random.Random, limit: int = 256) -> list[Point]:
    """The points the model is fitted on: all of them, or past ``limit`` the best half of the limit and
    a random sample of the rest (failures included), so a fit stays cheap."""
    tried = list(memory.values)
    if len(tried) <= limit:
        return tried
    best = memory.ranked()[:limit // 2]
    chosen = set(best)
    return best + rng.sample([p for p in tried if p not in chosen], limit - len(best))


class _ExpectedImprovement:
    """The next point by expected improvement under a Gaussian-process model of log time, among all untried
    points (a random sample of them and the neighbours of the best ones where the space is large). The length
    scales are picked again once the memory has grown by a fifth since the last pick of them."""

    def __init__(self, space: Space):
        import numpy as np

        from .surrogate import positions

        self.np, self.space = np, space
        self.place = [positions(c) for c in space.choices]
        self.everything = list(space.points()) if space.size <= BAYES_FULL_SPACE else None
        self.grid = self.encode(self.everything) if self.everything is not None else None
        self.scales, self.refit_at = None, 0

    def encode(self, points: list[Point]):
        np = self.np
        idx = np.array(points, dtype=np.intp).reshape(len(points), len(self.place))
        return np.stack([self.place[d][idx[:, d]] for d in range(len(self.place))], axis=1)

    def pick(self, memory: Memory, rng: random.Random, held_as: Point | None = None) -> Point | None:
        """None when every point has been tried. ``held_as``: only points with the space's held dimensions
        (``Space.held``) as this point has them."""
        from .surrogate import GaussianProcess, expected_improvement

        np, space = self.np, self.space
        held = [(d, held_as[d]) for d in space.held] if held_as is not None else []

        def eligible(p: Point) -> bool:
            return p not in memory and all(p[d] == i for d, i in held)

        if self.everything is not None:
            open_ = [i for i, p in enumerate(self.everything) if eligible(p)]
            untried, x_untried = [self.everything[i] for i in open_], self.grid[open_]
        else:
            pool = {space.random_point(rng) for _ in range(4096)}
            for p in memory.ranked()[:3]:
                pool.update(q for d in range(len(space.choices)) for q in space.line(p, d))
            if held:
                pool = {tuple(dict(held).get(d, i) for d, i in enumerate(p)) for p in pool}
            untried = sorted(p for p in pool if eligible(p))
            x_untried = self.encode(untried) if untried else None
        if not untried:
            return None
        tried = _training_points(memory, rng)
        finite = [memory.values[p] for p in tried if memory.values[p] < INF]
        if len(finite) < 2:
            return rng.choice(untried)
        y = np.log(np.array(finite))
        fail = y.max() + 0.5 * (y.max() - y.min()) + 0.1   # failures: worse than anything that ran
        y_all = np.array([math.log(memory.values[p]) if memory.values[p] < INF else fail for p in tried])
        refit = self.scales is None or len(memory.values) >= self.refit_at
        gp = GaussianProcess(self.encode(tried), y_all, None if refit else self.scales)
        if refit:
            self.scales, self.refit_at = gp.scales, math.ceil(len(memory.values) * 1.2)
        mu, sigma = gp.predict(x_untried)
        ei = expected_improvement(mu, sigma, float(y.min()))
        top = np.flatnonzero(ei >= ei.max() * (1 - 1e-9))
        return untried[int(top[rng.randrange(len(top))])]


def bayesian(space: Space, memory: Memory, rng: random.Random, start: Point, budget: int | None):
    yield from _opening(space, memory, rng, start, budget)
    model = _ExpectedImprovement(space)
    while len(memory.values) < space.size:
        point = model.pick(memory, rng)
        if point is None:
            return
        yield [point]


STRATEGIES: dict[str, Strategy] = {"exhaustive": exhaustive, "random": random_sampling, "default": local_search,
                                   "bayes": bayesian}


def get_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"unknown search strategy {name!r} (expected one of: {', '.join(STRATEGIES)})")
    return STRATEGIES[name]
