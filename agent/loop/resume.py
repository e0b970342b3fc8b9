"""Resuming a run from its ``events.jsonl``: the loop's lineage, totals and counters as the events leave them
(``agent.trace.fold``, the one reading of the log, followed by the loop as the lineage grew), and the built-in
search's recorded steps, which a fresh search replays before it proposes anything new. The proposals recorded but
never evaluated (``RunState.pending``) are evaluated first; their tokens are spent.

A request the kill cut off (asked, its answer never recorded) is asked again under its own id, with its recorded
parents and iteration: a replayed run's answers and a model's prompt depend on them, and its pick is replayed like
any other, so the draws that follow are those of a run that never stopped. A tool-calling session the kill cut off
goes on from the model calls and tool calls it recorded (``agent.proposers.session``): nothing it did is done or
paid for again. Runs resumed before this was so asked
such a request again under a new id; the request they left behind is superseded and its pick not replayed."""

from __future__ import annotations

from ..protocols import Entry, Proposal, ProposalRequest, Proposer
from ..trace.events import Event, PhaseEvent, ProposalEvent
from ..trace.fold import RunState, fold
from .loop import Loop


class _Regrowth:
    """The loop following the lineage as ``fold`` reads it: each draw of parents, each evaluation accounted."""

    def __init__(self, loop: Loop):
        self.loop = loop

    def picked(self) -> None:
        self.loop.lineage.note_pick()

    def evaluated(self, entry: Entry, identity: str | None) -> None:
        self.loop.account(entry, identity)


def restore(loop: Loop, events: list[Event]) -> RunState:
    """Re-apply recorded events to a fresh loop (nothing is written); the state they leave."""
    state = fold(events, replay=_Regrowth(loop))
    totals = loop.totals
    totals.usage, totals.iterations, totals.duplicates = state.usage, state.model_answers, state.duplicates
    totals.by_model = dict(state.by_model)
    totals.screened, totals.screen_gpu_s, totals.gpu_s = state.screened, state.screen_gpu_s, state.gpu_s
    loop.next_request = max(loop.next_request, state.next_request)
    loop.next_candidate = max(loop.next_candidate, state.next_candidate)
    loop.last = None
    loop.cut_off = state.cut_off
    loop.sessions = dict(state.sessions)
    return state


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
