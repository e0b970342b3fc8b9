"""The lineage: every evaluated candidate with its parents, and the choice of the next parent.

Ranking: a candidate counts as measured when its status is ``ok`` and it was timed; it ranks by its
speedup over the task's baseline (the interval travels with it, and "faster" means the interval's low
end clears 1.0). Compile-only results are never ranked: nothing was measured. The winner (``best``) is the
earliest entry whose interval overlaps the best-ranked one's: ties go to what came first.

Selection (``select``), in order:
1. repair: the latest candidate failed in a way a model can fix (compile error, wrong result, launch
   error, crash, timeout, rule broken) and its line has had fewer than ``max_repairs`` consecutive
   failures: it is the parent, once;
2. the policy of ``[lineage]`` (``agent.loop.database``): by default ``best_explore``, the best measured
   candidate or, with probability ``explore``, one of the ``pool`` best-ranked candidates after the best;
   ``islands`` and ``archive`` are the others;
3. without measurements, the latest candidate that compiled (serial refinement), else the baseline.

Each pick says why (``last_pick``: the rule, and the island where there are islands); ``inspirations`` gives the
other candidates each prompt shows beside the parent.

Duplicates: a candidate's identity (``sandbox.candidates.plan.identity``) is what would run on the GPU: the cubin's
hash plus the launch plan resolved at every check size and the benchmark size (two knob values can give one
cubin and two launch geometries). A candidate whose identity was seen is skipped before it costs GPU time.
"""

from __future__ import annotations

import random

from sandbox.judging.result import Result, Status

from . import database
from ..config import SelectionConfig
from ..protocols import Entry, Inspiration, score, score_of

REPAIRABLE = (Status.compile_error, Status.wrong, Status.launch_error, Status.crashed, Status.timeout, Status.rejected)


def _overlaps(a, b) -> bool:
    return a is not None and b is not None and a.low <= b.high and b.low <= a.high


