"""The records of a trace folder besides its events: ``run.json`` (``RunInfo``), ``summary.json`` (``Summary``)
and the pieces they share (a candidate as stored, a row per entry, a held-out row). Every interval in them has
one shape, ``{"value", "low", "high"}`` (``sandbox.judging.result.Interval``).

``kernelwright-summary-2`` changed, from ``-1`` (still read, upgraded): a row's ``ci_ms`` is an interval (it was
``[low, high]``), its speedups are plain intervals (the ``faster`` inside them is the row's ``faster``), and
each phase's stop is ``{"reason", "message"}`` (it was the sentence alone). ``kernelwright-summary-3`` (``-1`` and
``-2`` still read, upgraded) gathers the claim's sections, flat keys before, under ``claim`` (``agent.trace.claim``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from sandbox.candidates.candidate import Candidate, parse_candidate
from sandbox.judging.result import Interval

from ..stops import Stop, StopReason
from .claim import FLAT_KEYS, Claim, FlaggedWinner, HeldoutRow, SanitizeSection

__all__ = ["CandidateRecord", "Claim", "EntryRow", "FlaggedWinner", "HeldoutRow", "RunInfo", "SanitizeSection",
           "Summary", "TaskRef", "TotalsRecord"]

RUN_SCHEMA = "kernelwright-run-1"
SUMMARY_SCHEMA = "kernelwright-summary-3"
LEGACY_STOPS = (("iterations:", StopReason.ITERATIONS), ("tokens:", StopReason.TOKENS), ("money:", StopReason.MONEY),
                ("GPU time:", StopReason.GPU_TIME), ("wall time:", StopReason.WALL_TIME),
                ("plateau:", StopReason.PLATEAU), ("the proposer has nothing more", StopReason.NOTHING_LEFT),
                ("model endpoint:", StopReason.MODEL_ENDPOINT), ("sandbox:", StopReason.SANDBOX),
                ("baseline:", StopReason.BASELINE), ("interrupted", StopReason.INTERRUPTED))


def legacy_stop(message: str) -> Stop:
    """The stop a version-1 trace wrote as a sentence (every sentence it could write starts so)."""
    for prefix, reason in LEGACY_STOPS:
        if message.startswith(prefix):
            return reason.because(message)
    raise ValueError(f"unknown stop reason {message!r}")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CandidateRecord(_Record):
    """A candidate as events store it: the source as received, plus the chosen flags and knob values."""

    source: str
    flags: list[str]
    knobs: dict[str, list[int]]
    knob_values: dict[str, int]
    label: str

    @classmethod
    def of(cls, c: Candidate) -> "CandidateRecord":
        return cls(source=c.source, flags=list(c.flags), knobs={k: list(v) for k, v in c.knobs.items()},
                   knob_values=dict(c.knob_values), label=c.label)

    def candidate(self) -> Candidate:
        c = parse_candidate(self.source, label=self.label)
        return dataclasses.replace(c, flags=tuple(self.flags), knobs={k: tuple(v) for k, v in self.knobs.items()},
                                   knob_values=dict(self.knob_values))


# ---- run.json ----------------------------------------------------------------------------------------


class TaskInfo(_Record):
    name: str
    version: int
    fingerprint: str
    folder: str


class ProposerInfo(_Record):
    kind: str                            # llm, tuner, replay or custom
    name: str | None = None              # a custom proposer's name
    replay: str | None = None            # the run folder a replay reads


class SandboxInfo(_Record):
    kind: str
    device: dict[str, Any]
    cluster: dict[str, Any] | None = None    # a run on a Ray cluster: its address, the GPUs measuring, those left out


class SessionInfo(_Record):
    started: float
    resumed: bool


class RunInfo(_Record):
    """``run.json``: what the run is (task, config without secrets, proposer, sandbox, environment), one line per
    session."""

    schema_: Literal["kernelwright-run-1"] = Field(RUN_SCHEMA, alias="schema")
    run_id: str
    created: str
    task: TaskInfo
    config: dict[str, Any]
    proposer: ProposerInfo
    sandbox: SandboxInfo
    environment: dict[str, Any]
    sessions: list[SessionInfo]


# ---- summary.json --------------------------------------------------------------------------------------


def _plain_interval(value: Any) -> Any:
    """Version 1 wrote speedups with a ``faster`` inside."""
    return {k: v for k, v in value.items() if k != "faster"} if isinstance(value, dict) else value


class EntryRow(_Record):
    """One entry of the lineage, flat (``summary.json``'s best and baseline, ``Run.rows()``)."""

    id: str
    origin: str
    parents: list[str]
    status: str
    error: str = ""
    median_ms: float | None = None
    ci_ms: Interval | None = None        # the median's 95% interval
    baseline_ms: float | None = None     # the primary baseline's median
    against: str | None = None           # the primary baseline: "baseline", or "eager" for a task from PyTorch
    speedup: Interval | None = None      # over the primary baseline
    vendor_speedup: Interval | None = None   # over the vendor library, or torch.compile for a task from PyTorch
    pct_of_roofline: float | None = None
    registers: int | None = None
    spills: int | None = None
    knobs: dict[str, int] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    simulated: bool = False

    @computed_field
    @property
    def faster(self) -> bool:
        """The speedup over the baseline clears 1.0."""
        return self.speedup is not None and self.speedup.low > 1.0

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if k != "faster"}
        if isinstance(data.get("ci_ms"), list):
            low, high = data["ci_ms"]
            data["ci_ms"] = {"value": data.get("median_ms"), "low": low, "high": high}
        return {**data, "speedup": _plain_interval(data.get("speedup")),
                "vendor_speedup": _plain_interval(data.get("vendor_speedup"))}


