"""The embedded default optimizer: a search over a candidate's knobs and compiler flags.

``TunerProposer`` implements ``agent.protocols.Proposer``. It tunes ``request.parents[0]``: the
space is the candidate's declared knobs times the NVRTC option catalogue of
``agent.tune.space`` (fast math only where the task allows it). Before a configuration is
proposed it is compiled through the sandbox; configurations that compile to the same machine code
with the same launch plan as one already tried are not proposed again, and ones that fail to
compile or whose plan cannot launch are kept as failed values (``inf``) and passed over. The
search ends at its budget, when the strategy has nothing left, or early, when ``patience``
evaluations in a row have not beaten the best by more than 1%.

Used by the loop (``kernelwright optimize TASK`` with no model configured)::

    tuner = TunerProposer()                 # or TunerProposer(sandbox=the_loops_sandbox)
    proposals = tuner.propose(request)      # [] once the search is over
    ...evaluate each proposal.candidate, then tuner.observe(entry) for every evaluated entry...
    tuner.summaries()                       # what was searched, duplicates, failures, best, why it stopped
    tuner.compile_results                   # its own compiles, for the ledger (Ledger.add_compile)
    tuner.close()

One request at a time: a proposal that is not observed by the next ``propose`` (skipped by the loop
as a duplicate, or not evaluated because a budget ran out) counts as failed. Each new source (a
parent whose source or knob declarations differ) gets its own search and its own budget.

or alone: ``tune(sandbox, task, candidate)`` runs the search to its end and returns the entries.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field

from sandbox.candidate import Candidate, load_candidate
from sandbox.plan import identity
from sandbox.result import Result, Status
from sandbox.task import Task

from ..protocols import Entry, Proposal, ProposalRequest
from .search import INF, Search, SharedEvaluations, Space
from .strategies import get_strategy
from .space import TuningSpace, flag_groups


COMPILES_PER_EVALUATION = 5   # configurations compiled (duplicates included) per evaluation in the budget
MAX_DEFAULT_BUDGET = 200


def objective(result: Result) -> float:
    """Lower is better: time relative to the baseline timed A/B in the same run (drift cancels),
    else the median milliseconds; ``inf`` for anything not correct and timed."""
    if not result.ok or result.timing is None or "candidate" not in result.timing.impls:
        return INF
    s = result.speedup("baseline")
    if s is not None and s.value > 0:
        return 1.0 / s.value
    return result.timing.impls["candidate"].median_ms


def default_budget(strategy: str, size: int) -> int:
    """Exhaustive: the whole space; otherwise a fifth of it, at least 20 and at most 200 (evaluations,
    not compiles: duplicates and compile failures are free)."""
    if strategy == "exhaustive":
        return size
    return min(size, max(20, min(MAX_DEFAULT_BUDGET, math.ceil(0.2 * size))))


def default_patience(strategy: str, space: Space) -> int | None:
    """The default strategy stops after two full coordinate sweeps' worth of evaluations without gain."""
    if strategy != "default":
        return None
    return max(10, 2 * sum(len(c) - 1 for c in space.choices))


def default_max_points(strategy: str, budget: int) -> int | None:
    """Configurations tried, duplicates and compile failures included: bounds the compiles."""
    return None if strategy == "exhaustive" else COMPILES_PER_EVALUATION * budget


@dataclass
class _Session:
    """The search over one source (and its knob declarations)."""

    task: Task
    tspace: TuningSpace
    search: Search
    shared: SharedEvaluations
    parent_id: str
    label: str
    proposed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


