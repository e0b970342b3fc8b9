"""The program database: how the lineage picks a parent and the inspirations shown beside it (``[lineage]``).

Parent-selection policies (``[lineage] policy``), each after the repair rule of ``agent.loop.lineage``:

- ``best_explore``: the best measured candidate; with probability ``explore``, one of the ``pool`` next best.
- ``islands``: ``islands`` lineages grown apart. Request ``i`` works on island ``(i - 1) % islands``; an island
  holds the baseline, the candidates its requests made and its migrants: every ``migration_interval``
  evaluations, each island's best is copied into the next island (a ring). On its island, the policy is
  best_explore.
- ``archive`` (the default: it found the best kernels in ``bench/policy.py``, bench/results/policy.md): a
  MAP-Elites archive keeps the best candidate of each cell of behaviour descriptors (``describe``: % of roofline,
  registers, shared memory, technique tags); the best overall, or with probability ``explore`` the elite of
  another cell, drawn uniformly (while every measured candidate shares one cell, one of the ``pool`` next best,
  as best_explore draws).

Inspirations (``[lineage] inspirations`` = k): the k best candidates other than the parent, and the k elites most
different from the parent (cells that differ in the most descriptors, then by speedup; the baseline is no
inspiration), shown in the prompt.

Everything here works on ``Point``s (an id, a score, a cell, the request's iteration), so that ``bench/policy.py``
runs these same policies on recorded landscapes. A pick is a function of the points and the draw's seed, so a
resumed run picks as one that never stopped.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sandbox.judging.result import Result

POLICIES = ("best_explore", "islands", "archive")
DESCRIPTORS = ("roofline", "registers", "shared", "techniques")
TECHNIQUES = {"vector": r"\b(float4|float2|int4|int2|half2|__half2|__nv_bfloat162|uint4)\b",
              "shuffle": r"__shfl_", "shared": r"__shared__", "tensor_cores": r"\b(w?mma|wgmma)\b",
              "async_copy": r"cp\.async|memcpy_async|__pipeline_", "unroll": r"#pragma\s+unroll"}


@dataclass(frozen=True)
class Point:
    id: str
    score: float | None      # speedup over the baseline; None: not measured (failed, compile-only)
    iteration: int           # the request that made it; 0: the baseline
    cell: tuple = ()         # its behaviour descriptors


@dataclass(frozen=True)
class Pick:
    id: str
    why: str                 # in words, for the trace, ``show`` and the report
    island: int | None = None


@dataclass(frozen=True)
class Settings:
    policy: str = "best_explore"
    explore: float = 0.2
    pool: int = 4
    islands: int = 3
    migration_interval: int = 6


def pick(points: list[Point], settings: Settings, iteration: int, rng: random.Random) -> Pick | None:
    """The parent of request ``iteration`` among ``points`` (in the order they were added), or None when nothing
    is measured."""
    if settings.policy == "islands":
        island = (iteration - 1) % settings.islands
        members = island_members(points, settings, island)
        chosen = _best_explore(ranked(members), settings, rng)
        if chosen is None:
            return None
        home = island_of(chosen[0], settings)
        moved = f" (migrated from island {home})" if home not in (None, island) else ""
        return Pick(chosen[0].id, f"island {island}: {chosen[1]}{moved}", island)
    if settings.policy == "archive":
        order = ranked(points)
        if not order:
            return None
        top = order[0]
        others = [e for cell, e in elites(points).items() if cell != top.cell]
        pool = others or order[1:1 + settings.pool]
        if pool and rng.random() < settings.explore:
            e = rng.choice(pool)
            why = (f"the elite of another cell ({describe_cell(e.cell)}), drawn" if others
                   else f"every candidate in one cell: drawn among the {len(pool)} next best")
            return Pick(e.id, f"archive: {why}")
        return Pick(top.id, "archive: the best")
    chosen = _best_explore(ranked(points), settings, rng)
    return Pick(chosen[0].id, chosen[1]) if chosen else None


def _best_explore(order: list[Point], settings: Settings, rng: random.Random) -> tuple[Point, str] | None:
    others = order[1:1 + settings.pool]
    if others and rng.random() < settings.explore:
        return rng.choice(others), f"explore: drawn among the {len(others)} next best"
    return (order[0], "the best") if order else None


def ranked(points: list[Point]) -> list[Point]:
    """Measured points, fastest first; ties go to the earlier."""
    scored = [(p.score, i, p) for i, p in enumerate(points) if p.score is not None]
    return [p for _, _, p in sorted(scored, key=lambda t: (-t[0], t[1]))]


def island_of(point: Point, settings: Settings) -> int | None:
    return None if point.iteration <= 0 else (point.iteration - 1) % settings.islands


def island_members(points: list[Point], settings: Settings, island: int) -> list[Point]:
    """An island's own points, the baseline, and the best of the island before it at every migration."""
    own = [p for p in points if island_of(p, settings) in (None, island)]
    source = (island - 1) % settings.islands
    migrants: dict[str, Point] = {}
    if settings.islands > 1:
        for epoch in range(settings.migration_interval, len(points) + 1, settings.migration_interval):
            came = ranked([p for p in points[:epoch] if island_of(p, settings) == source])
            if came:
                migrants[came[0].id] = came[0]
    seen = {p.id for p in own}
    return own + [p for p in migrants.values() if p.id not in seen]


