"""Candidates between their proposal and their record: compiled, checked against the builds already seen,
evaluated, and handed back to the loop in the order they were proposed.

One mode for one GPU and many (the sandbox's evaluation contract, ``sandbox.protocol``): every candidate's compile
is submitted as soon as it is added; then, in proposal order and while fewer than the sandbox's ``slots``
evaluations are under way, each compiled candidate is judged (``_judge``: a GPU or wall limit forbids evaluating
it, it did not compile, it is a build already in the lineage or under evaluation ahead of it, so that the same
candidates are skipped whatever finishes first) and, if none of these, submitted for evaluation. A local sandbox
has one slot and runs its jobs when waited on, so each candidate is judged after the one before it was recorded,
against the lineage and the limits as that left them; a ``RaySandbox`` compiles on the cluster's CPUs and
evaluates on up to ``slots`` GPUs at once. ``head`` returns the oldest candidate only once it is settled, so what
the loop records, and every decision it takes from the lineage, is the same whichever GPU finished first.

A request whose answer had no candidate holds a place too (an empty item), settled at once: its place in the
order is what lets the loop send its next request at the same point whatever the sandbox.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from sandbox.candidates.candidate import Candidate
from sandbox.candidates.plan import identity
from sandbox.jobs import Evaluated, Failed, Invalid, Job, Lost, Outcome
from sandbox.judging.result import Result, Status
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task

from .judge import invalid
from ..protocols import Lineage, Proposal, Proposer


@dataclass(eq=False)
class Item:
    """One proposed candidate (or the empty place of an answer without one) and what became of it.

    Settled as one of: ``result`` (evaluated, or failed to compile: a value like any other), ``duplicate_of``,
    ``blocked`` (a GPU or wall limit forbade evaluating it), ``failure`` (the sandbox itself failed: the run
    stops), ``lost`` (its GPU actor was lost twice: only this candidate is skipped), or nothing (empty)."""

    entry_id: str | None
    candidate: Candidate | None
    proposal: Proposal | None
    iteration: int
    phase: str
    proposer: Proposer | None = None
    request: str | None = None     # the request whose answer it came from
    settled: bool = False
    result: Result | None = None
    identity: str | None = None
    duplicate_of: str | None = None
    blocked: Any = None
    failure: str | None = None
    lost: list[str] = field(default_factory=list)
    compiled: Outcome | None = None   # what its compile job returned
    judged: bool = False              # past ``Pipeline._judge``: settled, or its evaluation under way


class Pipeline:
    """See the module docstring. ``gate(phase)`` returns a limit that forbids evaluating now (GPU time, wall
    time), or None."""

    def __init__(self, sandbox: Sandbox, task: Task, lineage: Lineage, gate: Callable[[str], Any]):
        self.sandbox, self.task, self.lineage, self.gate = sandbox, task, lineage, gate
        self.items: deque[Item] = deque()
        self._ahead: dict[str, str] = {}   # identities of candidates under evaluation, not yet recorded

    def __len__(self) -> int:
        return len(self.items)

    def requests(self) -> int:
        """Requests with a candidate (or the empty place of their answer) not yet handed back."""
        return len({item.request for item in self.items})

    def add(self, item: Item) -> None:
        self.items.append(item)
        if item.candidate is None:
            item.settled = True
        else:
            self.sandbox.submit_compile(self.task, item.candidate, tag=item)

    def head(self, timeout: float = 0.0) -> Item | None:
        """The oldest item once it is settled (then it leaves the pipeline), else None after waiting up to
        ``timeout`` seconds for work under way."""
        if not self.items:
            return None
        if not self.items[0].settled:
            self._advance(timeout)
        item = self.items[0]
        if not item.settled:
            return None
        self.items.popleft()
        if item.identity and self._ahead.get(item.identity) == item.entry_id:
            del self._ahead[item.identity]
        return item

    def settle(self, item: Item) -> Item:
        """``item`` alone through an empty pipeline (the baseline, a resumed proposal), waited for until settled."""
        self.add(item)
        while self.head(0.5) is None:
            pass
        return item

    def abandon(self) -> list[Item]:
        """Drop what is left (the run stopped): its proposals stay in the trace, unevaluated, for a resume."""
        left, self.items = list(self.items), deque()
        self._ahead.clear()
        return left

    def _advance(self, timeout: float) -> None:
        """Judge what can be judged, then take the jobs done, until the oldest item is settled or nothing more came
        back within ``timeout``. Nothing is judged once the oldest is settled: the loop records it first."""
        deadline = time.monotonic() + timeout
        while not self.items[0].settled:
            self._judge_in_order()
            done = self.sandbox.wait(max(0.0, deadline - time.monotonic()))
            for job in done:
                self._took(job)
            if not done:
                return

    def _judge_in_order(self) -> None:
        """Judge the compiled items in proposal order while fewer than ``slots`` evaluations are under way."""
        under_way = sum(1 for item in self.items if item.judged and not item.settled)
        for item in self.items:
            if item.settled or item.judged:
                continue
            if item.compiled is None or under_way >= self.sandbox.slots:
                return
            if self._judge(item):
                under_way += 1

    def _judge(self, item: Item) -> bool:
        """The one judgement of a compiled candidate: settle it (a limit forbids evaluating, it did not compile, a
        known build, a compile-only sandbox), or submit its evaluation (True)."""
        item.judged = True
        limit = self.gate(item.phase)
        if limit is not None:
            item.blocked, item.settled = limit, True
            return False
        match item.compiled:
            case Evaluated(result) if result.status is Status.compiled:
                item.identity = identity(self.task, item.candidate, result.compile)
                item.duplicate_of = self.lineage.duplicate_of(item.identity) or self._ahead.get(item.identity)
                if not item.duplicate_of and self.sandbox.kind != "compile-only":
                    if item.identity:
                        self._ahead[item.identity] = item.entry_id
                    self.sandbox.submit_evaluate(self.task, item.candidate, tag=item)
                    return True
                item.result = result
            case _:
                self._outcome(item, item.compiled)
        item.settled = True
        return False

    def _took(self, job: Job) -> None:
        item = job.tag
        if not any(i is item for i in self.items):   # a job of a pipeline the loop abandoned
            return
        if job.op == "compile":
            item.compiled = job.outcome
        else:
            self._outcome(item, job.outcome)
            item.settled = True

    def _outcome(self, item: Item, outcome: Outcome) -> None:
        match outcome:
            case Evaluated(result):
                item.result = result
            case Invalid(reason):
                item.result = invalid(self.task, item.candidate, reason)
            case Failed(reason):
                item.failure = reason
            case Lost(reasons):
                item.lost = list(reasons)
                if item.identity and self._ahead.get(item.identity) == item.entry_id:
                    del self._ahead[item.identity]