class TunerProposer:
    """Search knobs x flags of the parent candidate; see the module docstring.

    strategy: ``default`` (random start, then coordinate sweeps and iterated local search),
        ``random`` or ``exhaustive``.
    max_evaluations: candidates proposed for evaluation per tuned source (duplicates and compile
        failures are free); None: ``default_budget`` (a fifth of the space, 20 to 200; the whole
        space for exhaustive).
    seed: the strategy's random seed (same seed, same proposals).
    flags: search the compiler-option catalogue too (False: knobs only).
    sandbox: used to compile before proposing (any ``sandbox.Sandbox``); None: a compile-only
        sandbox for the request's device arch, opened on first use and closed by ``close()``.
    patience: evaluations without a 1% gain before stopping; "auto": ``default_patience``; None: never.
    """

    name = "tuner"

    def __init__(self, strategy: str = "default", max_evaluations: int | None = None, seed: int = 0,
                 flags: bool = True, sandbox=None, patience: int | str | None = "auto"):
        get_strategy(strategy)
        if max_evaluations is not None and max_evaluations < 1:
            raise ValueError(f"max_evaluations must be at least 1, got {max_evaluations}")
        self.strategy = strategy
        self.max_evaluations = max_evaluations
        self.seed = seed
        self.flags = flags
        self.patience = patience
        self.sandbox = sandbox
        self._owns_sandbox = False
        self._sessions: dict[str, _Session] = {}
        self._pending: dict[str, tuple[_Session, str]] = {}   # candidate.key -> (session, code key)
        self.compile_results: list[Result] = []               # every compile the tuner ran (for the ledger)

    # ---- Proposer ----------------------------------------------------------------------------

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if not request.parents:
            return []
        self._expire_unobserved()
        session = self._session(request, request.parents[0])
        proposals: list[Proposal] = []
        while not proposals:
            batch = session.search.ask()
            if not batch:
                break
            for point in batch:
                cand = session.tspace.candidate_at(point)
                key = self._key(session, cand, request)
                if not session.shared.route(point, key):
                    continue
                session.proposed += 1
                cand = dataclasses.replace(cand, label=f"{session.label}.tune{session.proposed}")
                self._pending[cand.key] = (session, key)
                proposals.append(Proposal(candidate=cand, parent_ids=[session.parent_id], origin="tuner",
                                          note=f"tuner ({self.strategy}): {session.tspace.describe(point)}"))
        return proposals

    def observe(self, entry: Entry) -> None:
        found = self._pending.pop(entry.candidate.key, None)
        if found is not None:
            session, key = found
            session.shared.resolve(key, objective(entry.result))

    # ---- reporting and lifecycle -----------------------------------------------------------

    def summaries(self) -> list[dict]:
        """One record per tuned source: space, evaluations, duplicates, failures, best, stop reason."""
        out = []
        for s in self._sessions.values():
            point, value = s.search.best
            out.append(dict(
                strategy=self.strategy, space_points=s.tspace.space.size,
                dimensions={n: len(c) for n, c in zip(s.tspace.space.names, s.tspace.space.choices)},
                start=s.tspace.describe(s.tspace.start), budget=s.search.budget, evaluations=s.search.evaluations,
                duplicates=s.shared.duplicates, failed_before_running=s.shared.failed_early,
                compile_statuses=dict(s.statuses), best=s.tspace.describe(point) if point is not None else None,
                best_value=value if value < INF else None, finished=s.search.finished,
                stop_reason=s.search.stop_reason))
        return out

    @property
    def finished(self) -> bool:
        return bool(self._sessions) and all(s.search.finished for s in self._sessions.values())

    def close(self) -> None:
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
            self._owns_sandbox = False

    # ---- internals ---------------------------------------------------------------------------

    def _session(self, request: ProposalRequest, parent: Entry) -> _Session:
        cand = parent.candidate
        ident = hashlib.sha256(repr((cand.source, sorted(cand.knobs.items()))).encode()).hexdigest()[:16]
        if ident in self._sessions:
            return self._sessions[ident]
        tspace = TuningSpace(cand, flag_groups(request.task, self.flags))
        size = tspace.space.size
        budget = self.max_evaluations or default_budget(self.strategy, size)
        patience = default_patience(self.strategy, tspace.space) if self.patience == "auto" else self.patience
        search = Search(tspace.space, self.strategy, budget=budget, seed=self.seed, start=tspace.start,
                        patience=patience, max_points=default_max_points(self.strategy, budget))
        session = _Session(request.task, tspace, search, SharedEvaluations(search), parent.id,
                           cand.label.split(".tune")[0])
        self._sessions[ident] = session
        key = self._key(session, cand, request)
        if session.shared.route(tspace.start, key):
            session.shared.resolve(key, objective(parent.result), counted=False)
        return session

    def _key(self, session: _Session, cand: Candidate, request: ProposalRequest) -> str | None:
        """Compile ``cand``; its code key, or None when it cannot run (counted by status)."""
        result = self._sandbox(request).compile(session.task, cand)
        self.compile_results.append(result)
        key = identity(session.task, cand, result.compile) if result.status is Status.compiled else None
        status = result.status.value if result.status is not Status.compiled else "compiled" if key else "launch_error"
        session.statuses[status] = session.statuses.get(status, 0) + 1
        return key

    def _sandbox(self, request: ProposalRequest):
        if self.sandbox is None:
            from sandbox import CompileOnlySandbox

            self.sandbox = CompileOnlySandbox(arch=request.device.get("arch"))
            self._owns_sandbox = True
        return self.sandbox

    def _expire_unobserved(self) -> None:
        """Proposals never observed (the loop skipped them) count as failed, so the search moves on."""
        for session, key in self._pending.values():
            session.shared.resolve(key, INF)
        self._pending.clear()


