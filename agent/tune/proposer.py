"""The embedded default optimizer: a search over a candidate's knobs and compiler flags.

``TunerProposer`` implements ``agent.protocols.Proposer``. It tunes ``request.parents[0]``: the
space is the candidate's declared knobs times the NVRTC option catalogue of
``agent.tune.space`` (fast math only where the task allows it). Before a configuration is
proposed it is compiled through the sandbox (``agent.tune.source``: in a pool, ahead of the GPU, and not at
all where it is known to give code already built); configurations that compile to the same machine code
with the same launch plan as one already tried are not proposed again, and ones that fail to compile or
whose plan cannot launch are kept as failed values (``inf``) and passed over.

Where the sandbox can screen (``GPUSandbox.screen``, or the fake sandbox's simulation), the search's
configurations are proposed with ``stage="screen"``: the loop measures them in batches in one GPU process
(``observe_screened``) and they never become results. Once the search is over, the best screened
configurations faster than the start (``finalists``, 3 by default) are proposed for a full evaluation
(every check size, the full timing protocol); a finalist that fails it gives way to the next best, up to
twice ``finalists`` in all. Only fully evaluated configurations can be a run's winner. Without screening,
every configuration is evaluated in full. The search ends at its budget (configurations measured), when the
strategy has nothing left, or early, when ``patience`` evaluations in a row have not beaten the best by
more than 1%.

Used by the loop (``kernelwright optimize TASK`` with no model configured)::

    tuner = TunerProposer(sandbox=the_loops_sandbox)
    proposals = tuner.propose(request)      # [] once the search and its finalists are over
    ...screen the proposals marked stage="screen" (then tuner.observe_screened(proposal, screened) for each),
    ...evaluate the others, then tuner.observe(entry) for every evaluated entry...
    tuner.summaries()                       # screened, fully evaluated, duplicates, failures, why it stopped
    tuner.compile_results                   # its own compiles, for the ledger (Ledger.add_compile)
    tuner.close()

One request at a time: a proposal that is not observed by the next ``propose`` (skipped by the loop
as a duplicate, or not measured because a budget ran out) counts as failed. Each new source (a
parent whose source or knob declarations differ) gets its own search and its own budget.

or alone: ``tune(sandbox, task, candidate)`` runs the search to its end and returns the entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import hashlib
import math

from sandbox.candidates.candidate import Candidate, load_candidate
from sandbox.judging.result import Result
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task

from ..protocols import Entry, Proposal, ProposalRequest, Proposer
from ..trace.claim import TuningRecord, TuningSection
from ..trace.events import ScreenedConfig, ScreenEvent
from .search import INF, Search, Space
from .source import SourceSearch
from .strategies import get_strategy
from .space import TuningSpace, flag_groups


COMPILES_PER_EVALUATION = 5   # configurations compiled (duplicates included) per evaluation in the budget
MAX_DEFAULT_BUDGET = 200
SCREEN_BATCH = 32             # configurations of a non-adaptive strategy proposed for screening at once
FIRST_SCREEN_BATCH = 8        # the first time: the GPU starts once a few are compiled, the rest compile meanwhile


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
    """Exhaustive: the whole space; otherwise a fifth of it, at least 20 and at most 200 (configurations
    measured, not compiles: duplicates and compile failures are free)."""
    if strategy == "exhaustive":
        return size
    return min(size, max(20, min(MAX_DEFAULT_BUDGET, math.ceil(0.2 * size))))


def default_patience(strategy: str, space: Space) -> int | None:
    """The default strategy stops after three full coordinate sweeps' worth of evaluations without gain (with
    two, it stopped short of its budget on a 243-point tile space where the model's picks were still finding
    better basins: bench/vs_kernel_tuner.py --replay)."""
    if strategy != "default":
        return None
    return max(10, 3 * sum(len(c) - 1 for c in space.choices))


def default_max_points(strategy: str, budget: int) -> int | None:
    """Configurations tried, duplicates and compile failures included: bounds the compiles."""
    return None if strategy == "exhaustive" else COMPILES_PER_EVALUATION * budget


def tuner_search(space: Space, strategy: str, budget: int, seed: int, start, patience: int | None | str = "auto"):
    """A search as the tuner runs it: ``patience`` "auto" is the strategy's default, and compiles are bounded by
    ``default_max_points``."""
    patience = default_patience(strategy, space) if patience == "auto" else patience
    return Search(space, strategy, budget=budget, seed=seed, start=start, patience=patience,
                  max_points=default_max_points(strategy, budget))


class TunerProposer(Proposer):
    """Search knobs x flags of the parent candidate; see the module docstring.

    strategy: ``default`` (random start, then coordinate sweeps and iterated local search),
        ``bayes``, ``random`` or ``exhaustive``.
    max_evaluations: configurations the search measures per tuned source (screened, or evaluated in full
        without screening; duplicates and compile failures are free); None: ``default_budget`` (a fifth of
        the space, 20 to 200; the whole space for exhaustive).
    seed: the strategy's random seed (same seed, same proposals).
    flags: search the compiler-option catalogue too (False: knobs only).
    sandbox: compiles before proposing, and screens (any ``sandbox.Sandbox``; screening where it
        ``can_screen``); None: a compile-only sandbox for the request's device arch, opened on first use and
        closed by ``close()``.
    patience: evaluations without a 1% gain before stopping; "auto": ``default_patience``; None: never.
    screen: measure the search's configurations by screening and evaluate finalists in full; None: where
        the sandbox can screen.
    finalists: screened configurations evaluated in full after the search.
    """

    name = "tuner"

    def __init__(self, strategy: str = "default", max_evaluations: int | None = None, seed: int = 0,
                 flags: bool = True, sandbox: Sandbox | None = None, patience: int | str | None = "auto", screen: bool | None = None,
                 finalists: int = 3):
        get_strategy(strategy)
        if max_evaluations is not None and max_evaluations < 1:
            raise ValueError(f"max_evaluations must be at least 1, got {max_evaluations}")
        if finalists < 1:
            raise ValueError(f"finalists must be at least 1, got {finalists}")
        self.strategy = strategy
        self.max_evaluations = max_evaluations
        self.seed = seed
        self.flags = flags
        self.patience = patience
        self.sandbox = sandbox
        self.screen = screen
        self.finalists = finalists
        self._owns_sandbox = False
        self._sources: dict[str, SourceSearch] = {}
        self._pending: dict[str, tuple[SourceSearch, str, object]] = {}   # candidate.key -> (source, key, what)
        self._restored: dict[tuple, ScreenedConfig] = {}   # (parent id, knobs, flags) -> a screening a resumed run recorded

    # ---- Proposer ----------------------------------------------------------------------------

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if not request.parents:
            return []
        self._expire_unobserved()
        source = self._source(request, request.parents[0])
        screening = self._screening(request.task)
        wanted = (FIRST_SCREEN_BATCH if source.proposed == 0 else SCREEN_BATCH) \
            if screening and not source.search.adaptive else 1
        source.look_ahead()  # what comes next compiles side by side while it is routed one point at a time
        proposals: list[Proposal] = []
        while len(proposals) < wanted:
            batch = source.search.ask()
            if not batch:
                break
            for point, key in source.route(batch):
                cand = source.tspace.candidate_at(point)
                earlier = self._restored.get((source.parent_id, _config(cand.defines(), cand.flags)))
                if earlier is not None:  # screened before the run was resumed: not measured again
                    source.shared.resolve(key, source.record_screened(key, _screened(earlier)))
                    continue
                source.proposed += 1
                cand = dataclasses.replace(cand, label=f"{source.label}.tune{source.proposed}")
                self._pending[cand.key] = (source, key, "search")
                proposals.append(Proposal(candidate=cand, parent_ids=[source.parent_id], origin="tuner",
                                          note=f"tuner ({self.strategy}): {source.tspace.describe(point)}",
                                          stage="screen" if screening else "evaluate"))
        if proposals:
            source.look_ahead()
            return proposals
        return self._finalist_proposals(source) if screening and source.search.finished else []

    def observe(self, entry: Entry) -> None:
        found = self._pending.pop(entry.candidate.key, None)
        if found is None:
            return
        source, key, what = found
        if what == "search":
            source.shared.resolve(key, objective(entry.result))
        else:
            what.status, what.value, what.entry_id = entry.result.status.value, objective(entry.result), entry.id

    def observe_screened(self, proposal: Proposal, screened) -> None:
        """What screening measured for a proposal marked ``stage="screen"`` (a ``sandbox.host.screener.Screened``)."""
        found = self._pending.pop(proposal.candidate.key, None)
        if found is not None:
            source, key, _ = found
            source.shared.resolve(key, source.record_screened(key, screened))

    def restore_screened(self, events: list[ScreenEvent]) -> None:
        """Screenings a resumed run recorded (its ``screen`` events): a configuration of one of an event's
        parents found again takes its recorded value, unmeasured."""
        for event in events:
            for parent in event.parents:
                for r in event.configurations:
                    self._restored[(parent, _config(r.knobs, r.flags))] = r

    # ---- reporting and lifecycle -----------------------------------------------------------

    def summaries(self) -> list[dict]:
        """One record per tuned source: space, screened and fully evaluated configurations, duplicates,
        failures, finalists, best, stop reason."""
        return [s.summary(self.strategy) for s in self._sources.values()]

    @property
    def sources(self) -> list[SourceSearch]:
        """The searches so far, one per tuned source (what a bench reads after a search)."""
        return list(self._sources.values())

    @property
    def compile_results(self) -> list[Result]:
        """Every compile the tuner ran (for the ledger)."""
        return [r for s in self._sources.values() for r in s.compile_results]

    @property
    def finished(self) -> bool:
        return bool(self._sources) and all(s.search.finished for s in self._sources.values())

    def progress(self) -> dict:
        """Configurations measured so far against the budget, and finalists evaluated in full against their
        number, over every tuned source (for live progress)."""
        sources = list(self._sources.values())
        return {"measured": sum(s.search.evaluations for s in sources),
                "budget": sum(s.search.budget or 0 for s in sources),
                "finished": bool(sources) and all(s.search.finished for s in sources),
                "finalists": sum(1 for s in sources for f in s.finalists if f.status != "proposed"),
                # the number chosen once a source's search is over; until then the most it may choose
                "finalists_total": sum((len(s.finalists) if s.search.finished else self.finalists) for s in sources
                                       if s.screened)}

    def close(self) -> None:
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
            self._owns_sandbox = False

    # ---- internals ---------------------------------------------------------------------------

    def _screening(self, task: Task) -> bool:
        """Screening compares every run with the task's own CUDA baseline: a task without one (imported from
        PyTorch) has every configuration evaluated in full."""
        if self.screen is not None:
            return self.screen and task.has_baseline
        return task.has_baseline and self.sandbox is not None and self.sandbox.can_screen

    def _finalist_proposals(self, source: SourceSearch) -> list[Proposal]:
        out = []
        new = source.next_finalists(self.finalists)
        for number, f in enumerate(new, len(source.finalists) - len(new) + 1):
            source.proposed += 1
            cand = dataclasses.replace(source.tspace.candidate_at(f.point), label=f"{source.label}.tune{source.proposed}")
            self._pending[cand.key] = (source, f.key, f)
            lo, hi = f.screened["relative_ci"] or (f.screened["relative"],) * 2
            out.append(Proposal(candidate=cand, parent_ids=[source.parent_id], origin="tuner",
                                note=f"tuner ({self.strategy}) finalist {number}: "
                                     f"{source.tspace.describe(f.point)}; screened at {f.screened['relative']:.3f} of "
                                     f"the baseline's time [{lo:.3f}, {hi:.3f}]"))
        return out

    def _source(self, request: ProposalRequest, parent: Entry) -> SourceSearch:
        cand = parent.candidate
        ident = hashlib.sha256(repr((cand.source, sorted(cand.knobs.items()))).encode()).hexdigest()[:16]
        if ident in self._sources:
            return self._sources[ident]
        tspace = TuningSpace(cand, flag_groups(request.task, self.flags))
        size = tspace.space.size
        budget = self.max_evaluations or default_budget(self.strategy, size)
        search = tuner_search(tspace.space, self.strategy, budget, self.seed, tspace.start, self.patience)
        sandbox, task = self._sandbox(request), request.task
        source = SourceSearch(task, tspace, search, parent.id, cand.label.split(".tune")[0], objective(parent.result),
                              compile=lambda c: sandbox.compile(task, c),
                              prefetch=lambda cs: sandbox.prefetch(task, cs), speculate=sandbox.kind == "gpu")
        self._sources[ident] = source
        key = source.key_of(tspace.start)
        if key is not None:
            source.points[key] = tspace.start
        if source.shared.route(tspace.start, key):
            source.shared.resolve(key, objective(parent.result), counted=False)
        return source

    def _sandbox(self, request: ProposalRequest) -> Sandbox:
        if self.sandbox is None:
            from sandbox import CompileOnlySandbox

            self.sandbox = CompileOnlySandbox(arch=request.device.get("arch"))
            self._owns_sandbox = True
        return self.sandbox

    def _expire_unobserved(self) -> None:
        """Proposals never observed (the loop skipped them) count as failed, so the search moves on."""
        for source, key, what in self._pending.values():
            if what == "search":
                source.shared.resolve(key, INF)
            else:
                what.status = "not evaluated"
        self._pending.clear()


def _config(knobs: dict, flags) -> tuple:
    return tuple(sorted(knobs.items())), tuple(flags)


def _screened(record: ScreenedConfig):
    from sandbox.host.screener import Screened

    return Screened(record.status, ms=record.ms, baseline_ms=record.baseline_ms, relative=record.relative,
                    relative_ci=record.relative_ci, error=record.error, gpu_s=record.gpu_s, rounds=record.rounds,
                    stopped=record.stopped)


def format_tuning(searches: list[TuningRecord]) -> str:
    """One line per tuned source: what was searched, screened and evaluated in full, and why it stopped."""
    lines = []
    for t in searches:
        dims = " x ".join(f"{n} {k}" for n, k in t.dimensions.items())
        if t.screened:
            measured = (f"{t.screened} screened of a budget of {t.budget}"
                        + (f" ({t.screen_failed} failed)" if t.screen_failed else "")
                        + f", {t.evaluated_in_full} evaluated in full")
            if not t.evaluated_in_full:
                measured += " (no screened configuration was faster than the start)"
        else:
            measured = f"{t.evaluations} evaluated of a budget of {t.budget}"
        unbuilt = f" ({t.not_compiled} known without compiling)" if t.not_compiled else ""
        lines.append(f"search ({t.strategy}) from {t.start or 'the start'}: {t.space_points:,} configurations "
                     f"({dims}); {measured}, {t.duplicates} duplicates of code already measured{unbuilt}, "
                     f"{t.failed_before_running} failed before running; {t.stop_reason or 'not finished'}")
    return "\n".join(lines)


def tuning_section(tuners: list["TunerProposer"]) -> TuningSection | None:
    """What the searches of a run covered (the claim's ``tuning``); None where none ran."""
    searches = [TuningRecord.model_validate(t) for tuner in tuners for t in tuner.summaries()]
    return TuningSection(searches=searches, text=format_tuning(searches)) if searches else None


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


def tune(sandbox: Sandbox, task: Task, candidate: Candidate | None = None, proposer: TunerProposer | None = None,
         ledger=None) -> TuneOutcome:
    """Evaluate ``candidate`` (default: the task's baseline), then run the tuner on it to the end: screening
    where the sandbox can, then the finalists in full. The outcome's entries are the full evaluations only.

    ``ledger`` (an ``agent.claims.ledger.Ledger``), when given, receives every result, compile and screening.
    """
    if candidate is None:
        candidate = dataclasses.replace(load_candidate(task.baseline_path), label="baseline")
    proposer = proposer or TunerProposer(sandbox=sandbox)
    if proposer.sandbox is None:
        proposer.sandbox = sandbox
    origin = "baseline" if candidate.key == load_candidate(task.baseline_path).key else "start"
    sandbox.warm()   # the search's compile workers start while the start is evaluated
    start = Entry(id="e0", candidate=candidate, result=sandbox.evaluate(task, candidate), parent_ids=[],
                  origin=origin, iteration=0)
    entries = [start]
    screened = []
    while True:
        request = ProposalRequest(task=task, parents=[start], best=None, baseline=start, recent_failures=[],
                                  device=dict(sandbox.device), iteration=len(entries))
        proposals = proposer.propose(request)
        if not proposals:
            break
        screen = [p for p in proposals if p.stage == "screen"]
        for p, found in zip(screen, sandbox.screen(task, [p.candidate for p in screen]) if screen else []):
            screened.append(found)
            proposer.observe_screened(p, found)
        for p in proposals:
            if p.stage == "screen":
                continue
            entry = Entry(id=f"e{len(entries)}", candidate=p.candidate, result=sandbox.evaluate(task, p.candidate),
                          parent_ids=p.parent_ids, origin=p.origin, iteration=request.iteration, note=p.note)
            entries.append(entry)
            proposer.observe(entry)
    if ledger is not None:
        for r in proposer.compile_results:
            ledger.add_compile(r)
        for e in entries:
            ledger.add_result(e.result)
        ledger.add_screening(len(screened), sum(s.gpu_s for s in screened))
    best = min(entries, key=lambda e: (objective(e.result), e is not start))
    return TuneOutcome(start=start, best=best, entries=entries, summary=(proposer.summaries() or [{}])[-1])