def elites(points: list[Point]) -> dict[tuple, Point]:
    """The best measured point of each cell."""
    out: dict[tuple, Point] = {}
    for p in ranked(points):
        out.setdefault(p.cell, p)
    return out


def inspirations(points: list[Point], parent_id: str | None, k: int) -> list[tuple[Point, str]]:
    """The k best points other than the parent, then the k elites most unlike the parent: (point, why)."""
    if k <= 0:
        return []
    order = [p for p in ranked(points) if p.id != parent_id]
    best = order[:k]
    parent = next((p for p in points if p.id == parent_id), None)
    taken = {p.id for p in best}
    cell = parent.cell if parent else ()
    unlike = sorted((e for e in elites(points).values() if e.id not in taken and e.id != parent_id
                     and e.cell != cell and e.iteration > 0), key=lambda e: (-_distance(e.cell, cell), -(e.score or 0)))
    return [(p, "one of the best") for p in best] + [(e, f"different: {describe_cell(e.cell)}") for e in unlike[:k]]


def _distance(a: tuple, b: tuple) -> int:
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))


# ---- behaviour descriptors of a real candidate -------------------------------------------------------------


def describe(result: Result, source: str, which: tuple[str, ...] = DESCRIPTORS) -> tuple:
    """The cell of a candidate: % of roofline in fifths, registers and static shared memory in bands (from
    ptxas), and the techniques its source uses."""
    out = []
    for name in which:
        if name == "roofline":
            impl = result.timing.impls.get("candidate") if result.timing else None
            pct = impl.pct_of_roofline if impl is not None else None
            out.append(("roofline", None if pct is None else min(4, int(pct // 20))))
        elif name in ("registers", "shared"):
            kernels = list(result.compile.kernels.values()) if result.compile and result.compile.ok else []
            if name == "registers":
                regs = max((k.registers for k in kernels), default=None)
                out.append(("registers", None if regs is None else _band(regs, (32, 64, 128))))
            else:
                smem = max((k.static_shared for k in kernels), default=None)
                out.append(("shared", None if smem is None else _band(smem, (0, 16384, 49152))))
        elif name == "techniques":
            out.append(("techniques", tuple(t for t, pattern in TECHNIQUES.items() if re.search(pattern, source))))
    return tuple(out)


def _band(value: int, edges: tuple[int, ...]) -> int:
    return next((i for i, edge in enumerate(edges) if value <= edge), len(edges))


def describe_cell(cell: tuple) -> str:
    parts = []
    for item in cell:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            name, value = item
            if name == "roofline":
                parts.append("roofline unknown" if value is None else f"{value * 20}-{value * 20 + 20}% of roofline")
            elif name == "registers":
                parts.append("registers ?" if value is None else ["<=32", "<=64", "<=128", ">128"][value] + " registers")
            elif name == "shared":
                parts.append("shared ?" if value is None else ["no", "<=16 KiB", "<=48 KiB", ">48 KiB"][value]
                             + " static shared memory")
            elif name == "techniques":
                parts.append("techniques: " + (", ".join(value) if value else "none"))
            else:
                parts.append(f"{name}={value}")
        else:
            parts.append(str(item))
    return "; ".join(parts) or "no descriptors"
