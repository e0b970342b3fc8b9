"""``ReplayProposer``: replays a trace's model answers, in order, with no model.

Request ``rNNNN`` gets the answer that request had in the trace (its place among the answered requests where
the trace has none for that id), so a replay with several requests in flight, or on several GPUs, gives each
request the same answer as the run it replays whichever request is answered first.

Each recorded answer goes through the same parser as a live one, so a run replayed against the same
sandbox takes the same path (format errors included). Useful for reproducible runs, offline demos and
tests. When the answers run out, the proposer says so by proposing nothing, which ends the phase.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .answer import FormatError, parse_answer
from ..protocols import Proposal, ProposalRequest, Proposer
from ..trace.events import ProposalEvent, read_events


class ReplayProposer(Proposer):
    name = "replay"

    def __init__(self, run_path: str | Path, start: int = 0):
        self.source = Path(run_path)
        events = read_events(self.source)
        answered = [e for e in events if isinstance(e, ProposalEvent) and e.answer is not None]
        self.answers = [e.answer for e in answered]
        self.by_request = {e.request: i for i, e in enumerate(answered) if e.request}
        if not self.answers:
            raise ValueError(f"{self.source}: the trace holds no model answers to replay")
        self._next = start
        self._lock = threading.Lock()

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        with self._lock:
            index = self.by_request.get(request.id, self._next)
            if index >= len(self.answers):
                return []
            self._next = max(self._next, index + 1)
        text = self.answers[index]
        parents = [p.id for p in request.parents[:1]]
        exchange = {"replayed_from": str(self.source), "index": index, "answer": text}
        try:
            parent = request.parents[0].candidate if request.parents else None
            candidate, note = parse_answer(text, request.task, parent=parent)
        except FormatError as exc:
            return [Proposal(None, parents, self.name, error=f"unusable answer: {exc.problem}", exchange=exchange)]
        return [Proposal(candidate, parents, self.name, note=note, exchange=exchange)]

    def observe(self, entry) -> None:
        pass
