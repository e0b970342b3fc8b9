"""Rebuilding a run's state from its ``events.jsonl``: the lineage, the totals, the counters, and the
proposals that were recorded but never evaluated (they are evaluated first; their tokens are spent)."""

from __future__ import annotations

from ..protocols import Entry, Proposal
from ..trace.events import (EvaluationEvent, Event, ProposalEvent, RequestEvent, SanitizeEvent, ScreenEvent,
                            SkipEvent)
from .loop import Loop


def restore(loop: Loop, events: list[Event]) -> None:
    """Re-apply recorded events to a fresh loop (nothing is written)."""
    proposals: dict[str, ProposalEvent] = {}
    for ev in events:
        if isinstance(ev, RequestEvent):
            loop.next_request = max(loop.next_request, int(ev.request[1:]) + 1)
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