def format_tuning(summaries: list[dict]) -> str:
    """One line per tuned source: what was searched and why the search stopped."""
    lines = []
    for t in summaries:
        dims = " x ".join(f"{n} {k}" for n, k in t["dimensions"].items())
        lines.append(f"search ({t['strategy']}) from {t['start'] or 'the start'}: {t['space_points']:,} configurations "
                     f"({dims}); {t['evaluations']} evaluated of a budget of {t['budget']}, {t['duplicates']} duplicates "
                     f"of code already measured, {t['failed_before_running']} failed before running; "
                     f"{t['stop_reason'] or 'not finished'}")
    return "\n".join(lines)


@dataclass
class TuneOutcome:
    start: Entry
    best: Entry
    entries: list[Entry]
    summary: dict

    @property
    def significant(self) -> bool:
        """The best is faster than the start with intervals that do not overlap (or clear 1.0 when
        the start is the task's own baseline configuration)."""
        if self.best is self.start:
            return False
        s, s0 = self.best.result.speedup("baseline"), self.start.result.speedup("baseline")
        if s is None:
            return False
        threshold = 1.0 if self.start.origin == "baseline" or s0 is None else s0.high
        return s.low > threshold

    def verdict(self) -> str:
        s = self.best.result.speedup("baseline")
        what = f"{self.best.candidate.label}: {self.best.note or 'the start configuration'}"
        if s is None:
            return f"best: {what} (not timed: no speedup to report)"
        ivl = f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}] vs baseline"
        if self.significant:
            return f"improved: {what}, {ivl}"
        return f"no significant gain over the start configuration: best {what}, {ivl}"


def tune(sandbox, task: Task, candidate: Candidate | None = None, proposer: TunerProposer | None = None,
         ledger=None) -> TuneOutcome:
    """Evaluate ``candidate`` (default: the task's baseline), then run the tuner on it to the end.

    ``ledger`` (an ``agent.claims.ledger.Ledger``), when given, receives every result and compile.
    """
    if candidate is None:
        candidate = dataclasses.replace(load_candidate(task.baseline_path), label="baseline")
    proposer = proposer or TunerProposer(sandbox=sandbox)
    if proposer.sandbox is None:
        proposer.sandbox = sandbox
    origin = "baseline" if candidate.key == load_candidate(task.baseline_path).key else "start"
    start = Entry(id="e0", candidate=candidate, result=sandbox.evaluate(task, candidate), parent_ids=[],
                  origin=origin, iteration=0)
    entries = [start]
    while True:
        request = ProposalRequest(task=task, parents=[start], best=None, baseline=start, recent_failures=[],
                                  device=dict(getattr(sandbox, "device", {})), iteration=len(entries))
        proposals = proposer.propose(request)
        if not proposals:
            break
        for p in proposals:
            entry = Entry(id=f"e{len(entries)}", candidate=p.candidate, result=sandbox.evaluate(task, p.candidate),
                          parent_ids=p.parent_ids, origin=p.origin, iteration=request.iteration, note=p.note)
            entries.append(entry)
            proposer.observe(entry)
    if ledger is not None:
        for r in proposer.compile_results:
            ledger.add_compile(r)
        for e in entries:
            ledger.add_result(e.result)
    best = min(entries, key=lambda e: (objective(e.result), e is not start))
    return TuneOutcome(start=start, best=best, entries=entries, summary=(proposer.summaries() or [{}])[-1])
