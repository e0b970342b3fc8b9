"""Candidates between their proposal and their record: compiled, checked against the builds already seen,
evaluated, and handed back to the loop in the order they were proposed.

With one sandbox (no Ray) the oldest candidate is judged when the loop asks for it (``judge``: compile, skip a
known build, evaluate), exactly as before there was a pipeline. With a ``RaySandbox`` (``slots`` GPU actors)
every candidate is compiled as soon as it is added (CPU tasks anywhere in the cluster), passes the duplicate
check in proposal order (against the lineage and the candidates ahead of it in the pipeline, so the same
candidates are skipped as in a run that judged them one by one), then waits for a free GPU; up to ``slots``
evaluate at once. Either way ``head`` returns the oldest candidate only once it is settled, so what the loop
records, and every decision it takes from the lineage, is the same whichever GPU finished first.

A request whose answer had no candidate holds a place too (an empty item), settled at once: its place in the
order is what lets the loop send its next request at the same point in either mode.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from sandbox.candidate import Candidate
from sandbox.plan import identity
from sandbox.result import Result, Status
from sandbox.task import Task

from .judge import SandboxFailure, invalid, judge
from .lineage import MemoryLineage
from ..protocols import Proposal, Proposer


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
    checked: bool = False          # past the duplicate check (asynchronous mode)
    compiled: Any = None           # what the compile job returned (asynchronous mode)


class Pipeline:
    """See the module docstring. ``gate(phase)`` returns a limit that forbids evaluating now (GPU time, wall
    time), or None."""

    def __init__(self, sandbox, task: Task, lineage: MemoryLineage, gate: Callable[[str], Any]):
        self.sandbox, self.task, self.lineage, self.gate = sandbox, task, lineage, gate
        self.spread = callable(getattr(sandbox, "submit_evaluate", None))
        self.items: deque[Item] = deque()
        self._ahead: dict[str, str] = {}   # identities of candidates past the duplicate check, not yet recorded

    def __len__(self) -> int:
        return len(self.items)

    def requests(self) -> int:
        """Requests with a candidate (or the empty place of their answer) not yet handed back."""
        return len({item.request for item in self.items})

    def add(self, item: Item) -> None:
        self.items.append(item)
        if item.candidate is None:
            item.settled = True
        elif self.spread:
            self.sandbox.submit_compile(self.task, item.candidate, tag=item)

    def head(self, timeout: float = 0.0) -> Item | None:
        """The oldest item once it is settled (then it leaves the pipeline), else None after waiting up to
        ``timeout`` seconds for work under way."""
        if not self.items:
            return None
        if not self.spread:
            self._judge(self.items[0])
        elif not self.items[0].settled:
            self._advance(timeout)
        item = self.items[0]
        if not item.settled:
            return None
        self.items.popleft()
        if item.identity and self._ahead.get(item.identity) == item.entry_id:
            del self._ahead[item.identity]
        return item

    def abandon(self) -> list[Item]:
        """Drop what is left (the run stopped): its proposals stay in the trace, unevaluated, for a resume."""
        left, self.items = list(self.items), deque()
        self._ahead.clear()
        return left

    # ---- one sandbox -------------------------------------------------------------------------

    def _judge(self, item: Item) -> None:
        self.judge_now(self.sandbox, self.task, self.lineage, self.gate, item)

    @staticmethod
    def judge_now(sandbox, task: Task, lineage: MemoryLineage, gate: Callable[[str], Any], item: Item) -> None:
        """Settle ``item`` on this thread: compile, skip a known build, evaluate (``agent.loop.judge``)."""
        if item.settled:
            return
        item.settled = True
        limit = gate(item.phase)
        if limit is not None:
            item.blocked = limit
            return
        try:
            item.result, item.identity, item.duplicate_of = judge(sandbox, task, lineage, item.candidate)
        except SandboxFailure as exc:
            item.failure = str(exc)

    # ---- a cluster ---------------------------------------------------------------------------

    def _advance(self, timeout: float) -> None:
        for job in self.sandbox.wait(timeout):
            item = job.tag
            if job.op == "compile":
                item.compiled = job.outcome
            else:
                self._evaluated(item, job.outcome)
        for item in self.items:  # the duplicate check, in proposal order
            if item.settled or item.checked:
                continue
            if item.compiled is None:
                break
            self._check(item)

    def _check(self, item: Item) -> None:
        item.checked = True
        out = item.compiled
        if "invalid" in out or "failure" in out:
            if "invalid" in out:
                item.result = invalid(self.task, item.candidate, out["invalid"])
            else:
                item.failure = out["failure"]
            item.settled = True
            return
        compiled = Result.model_validate(out["result"])
        if compiled.status is not Status.compiled:
            item.result, item.settled = compiled, True
            return
        item.identity = identity(self.task, item.candidate, compiled.compile)
        item.duplicate_of = self.lineage.duplicate_of(item.identity) or self._ahead.get(item.identity)
        if item.duplicate_of:
            item.result, item.settled = compiled, True
            return
        limit = self.gate(item.phase)
        if limit is not None:
            item.blocked, item.settled = limit, True
            return
        if item.identity:
            self._ahead[item.identity] = item.entry_id
        self.sandbox.submit_evaluate(self.task, item.candidate, tag=item)

    def _evaluated(self, item: Item, outcome: dict) -> None:
        item.settled = True
        if "result" in outcome:
            item.result = Result.model_validate(outcome["result"])
        elif "invalid" in outcome:
            item.result = invalid(self.task, item.candidate, outcome["invalid"])
        elif "lost" in outcome:
            item.lost = list(outcome["lost"])
            if self._ahead.get(item.identity) == item.entry_id:
                del self._ahead[item.identity]
        else:
            item.failure = outcome.get("failure", "the sandbox failed")
