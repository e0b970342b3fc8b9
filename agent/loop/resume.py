"""Rebuilding a run's state from its ``events.jsonl``: the lineage, the totals, the counters, the proposals that
were recorded but never evaluated (they are evaluated first; their tokens are spent), the requests a kill cut off
(asked again first, as they were), and the built-in search's recorded steps, which a fresh search replays before it
proposes anything new.

A request the kill cut off (asked, its answer never recorded) is asked again under its own id, with its recorded
parents and iteration: a replayed run's answers and a model's prompt depend on them, and its pick is replayed like
any other, so the draws that follow are those of a run that never stopped. Runs resumed before this was so asked
such a request again under a new id; the request they left behind is superseded and its pick not replayed."""

from __future__ import annotations

from ..protocols import Entry, Proposal, ProposalRequest, Proposer
from ..trace.events import (EvaluationEvent, Event, PhaseEvent, ProposalEvent, RequestEvent, SanitizeEvent, ScreenEvent,
                            SkipEvent)
from .loop import Loop


def restore(loop: Loop, events: list[Event]) -> None:
    """Re-apply recorded events to a fresh loop (nothing is written)."""
    proposals: dict[str, ProposalEvent] = {}
    cut_off, superseded = open_requests(events)
    picked: set[str] = set()
    for ev in events:
        if isinstance(ev, RequestEvent):
            loop.next_request = max(loop.next_request, int(ev.request[1:]) + 1)
            if ev.phase == "model" and ev.request not in superseded and ev.request not in picked:
                picked.add(ev.request)  # a request asked again was picked once
                loop.lineage.note_pick()
        elif isinstance(ev, ProposalEvent):
            loop.totals.usage = loop.totals.usage + ev.usage
            if ev.phase == "model":
                loop.totals.iterations += 1
            if ev.candidate_id:
                proposals[ev.candidate_id] = ev
                loop.next_candidate = max(loop.next_candidate, int(ev.candidate_id[1:]) + 1)
        elif isinstance(ev, EvaluationEvent):
            p = proposals[ev.candidate_id]
            entry = Entry(ev.candidate_id, p.candidate.candidate(), ev.result, list(p.parents), p.origin, p.iteration,
                          p.note, ev.diagnosis)
            loop.account(entry, ev.identity)
        elif isinstance(ev, ScreenEvent):
            loop.totals.screened += len(ev.configurations)
            loop.totals.gpu_s += ev.gpu_s
            loop.totals.screen_gpu_s += ev.gpu_s
        elif isinstance(ev, SkipEvent) and ev.reason == "duplicate":
            loop.totals.duplicates += 1
        elif isinstance(ev, SanitizeEvent):
            loop.lineage.get(ev.candidate_id).result.record_sanitize(ev.report)
    loop.last = None
    loop.cut_off = cut_off


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


def pending_proposals(events: list[Event]) -> list[dict]:
    """Proposals with a candidate and no evaluation (killed, or stopped by a GPU or wall limit)."""
    settled = {ev.candidate_id for ev in events
               if isinstance(ev, EvaluationEvent) or (isinstance(ev, SkipEvent) and ev.reason == "duplicate")}
    out = []
    for ev in events:
        if not isinstance(ev, ProposalEvent) or not ev.candidate_id or ev.candidate_id in settled:
            continue
        cand = ev.candidate.candidate()
        out.append({"candidate_id": ev.candidate_id, "candidate_obj": cand, "origin": ev.origin,
                    "iteration": ev.iteration, "phase": ev.phase,
                    "proposal": Proposal(cand, list(ev.parents), ev.origin, note=ev.note)})
    return out


def recorded_search(events: list[Event], phase: str, lineage) -> tuple[str | None, list[tuple[str, Entry | None]]]:
    """What a search phase did before: its target's id, and each proposal's candidate key with its entry (None
    when it was skipped as a duplicate or never evaluated), in order."""
    target = next((ev.target for ev in events if isinstance(ev, PhaseEvent) and ev.name == phase), None)
    entries = {e.id: e for e in lineage.entries()}
    steps = [(ev.candidate.candidate().key, entries.get(ev.candidate_id)) for ev in events
             if isinstance(ev, ProposalEvent) and ev.phase == phase and ev.candidate is not None]
    return target, steps


class FastForward(Proposer):
    """A search resumed after a stop: a fresh search (same strategy and seed) is led through the steps it had
    taken, each proposal matched with the recorded one and its recorded result observed, nothing evaluated
    again, so it goes on exactly where it was and a killed run ends with the lineage of one that never stopped.
    From the first proposal that differs from the record, every proposal is new."""

    def __init__(self, inner: Proposer, steps: list[tuple[str, Entry | None]]):
        self.inner, self.steps, self.name = inner, list(steps), inner.name

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        while self.steps:
            out: list[Proposal] = []
            for p in self.inner.propose(request) or [None]:
                if p is None:
                    self.steps.clear()
                    return []
                if p.stage == "screen":  # screenings are not steps: the search restores recorded ones itself
                    out.append(p)
                elif self.steps and p.candidate.key == self.steps[0][0]:
                    _, entry = self.steps.pop(0)
                    if entry is not None:
                        self.inner.observe(entry)
                else:
                    self.steps.clear()
                    out.append(p)
            if out:
                return out
        return self.inner.propose(request)

    def observe_screened(self, proposal: Proposal, screened) -> None:
        self.inner.observe_screened(proposal, screened)

    def observe(self, entry: Entry) -> None:
        self.inner.observe(entry)