class TotalsRecord(_Record):
    """What the run spent (``agent.loop.budget.Totals``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0            # part of the completion tokens
    cached_tokens: int = 0               # part of the prompt tokens
    tokens: int = 0                      # prompt + completion
    usd: float = 0.0                     # at the configured prices (0 without them)
    model_requests: int = 0              # HTTP requests, re-asks included
    model_seconds: float = 0.0
    gpu_s: float = 0.0                   # screening, checking, timing and profiling
    wall_s: float = 0.0                  # over every session of the run
    iterations: int = 0                  # answered requests of the model phase
    evaluations: int = 0                 # evaluated in full (entries)
    screened: int = 0                    # configurations the built-in search screened (never entries)
    screen_gpu_s: float = 0.0            # their GPU time (part of gpu_s)
    duplicates: int = 0                  # skipped: a build already evaluated
    models: dict[str, dict] | None = None   # with [model.roles]: each model's usage (main, or its [model.others] name)


class TaskRef(_Record):
    name: str
    fingerprint: str | None = None


class Summary(_Record):
    """``summary.json`` (and the ``end`` event): what a run achieved, what it cost, why each phase stopped."""

    schema_: Literal["kernelwright-summary-3"] = Field(SUMMARY_SCHEMA, alias="schema")
    run_id: str
    task: TaskRef
    sandbox: str | None
    simulated: bool
    stops: dict[str, Stop] = Field(default_factory=dict)   # phase -> why it stopped, in order
    stop_reason: str | None = None       # the last stop's message
    best: EntryRow | None = None         # None when nothing beat the baseline
    baseline: EntryRow | None = None
    candidates: int
    duplicates_skipped: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    totals: TotalsRecord | None = None   # None for a run that did not finish
    notes: list[str] = Field(default_factory=list)
    claim: Claim = Field(default_factory=Claim)   # held-out re-check, sanitizer, ledger, search coverage

    @property
    def last_stop(self) -> Stop | None:
        return list(self.stops.values())[-1] if self.stops else None

    @field_validator("stops", mode="before")
    @classmethod
    def _stops(cls, value: Any) -> Any:
        if isinstance(value, dict):  # version 1: phase -> sentence
            return {k: legacy_stop(v) if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema") in ("kernelwright-summary-1", "kernelwright-summary-2"):
            flat = {k: data[k] for k in FLAT_KEYS if k in data}
            data = {**{k: v for k, v in data.items() if k not in FLAT_KEYS}, "schema": SUMMARY_SCHEMA,
                    "claim": Claim.from_flat(flat)}
        return data

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)
