"""A run's state rebuilt from its ``events.jsonl``, in one reading of the log: ``fold(events) -> RunState``.

Read back by the reader of stored runs (``agent.trace.reader``: entries, steps, what was never evaluated), by the
check a resume makes before it opens a sandbox, and by the resume itself (``agent.loop.resume``), which hands a
``Replay`` to follow the lineage as it grew: each model request's draw of parents and each evaluation, in the order
they were recorded, with the sanitizer's verdicts applied to the entries when they were made (a later draw
sees them as the run did).

A line that does not hold together with the ones before it (an evaluation of a candidate never proposed, a
sanitize event for one never evaluated, a candidate that cannot be read) is a ``TraceError`` naming it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sandbox.candidates.candidate import Candidate, CandidateError
from sandbox.judging.result import Interval

from ..protocols import Entry, Proposal, Usage, score
from .events import (BestEvent, EvaluationEvent, Event, ModelCallEvent, PhaseEvent, ProposalEvent, RequestEvent,
                     SanitizeEvent, ScreenEvent, SkipEvent, ToolCallEvent, TraceError)


@dataclass
class Step:
    """One evaluation, in the order the run made it, with what had been spent up to and including it."""

    n: int                      # 1-based
    entry: Entry
    wall_s: float
    tokens: int
    usd: float
    gpu_s: float
    best_id: str | None         # the winner after this evaluation, as the run recorded it (the baseline counts)
    best: Interval | None       # its speedup over the baseline


@dataclass
class Unevaluated:
    """A proposal that never became an entry: skipped (duplicate, budget, sandbox) or without a candidate."""

    id: str | None
    parents: list[str]
    origin: str
    phase: str
    iteration: int
    reason: str
    note: str = ""


@dataclass
class Pending:
    """A proposal recorded with its candidate and never settled (the run was killed, or a GPU or wall limit
    stopped it first): a resumed run evaluates it before anything else."""

    entry_id: str
    proposal: Proposal
    iteration: int
    phase: str


class Replay(Protocol):
    """What follows the lineage as ``fold`` reads it (a resumed run's loop)."""

    def picked(self) -> None:
        """A model request drew its parents from the lineage (once per request, however often it was asked)."""

    def evaluated(self, entry: Entry, identity: str | None) -> None: ...


@dataclass
class RunState:
    """What the events leave: the entries and steps (a stored run's view), the proposals never evaluated, and the
    counters a resumed loop goes on from."""

    entries: list[Entry] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    unevaluated: list[Unevaluated] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)     # every proposal's, and every model call's no proposal covers
    by_model: dict[str, Usage] = field(default_factory=dict)   # the same per model, where proposals name it
    model_answers: int = 0                          # proposals of the model phase (its iterations)
    screened: int = 0
    screen_gpu_s: float = 0.0
    gpu_s: float = 0.0                              # evaluations' and screenings', summed in the order spent
    duplicates: int = 0
    next_request: int = 0
    next_candidate: int = 0
    cut_off: list[RequestEvent] = field(default_factory=list)   # asked, never answered: asked again on resume
    # the model and tool calls a cut-off tool-calling session recorded, by request: its conversation so far
    sessions: dict[str, list[Event]] = field(default_factory=dict)