class MemoryLineage:
    """The lineage of one run, in memory (the trace is its durable copy)."""

    def __init__(self, selection: SelectionConfig | None = None):
        self.config = selection or SelectionConfig()
        self._entries: dict[str, Entry] = {}
        self._seen: dict[str, str] = {}
        self._repair_picked: set[str] = set()
        self._draws = 0
        self._set_aside: set[str] = set()
        self._cells: dict[str, tuple] = {}
        self.last_pick: database.Pick | None = None

    # ---- the Lineage protocol ----------------------------------------------------------------

    def add(self, entry: Entry, identity: str | None = None) -> None:
        self._entries[entry.id] = entry
        if identity:
            self._seen.setdefault(identity, entry.id)

    def get(self, entry_id: str) -> Entry:
        return self._entries[entry_id]

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def best(self) -> Entry | None:
        """The best-ranked entry, unless an earlier entry is tied with it (their speedup intervals overlap): then
        the earliest of those. A later rewrite takes the lead only when it is measurably faster, so the winner does
        not change with the noise of one measurement (and a candidate tied with the baseline does not win)."""
        ranked = self.ranked()
        if not ranked:
            return None
        top = ranked[0].result.speedup("baseline")
        order = {id_: i for i, id_ in enumerate(self._entries)}
        tied = [e for e in ranked if _overlaps(e.result.speedup("baseline"), top)]
        return min(tied, key=lambda e: order[e.id])

    def would_lead(self, result: Result) -> bool:
        """Whether a candidate with ``result``, added now, would be the winner (``best``): it ranks first and no
        entry before it is tied with it."""
        new = score_of(result)
        if new is None:
            return False
        ranked = self.ranked()
        if ranked and new <= score(ranked[0]):
            return False
        s = result.speedup("baseline")
        return not any(_overlaps(e.result.speedup("baseline"), s) for e in ranked)

    def select(self, k: int = 1, iteration: int | None = None) -> list[Entry]:
        """``k`` parents for request ``iteration`` (which island it works on, with islands)."""
        picks = []
        for _ in range(k):
            pick = self._select_one(iteration)
            if pick is not None:
                picks.append(pick)
        return picks

    def inspirations(self, parent: Entry | None) -> list[Inspiration]:
        """The other candidates a prompt shows beside ``parent`` (``[lineage] inspirations``)."""
        found = database.inspirations(self.points(), parent.id if parent else None, self.config.database.inspirations)
        return [Inspiration(self._entries[p.id], why) for p, why in found]

    def points(self) -> list[database.Point]:
        """The entries as the program database sees them: score (none once set aside), request, behaviour cell."""
        which = tuple(self.config.database.descriptors)
        out = []
        for e in self._entries.values():
            if e.id not in self._cells:
                self._cells[e.id] = database.describe(e.result, e.candidate.source, which)
            out.append(database.Point(e.id, None if e.id in self._set_aside else score(e), e.iteration, self._cells[e.id]))
        return out

    # ---- helpers -------------------------------------------------------------------------------

    def set_aside(self, entry_id: str) -> None:
        """Rank ``entry_id`` no more: it is correct and timed at the task's own sizes, but failed a held-out size
        (``agent.claims.heldout.heldout_winner``), so it cannot be the winner."""
        self._set_aside.add(entry_id)

    def ranked(self) -> list[Entry]:
        scored = [(score(e), i, e) for i, e in enumerate(self._entries.values()) if e.id not in self._set_aside]
        return [e for s, i, e in sorted((t for t in scored if t[0] is not None), key=lambda t: (-t[0], t[1]))]

    def duplicate_of(self, identity: str | None) -> str | None:
        return self._seen.get(identity) if identity else None

    def baseline(self) -> Entry | None:
        return next((e for e in self._entries.values() if e.origin == "baseline"), None)

    def recent_failures(self, n: int, exclude: set[str] = frozenset()) -> list[Entry]:
        failed = [e for e in self._entries.values() if e.result.status in REPAIRABLE and e.id not in exclude]
        return failed[-n:] if n else []

    def failure_depth(self, entry: Entry) -> int:
        depth = 0
        while entry.result.status in REPAIRABLE:
            depth += 1
            if not entry.parent_ids or entry.parent_ids[0] not in self._entries:
                break
            entry = self._entries[entry.parent_ids[0]]
        return depth

    def _has_children(self, entry_id: str) -> bool:
        return any(entry_id in e.parent_ids for e in self._entries.values())

    def note_pick(self) -> None:
        """Replay a selection recorded in a trace: leave the state as ``select(1)`` would have left it, so a
        resumed run draws the same parents as one that never stopped."""
        if self.entries():
            repair = self._repair_pick()
            if repair is not None:
                self._repair_picked.add(repair.id)
            else:
                self._draws += 1

    def _repair_pick(self) -> Entry | None:
        latest = self.entries()[-1]
        if (latest.result.status in REPAIRABLE and latest.origin != "baseline"
                and latest.id not in self._repair_picked and not self._has_children(latest.id)
                and self.failure_depth(latest) <= self.config.max_repairs):
            return latest
        return None

    def _select_one(self, iteration: int | None = None) -> Entry | None:
        entries = self.entries()
        if not entries:
            return None
        repair = self._repair_pick()
        if repair is not None:
            self._repair_picked.add(repair.id)
            self.last_pick = database.Pick(repair.id, f"repair: {repair.id} failed ({repair.result.status.value})")
            return repair
        self._draws += 1
        rng = random.Random(hash((self.config.seed, len(entries), self._draws)))
        db = self.config.database
        settings = database.Settings(db.policy, self.config.explore, self.config.pool, db.islands, db.migration_interval)
        picked = database.pick(self.points(), settings, iteration or self._draws, rng)
        if picked is not None:
            self.last_pick = picked
            return self._entries[picked.id]
        compiled = [e for e in entries if e.result.status in (Status.compiled, Status.ok)]
        chosen = compiled[-1] if compiled else self.baseline() or entries[0]
        self.last_pick = database.Pick(chosen.id, "nothing measured yet: the latest that compiled" if compiled
                                       else "nothing measured or compiled yet")
        return chosen
