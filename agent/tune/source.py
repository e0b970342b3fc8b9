"""The search over one source (a candidate's code and knob declarations): which configuration is which
experiment, what screening measured, and the finalists that are then evaluated in full.

A point of the space is routed to an experiment key (``sandbox.candidates.plan.identity``: the machine code and the
launch plan at every size) before anything runs. Routing compiles as little as it can: a flag choice seen to
change nothing at the point's knob values maps the point to its twin without the flag (``agent.tune.inert``),
the builder shares one compile between knob values the source never reads, and points with a known key are
answered from the value already measured. Compiles of the points likely to come next start ahead
(``Search.upcoming``), so the GPU does not wait for them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from sandbox.candidates.candidate import Candidate
from sandbox.candidates.plan import identity
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import Task

from .inert import FlagEvidence
from .points import INF, Point
from .search import Search, SharedEvaluations
from .space import TuningSpace

FINALIST_SLACK = 0.01   # a finalist's screened time may be this much above the start's and still be tried
LOOKAHEAD = 64          # points compiled ahead of the search: two screening batches, so compiles slower than a
                        # batch's screening do not leave the GPU waiting


def _plainer(a: Point, b: Point, knobs: int) -> bool:
    """``a`` sets fewer flags than ``b`` (ties: the earlier point)."""
    return (sum(1 for c in a[knobs:] if c), a) < (sum(1 for c in b[knobs:] if c), b)


@dataclass
class Finalist:
    """A screened configuration evaluated in full: ``status`` and ``value`` (the objective) once it ran."""

    key: str
    point: Point
    screened: dict
    status: str = "proposed"
    value: float = INF
    entry_id: str = ""


@dataclass
class SourceSearch:
    """``compile(candidate)`` returns the sandbox's compile Result; ``prefetch(candidates)`` starts compiles
    without waiting (or is None). ``start_value``: the objective of the configuration the search starts from,
    measured in full."""

    task: Task
    tspace: TuningSpace
    search: Search
    parent_id: str
    label: str
    start_value: float
    compile: Callable[[Candidate], Result]
    prefetch: Callable[[list[Candidate]], object] | None = None
    speculate: bool = False     # compile the best point's neighbours ahead (an adaptive strategy's likely next asks)
    proposed: int = 0
    statuses: Counter = field(default_factory=Counter)
    not_compiled: int = 0                              # points answered through an inert flag, never compiled
    screened: dict[str, dict] = field(default_factory=dict)   # key -> what screening measured
    finalists: list[Finalist] = field(default_factory=list)
    compile_results: list[Result] = field(default_factory=list)

    def __post_init__(self):
        self.shared = SharedEvaluations(self.search)
        self.flags = FlagEvidence(len(self.tspace.knob_names))
        self._keys: dict[Point, str | None] = {}     # compiled point -> its key (None: fails before running)
        self._code: dict[Point, str] = {}            # compiled point -> its machine code's hash
        self.points: dict[str, Point] = {}           # key -> the first point routed to it

    # ---- routing -------------------------------------------------------------------------------

    def route(self, points: list[Point]) -> list[tuple[Point, str]]:
        """Route ``points`` (compiling what must be); returns those that need a new measurement, with their key."""
        self._ahead([self.flags.canonical(p) for p in points])
        fresh = []
        for point in points:
            key = self.key_of(point)
            if key is not None and (key not in self.points or _plainer(point, self.points[key], self.flags.knobs)):
                self.points[key] = point   # a finalist is shown, and evaluated, with the fewest flags that give its code
            if self.shared.route(point, key):
                fresh.append((point, key))
        return fresh

    def key_of(self, point: Point) -> str | None:
        canon = self.flags.canonical(point)
        self.not_compiled += canon != point
        key = self._compiled(canon)
        for dim in self.flags.unknown(canon) if key is not None else ():
            twin = self.flags.canonical(FlagEvidence.twin(canon, dim))
            if self._compiled(twin) is not None:
                self.flags.learn(canon, dim, self._code[canon] == self._code[twin])
        return key

    def look_ahead(self) -> None:
        """Start compiling the points the search will ask for next (a non-adaptive strategy's), or is likely to
        (an adaptive one's, where ``speculate``: worth it where a GPU would otherwise wait)."""
        if self.speculate or not self.search.adaptive:
            self._ahead([self.flags.canonical(p) for p in self.search.upcoming(LOOKAHEAD)])

    def _ahead(self, points: list[Point]) -> None:
        if self.prefetch is None:
            return
        todo = [p for p in dict.fromkeys(points) if p not in self._keys]
        todo += [FlagEvidence.twin(p, d) for p in todo for d in self.flags.unknown(p)]
        todo = [p for p in dict.fromkeys(todo) if p not in self._keys]
        if todo:
            self.prefetch([self.tspace.candidate_at(p) for p in todo])

    def _compiled(self, point: Point) -> str | None:
        if point in self._keys:
            return self._keys[point]
        cand = self.tspace.candidate_at(point)
        result = self.compile(cand)
        self.compile_results.append(result)
        key = identity(self.task, cand, result.compile) if result.status is Status.compiled and result.compile else None
        status = result.status.value if result.status is not Status.compiled else "compiled" if key else "launch_error"
        self.statuses[status] += 1
        self._keys[point] = key
        if key is not None:
            self._code[point] = result.compile.code_hash or result.compile.cubin_sha256 or key
        return key

    # ---- screening and finalists ------------------------------------------------------------

    def record_screened(self, key: str, screened) -> float:
        """Keep what screening measured for ``key``; returns the value the search is told."""
        value = screened.relative if screened.ok and screened.relative is not None else INF
        self.screened[key] = dict(status=screened.status, relative=screened.relative,
                                  relative_ci=list(screened.relative_ci) if screened.relative_ci else None,
                                  rounds=screened.rounds, stopped=screened.stopped, error=screened.error[:300],
                                  gpu_s=screened.gpu_s, config=self.tspace.describe(self.points[key]))
        return value

    def next_finalists(self, wanted: int) -> list[Finalist]:
        """The best screened configurations not yet tried in full, faster than the start (within the slack):
        as many as it takes for ``wanted`` finalists to have run or be under way, counting failed ones out;
        never more than twice ``wanted`` in all."""
        tried = {f.key for f in self.finalists}
        start_key = self._keys.get(self.tspace.start)
        ranked = sorted((k for k, s in self.screened.items() if s["status"] == "ok" and s["relative"] is not None
                         and k not in tried and k != start_key), key=lambda k: self.screened[k]["relative"])
        eligible = [k for k in ranked if self.screened[k]["relative"] < self.start_value * (1 + FINALIST_SLACK)]
        good = sum(f.status in ("proposed", "ok") for f in self.finalists)
        room = min(wanted - good, 2 * wanted - len(self.finalists))
        new = [Finalist(k, self.points[k], self.screened[k]) for k in eligible[:max(0, room)]]
        self.finalists += new
        return new

    def summary(self, strategy: str) -> dict:
        point, value = self.search.best
        ts, shared = self.tspace, self.shared
        full = [f for f in self.finalists if f.status != "proposed"]
        return dict(strategy=strategy, space_points=ts.space.size,
                    dimensions={n: len(c) for n, c in zip(ts.space.names, ts.space.choices)},
                    start=ts.describe(ts.start), budget=self.search.budget, evaluations=self.search.evaluations,
                    screened=len(self.screened), screen_failed=sum(s["status"] != "ok" for s in self.screened.values()),
                    evaluated_in_full=len(full), finalists=[dict(config=ts.describe(f.point), entry=f.entry_id,
                                                                 status=f.status, screened=f.screened["relative"],
                                                                 value=f.value if f.value < INF else None)
                                                            for f in self.finalists],
                    duplicates=shared.duplicates, not_compiled=self.not_compiled, failed_before_running=shared.failed_early,
                    compile_statuses=dict(self.statuses), best=ts.describe(point) if point is not None else None,
                    best_value=value if value < INF else None, finished=self.search.finished,
                    stop_reason=self.search.stop_reason)
