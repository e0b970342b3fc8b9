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
from typing import Any, Protocol, runtime_checkable

from sandbox.candidate import Candidate
from sandbox.result import Result
from sandbox.task import Task


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


@runtime_checkable
class Proposer(Protocol):
    """A proposer that marks proposals ``stage="screen"`` (the built-in search) also has
    ``observe_screened(proposal, screened)``: the loop screens those in one batch (``sandbox.screen``) and
    hands each its ``Screened`` record instead of an entry; they never enter the lineage."""

    name: str

    def propose(self, request: ProposalRequest) -> list[Proposal]: ...

    def observe(self, entry: Entry) -> None: ...


@runtime_checkable
class Lineage(Protocol):
    def add(self, entry: Entry) -> None: ...

    def get(self, entry_id: str) -> Entry: ...

    def entries(self) -> list[Entry]: ...

    def best(self) -> Entry | None: ...

    def select(self, k: int = 1) -> list[Entry]: ...
