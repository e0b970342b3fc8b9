"""The agent's seams in one file: proposers make candidates, the lineage remembers them.

The loop reads top to bottom as ``select -> propose -> evaluate -> record``:

- ``select``: the lineage picks parent entries (best-so-far balanced with exploration);
- ``propose``: a ``Proposer`` turns a ``ProposalRequest`` into ``Proposal``s (an LLM rewrite, a tuner
  variant, a replayed answer);
- ``evaluate``: the sandbox (``sandbox.Sandbox``) turns each candidate into a ``sandbox.Result``;
- ``record``: the lineage adds an ``Entry``; the trace appends an event; ``Proposer.observe`` sees it.

Expected failures are values: a proposal with no candidate carries ``error`` (e.g. the model's
answer had no code block), a candidate that failed carries its Result's status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from sandbox.candidates.candidate import Candidate
from sandbox.judging.result import Result
from sandbox.tasks.task import Task

if TYPE_CHECKING:
    from .config import SelectionConfig


@dataclass
class Usage:
    """What one model request cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    requests: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict) -> "Usage":
        return cls(**{f: data.get(f, 0) for f in cls.__dataclass_fields__})


@dataclass
class Entry:
    """One evaluated candidate in the lineage."""

    id: str
    candidate: Candidate
    result: Result
    parent_ids: list[str]
    origin: str                      # "baseline", "llm", "tuner", "replay", ...
    iteration: int
    note: str = ""                   # what the proposer says it changed
    diagnosis: str | None = None     # the profiler's distilled diagnosis, when profiled


@dataclass
class Inspiration:
    """A candidate shown beside the parent (``agent.loop.database.inspirations``), and why it was chosen."""

    entry: Entry
    why: str


@dataclass
class ProposalRequest:
    """Everything a proposer may use to make the next candidates."""

    task: Task
    parents: list[Entry]
    best: Entry | None
    baseline: Entry | None
    recent_failures: list[Entry]
    device: dict
    iteration: int
    extra: dict[str, Any] = field(default_factory=dict)
    id: str = ""                     # the request's id in the trace (``r0003``); empty outside a run
    inspirations: list[Inspiration] = field(default_factory=list)   # shown beside the parent
    # Inside a run: ``journal(kind, fields)`` writes a tool-calling session's model call ("model_call") or tool call
    # ("tool_call") to the trace as it happens; ``replay`` holds the calls a killed run recorded for this request
    # (``ModelCallEvent``s and ``ToolCallEvent``s, in order), which the session goes on from.
    journal: Callable[[str, dict], None] | None = field(default=None, repr=False, compare=False)
    replay: list | None = field(default=None, repr=False, compare=False)


@dataclass
class Journaled:
    """What a request with a ``journal`` wrote to the trace itself: its answered model calls (those replayed from a
    killed run included), the GPU-seconds of the tool calls it ran in this run, and the usage of the replayed model
    calls, which the run that made them already counted."""

    model_calls: int = 0
    gpu_s: float = 0.0
    replayed: Usage = field(default_factory=Usage)


@dataclass
class Proposal:
    candidate: Candidate | None
    parent_ids: list[str]
    origin: str
    note: str = ""
    error: str = ""                  # why there is no candidate (format error, empty answer...)
    usage: Usage = field(default_factory=Usage)
    exchange: dict[str, Any] | None = None   # prompt and response, for the trace
    stage: str = "evaluate"          # "screen": measured cheaply in a batch, never a result (see Proposer)


def score(entry: Entry) -> float | None:
    """Speedup over the baseline (median ratio) of a correct, timed candidate; None otherwise."""
    return score_of(entry.result)


def score_of(result: Result) -> float | None:
    """``score`` of a result not (yet) in the lineage."""
    s = result.speedup("baseline") if result.ok else None
    return s.value if s else None


class ProposerFailed(RuntimeError):
    """A proposer that cannot answer, for good (a model endpoint that refused or is down): the loop records the
    failed proposal's ``attempts`` (its model calls), ``tools`` (the tool calls its session had made, each as
    ``ToolCallEvent`` fields) and ``usage`` (what they cost) and stops the phase. Where the session wrote its calls
    to the trace as they happened, ``attempts`` and ``tools`` hold only those it did not, and ``journaled`` says
    what the others were."""

    def __init__(self, message: str, attempts: list[dict] | None = None, usage: Usage | None = None,
                 tools: list[dict] | None = None, journaled: "Journaled | None" = None):
        super().__init__(message)
        self.attempts = list(attempts or [])
        self.usage = usage or Usage()
        self.tools = list(tools or [])
        self.journaled = journaled   # the calls already in the trace, where the request had a journal


@runtime_checkable
class Proposer(Protocol):
    """Makes candidates from a request and sees what became of them. The built-in proposers subclass it and so
    have the optional members below; a proposer of one's own needs only ``name``, ``propose`` and ``observe`` as
    long as it marks no proposal ``stage="screen"``."""

    name: str

    def propose(self, request: ProposalRequest) -> list[Proposal]: ...

    def observe(self, entry: Entry) -> None: ...

    def observe_screened(self, proposal: Proposal, screened) -> None:
        """What screening measured (a ``sandbox.host.screener.Screened``) for a proposal marked
        ``stage="screen"``: the loop screens those in one batch (``Sandbox.screen``) and hands each its record
        instead of an entry; they never enter the lineage."""
        raise NotImplementedError(f"proposer {self.name!r} proposed a screening but cannot observe one")

    def summaries(self) -> list[dict]:
        """What a search covered and why it stopped, one summary per search, for the run's summary."""
        return []

    def close(self) -> None:
        """Release what the proposer opened for itself (a sandbox of its own)."""


@runtime_checkable
class Lineage(Protocol):
    """Every evaluated entry, and the choices the loop takes from them (``agent.loop.lineage.MemoryLineage``)."""

    config: SelectionConfig

    def add(self, entry: Entry, identity: str | None = None) -> None: ...

    def get(self, entry_id: str) -> Entry: ...

    def entries(self) -> list[Entry]: ...

    def best(self) -> Entry | None: ...

    def baseline(self) -> Entry | None: ...

    def select(self, k: int = 1, iteration: int | None = None) -> list[Entry]: ...

    def would_lead(self, result: Result) -> bool:
        """Whether ``result`` would be the new best."""
        ...

    def duplicate_of(self, identity: str | None) -> str | None:
        """The entry already built as ``identity`` (``sandbox.candidates.plan.identity``), or None."""
        ...

    def recent_failures(self, n: int, exclude: set[str] = frozenset()) -> list[Entry]: ...

    def failure_depth(self, entry: Entry) -> int:
        """How many failed repairs in a row led to ``entry``."""
        ...