def fold(events: list[Event], events_file: Path | str = "events.jsonl", replay: Replay | None = None) -> RunState:
    """The state ``events`` leave (``events_file`` names the file in errors); ``replay`` follows the lineage."""
    state = RunState()
    proposals: dict[str, ProposalEvent] = {}
    by_id: dict[str, Entry] = {}
    settled: set[str] = set()
    state.cut_off, superseded = open_requests(events)
    picked: set[str] = set()
    calls: dict[str, list[ModelCallEvent]] = {}   # model calls no proposal has covered yet, by request
    gpu_s = 0.0
    best: Entry | None = None  # the winner after each evaluation: the baseline, then what the run's best events say
    for ev in events:
        where = f"{events_file}: line {ev.seq + 1}"
        if isinstance(ev, RequestEvent):
            state.next_request = max(state.next_request, int(ev.request[1:]) + 1)
            if ev.phase == "model" and ev.request not in superseded and ev.request not in picked:
                picked.add(ev.request)  # a request asked again was picked once
                if replay is not None:
                    replay.picked()
        elif isinstance(ev, ModelCallEvent):
            calls.setdefault(ev.request, []).append(ev)
        elif isinstance(ev, ProposalEvent):
            state.usage = state.usage + ev.usage
            uncovered = calls.pop(ev.request, []) if ev.request else []
            if ev.model_calls is not None:
                for call in uncovered[:max(0, len(uncovered) - ev.model_calls)]:
                    state.usage = state.usage + call.usage
            if ev.answered_by:
                state.by_model[ev.answered_by] = state.by_model.get(ev.answered_by, Usage()) + ev.usage
            state.model_answers += ev.phase == "model"
            if ev.candidate_id:
                proposals[ev.candidate_id] = ev
                state.next_candidate = max(state.next_candidate, int(ev.candidate_id[1:]) + 1)
            else:
                state.unevaluated.append(_unevaluated(ev, ev.error or "no candidate"))
        elif isinstance(ev, SkipEvent):
            if ev.reason == "duplicate":
                state.duplicates += 1
                settled.add(ev.candidate_id)
            p = proposals.get(ev.candidate_id) if ev.candidate_id else None
            if p is not None:
                reason = f"{ev.reason} of {ev.duplicate_of}" if ev.duplicate_of else ev.reason
                state.unevaluated.append(_unevaluated(p, reason))
        elif isinstance(ev, EvaluationEvent):
            p = proposals.get(ev.candidate_id)
            if p is None or p.candidate is None:
                raise TraceError(f"{where}: evaluation of {ev.candidate_id!r}, which no earlier proposal made")
            entry = Entry(ev.candidate_id, _candidate(p, where), ev.result, list(p.parents), p.origin, p.iteration,
                          p.note, ev.diagnosis)
            state.entries.append(entry)
            by_id[entry.id] = entry
            settled.add(entry.id)
            if replay is not None:
                replay.evaluated(entry, ev.identity)
            gpu_s += entry.result.cost.gpu_s
            state.gpu_s += entry.result.cost.gpu_s
            if best is None and entry.origin == "baseline" and score(entry) is not None:
                best = entry
            tokens = state.usage.prompt_tokens + state.usage.completion_tokens
            state.steps.append(Step(len(state.steps) + 1, entry, ev.wall_s, tokens, state.usage.cost_usd, gpu_s,
                                    best.id if best else None, best.result.speedup("baseline") if best else None))
        elif isinstance(ev, BestEvent):  # written right after the evaluation that made the new winner
            best = by_id.get(ev.candidate_id)
            if best is None:
                raise TraceError(f"{where}: best event for {ev.candidate_id!r}, which was never evaluated")
            if state.steps and state.steps[-1].entry is best:
                state.steps[-1] = dataclasses.replace(state.steps[-1], best_id=best.id,
                                                      best=best.result.speedup("baseline"))
        elif isinstance(ev, ScreenEvent):
            state.screened += len(ev.configurations)
            state.screen_gpu_s += ev.gpu_s
            state.gpu_s += ev.gpu_s
        elif isinstance(ev, ToolCallEvent):
            gpu_s += ev.gpu_s
            state.gpu_s += ev.gpu_s
        elif isinstance(ev, SanitizeEvent):
            sanitized = by_id.get(ev.candidate_id)
            if sanitized is None:
                raise TraceError(f"{where}: sanitize event for {ev.candidate_id!r}, which was never evaluated")
            sanitized.result.record_sanitize(ev.report)
    state.pending = [_pending(p, f"{events_file}: line {p.seq + 1}") for cid, p in proposals.items()
                     if cid not in settled and p.candidate is not None]
    for uncovered in calls.values():
        for call in uncovered:
            state.usage = state.usage + call.usage
    open_ids = {r.request for r in state.cut_off}
    state.sessions = {rid: session for rid in open_ids if (session := _session(events, rid))}
    return state


def _session(events: list[Event], rid: str) -> list[Event]:
    """The conversation a tool-calling session of request ``rid`` recorded: its answered model calls from the
    last one that began a conversation (turn 0), and the tool calls they asked for, in order."""
    mine = [ev for ev in events if getattr(ev, "request", None) == rid and (
        isinstance(ev, ToolCallEvent) or isinstance(ev, ModelCallEvent) and ev.turn is not None)]
    starts = [i for i, ev in enumerate(mine) if isinstance(ev, ModelCallEvent) and ev.turn == 0]
    return mine[starts[-1]:] if starts else []


def open_requests(events: list[Event]) -> tuple[list[RequestEvent], set[str]]:
    """The requests asked and never answered, in the order they were asked (each as last asked), and the ids of
    those superseded: still open when their phase was entered again, and not asked again before a new request.

    An answer is recorded when all its proposals are (``answer_proposals``; in older traces, its first one); a
    request whose answer was recorded in part is asked again, and the search, which retraces the proposals it
    recorded, proposes the rest. A screening answers the latest open request of its phase (the search asks one at
    a time)."""
    open_: dict[str, RequestEvent] = {}
    recorded: dict[str, int] = {}  # proposals recorded since the request was last asked
    waiting: set[str] = set()  # open when their phase was entered again
    superseded: set[str] = set()
    for ev in events:
        if isinstance(ev, RequestEvent):
            recorded[ev.request] = 0
            if ev.request in waiting:
                waiting.discard(ev.request)
            else:
                stale = {r for r in waiting if open_[r].phase == ev.phase}
                waiting -= stale
                superseded |= stale
                for r in stale:
                    del open_[r]
            open_[ev.request] = ev
        elif isinstance(ev, ProposalEvent) and ev.request:
            recorded[ev.request] = recorded.get(ev.request, 0) + 1
            if recorded[ev.request] >= (ev.answer_proposals or 1):
                open_.pop(ev.request, None)
        elif isinstance(ev, ScreenEvent):
            asked = [r for r, req in open_.items() if req.phase == ev.phase]
            if asked:
                open_.pop(asked[-1])
                waiting.discard(asked[-1])
        elif isinstance(ev, PhaseEvent):
            waiting |= {r for r, req in open_.items() if req.phase == ev.name}
    return list(open_.values()), superseded


def _candidate(p: ProposalEvent, where: str) -> Candidate:
    try:
        return p.candidate.candidate()
    except CandidateError as exc:
        raise TraceError(f"{where}: candidate {p.candidate_id!r} cannot be read: {exc}") from None


def _pending(p: ProposalEvent, where: str) -> Pending:
    return Pending(p.candidate_id, Proposal(_candidate(p, where), list(p.parents), p.origin, note=p.note), p.iteration,
                   p.phase)


def _unevaluated(p: ProposalEvent, reason: str) -> Unevaluated:
    return Unevaluated(p.candidate_id, list(p.parents), p.origin, p.phase, p.iteration, reason, p.note)
