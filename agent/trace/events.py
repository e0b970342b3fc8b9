"""The events of ``events.jsonl``, one pydantic model per kind, and the one reader every part of agent uses.

Every line is one JSON object with ``schema`` (``kernelwright-events-2``; ``-1`` is read too), ``seq`` (0, 1,
2... with no gap), ``t`` (Unix seconds), ``wall_s`` (the run's wall time so far, over resumed sessions) and
``kind``, which picks the model: ``phase``, ``request``, ``model_call``, ``proposal``, ``evaluation``, ``skip``,
``screen``, ``best``, ``stop``, ``sanitize``, ``retime``, ``error``, ``end``. Unknown fields are an error. Version 2
changed three things, and version 1 lines are upgraded when read: a ``stop`` carries ``reason`` (a ``StopReason``
value) and ``message`` (version 1 had only the sentence, in ``reason``), an ``evaluation``'s ``fingerprint`` is
called ``identity``, and the ``end`` event's summary is ``kernelwright-summary-2``.

Each line written now ends in ``"chain"``: the SHA-256 of the previous line's chain (or of nothing, for the
first) and of this line without its chain. The reader recomputes the chain and refuses a file where one no
longer matches: a number edited by hand, a line removed or moved. It is a check against accidents and casual
edits, not a signature: whoever edits a line and recomputes every chain after it is not caught, and neither
is a file cut short after a complete line (``agent.trace.reader`` compares ``summary.json`` with the end
events for that). Lines without a chain (written by an older kernelwright) are read, and the run is marked
unchained; a line without a chain after one with a chain is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from sandbox.judging.result import Interval, Result
from sandbox.judging.sanitizer_report import SanitizeReport

from ..stops import StopReason
from ..protocols import Usage
from .records import CandidateRecord, Summary, legacy_stop

EVENTS_SCHEMA = "kernelwright-events-2"
READABLE_EVENTS = ("kernelwright-events-1", EVENTS_SCHEMA)


class TraceError(ValueError):
    """A run folder that cannot be read: the message names the file, the line and what was wrong."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(EVENTS_SCHEMA, alias="schema")
    seq: int = 0                     # the writer numbers the events
    t: float = 0.0
    wall_s: float = 0.0
    chain: str | None = Field(None, exclude=True)  # set by the writer and the reader, never dumped with the rest


class PhaseEvent(_Event):
    kind: Literal["phase"] = "phase"
    name: str                        # setup, model, tune or search
    proposer: str
    target: str | None = None        # the entry a tuner starts from


class RequestEvent(_Event):
    kind: Literal["request"] = "request"
    request: str                     # r0000, r0001...
    iteration: int
    phase: str
    parents: list[str]
    why: str | None = None           # why this parent (agent.loop.database); None in older traces
    island: int | None = None        # the island it works on, with [lineage] policy = "islands"
    inspirations: list[str] | None = None   # "c0004: one of the best", shown beside the parent


class ModelCallEvent(_Event):
    """One attempt at a model request: the messages added since the previous attempt, and the answer."""

    kind: Literal["model_call"] = "model_call"
    request: str
    messages: list[dict[str, Any]]
    response: str
    reasoning: str | None = None
    finish_reason: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    max_tokens: int | None = None
    seconds: float = 0.0
    http: list[dict[str, Any]] = Field(default_factory=list)   # each HTTP attempt (the SDK's retries included)
    error: str | None = None         # why the answer could not be used (then the model is asked again)
    tool_calls: list[dict[str, Any]] | None = None   # a tool-calling session's calls asked for (id, name, arguments)
    turn: int | None = None          # a tool-calling session's answered call, counted from 0 (written as it happens)


class ToolCallEvent(_Event):
    """One tool call of a tool-calling session (``agent.proposers.tools``) and its result."""

    kind: Literal["tool_call"] = "tool_call"
    request: str
    turn: int                        # the model call of the request that asked for it
    name: str
    arguments: dict[str, Any]
    result: str
    status: str                      # ok, bad_arguments, unparsable, unknown_tool, error, limit
    gpu_s: float = 0.0
    seconds: float = 0.0


class ProposalEvent(_Event):
    kind: Literal["proposal"] = "proposal"
    request: str | None              # None for the baseline
    iteration: int
    phase: str
    candidate_id: str | None         # None when the proposal has no candidate (``error`` says why)
    parents: list[str]
    origin: str                      # baseline, llm, tuner, replay...
    note: str = ""
    error: str = ""
    usage: Usage = Field(default_factory=Usage)
    answer: str | None = None        # the model's answer as received
    candidate: CandidateRecord | None = None
    answer_proposals: int | None = None  # how many proposals its request's answer recorded (None: an older trace)
    answered_by: str | None = None   # with [model.roles]: the model that answered (main, or its [model.others] name)
    model_rule: str | None = None    # and the rule that chose it (agent.proposers.roles)
    # the request's model calls its ``usage`` covers: the last ones recorded for the request (None, an older trace:
    # all of them); the usage of calls it does not cover (an answer that never came) is counted from their events
    model_calls: int | None = None


class EvaluationEvent(_Event):
    kind: Literal["evaluation"] = "evaluation"
    candidate_id: str
    status: str
    identity: str | None             # what would run on the GPU (``sandbox.candidates.plan.identity``)
    source_sha256: str | None = None  # of candidates/<id>/candidate.cu as written when it was evaluated
    summary: str
    diagnosis: str | None = None
    result: Result

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict) and "fingerprint" in data:  # version 1's name for the identity
            data = {("identity" if k == "fingerprint" else k): v for k, v in data.items()}
        return data


class SkipEvent(_Event):
    kind: Literal["skip"] = "skip"
    candidate_id: str | None
    reason: str                      # "duplicate", "budget: ...", "sandbox: ..."
    duplicate_of: str | None = None


class ScreenedConfig(BaseModel):
    """One configuration of the built-in search as screening measured it (``sandbox.host.screener.Screened``):
    never a candidate, never a result; ``relative`` is its median time over the baseline's."""

    model_config = ConfigDict(extra="forbid")

    config: str                      # the search's description of the point
    knobs: dict[str, int]
    flags: list[str]
    status: str                      # ok, compile_error, wrong, launch_error...
    relative: float | None = None
    relative_ci: tuple[float, float] | None = None
    ms: float | None = None
    baseline_ms: float | None = None
    rounds: int = 0                  # timed rounds it ran
    stopped: str = ""                # settled, slower or empty: why before the last round
    error: str = ""                  # the first 300 characters
    gpu_s: float = 0.0


class ScreenEvent(_Event):
    """A batch of the built-in search's configurations screened in one GPU process (``Loop.screen``); a resumed
    run's search takes these values back instead of measuring them again."""

    kind: Literal["screen"] = "screen"
    phase: str
    parents: list[str]               # the entries whose knobs were searched
    gpu_s: float
    configurations: list[ScreenedConfig]


class BestEvent(_Event):
    kind: Literal["best"] = "best"
    candidate_id: str
    speedup: Interval                # over the task's baseline


class StopEvent(_Event):
    kind: Literal["stop"] = "stop"
    phase: str
    reason: StopReason
    message: str

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict) and "message" not in data and isinstance(data.get("reason"), str):
            stop = legacy_stop(data["reason"])  # version 1: the sentence alone
            data = {**data, "reason": stop.reason, "message": stop.message}
        return data


class SanitizeEvent(_Event):
    """compute-sanitizer's report on a winner; reading the trace records it on that entry's result again."""

    kind: Literal["sanitize"] = "sanitize"
    candidate_id: str
    report: SanitizeReport


class RetimeEvent(_Event):
    """The winner re-timed alone on the GPU before the claim (``agent.claims.retime``); a resumed run that finds one for
    its winner does not re-time it again."""

    kind: Literal["retime"] = "retime"
    candidate_id: str
    reason: str                      # why it was re-timed
    result: Result


class ErrorEvent(_Event):
    kind: Literal["error"] = "error"
    request: str | None = None
    error: str


class EndEvent(_Event):
    kind: Literal["end"] = "end"
    summary: Summary


Event = Annotated[Union[PhaseEvent, RequestEvent, ModelCallEvent, ToolCallEvent, ProposalEvent, EvaluationEvent, SkipEvent, ScreenEvent,
                        BestEvent, StopEvent, SanitizeEvent, RetimeEvent, ErrorEvent, EndEvent],
                  Field(discriminator="kind")]
_EVENT = TypeAdapter(Event)


def to_line(event: _Event) -> str:
    """The JSON line of an event (no newline, no chain)."""
    return json_text(event.model_dump(mode="json", by_alias=True))


_SURROGATE = re.compile("[\ud800-\udfff]")
_CHAIN_END = re.compile(rb', "chain": "([0-9a-f]{64})"\}$')


def json_text(data: Any, **kw: Any) -> str:
    """JSON that UTF-8 can hold: characters as they are, but a lone surrogate (a model's answer may hold one)
    escaped as ``\\udXXX``, which JSON reads back as the same character."""
    text = json.dumps(data, ensure_ascii=False, **kw)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) if _SURROGATE.search(text) else text


def chain_of(previous: str | None, body: bytes) -> str:
    """The chain value of a line ``body`` (its JSON without the chain) after a line whose chain was ``previous``."""
    return hashlib.sha256((previous or "").encode() + b"\n" + body).hexdigest()


def chained(line: str, previous: str | None) -> tuple[str, str]:
    """``line`` (a JSON object, no newline) with its chain appended, and that chain."""
    link = chain_of(previous, line.encode())
    return f'{line[:-1]}, "chain": "{link}"}}', link


def read_events(folder: Path, *, strict: bool = False, repair: bool = False) -> list[Event]:
    """Every event of the run in ``folder``. Only the last line can be torn (cut off without its newline by a kill
    mid-write): it is left out, or a ``TraceError`` when ``strict``, and ``repair`` cuts it from the file. Any
    complete line that is not a JSON object, is of another schema, out of sequence, or does not fit its model is
    always a ``TraceError`` naming its line, and nothing is cut: the events after it are evidence too."""
    events_file = Path(folder) / "events.jsonl"
    if not events_file.is_file():
        raise TraceError(f"{events_file.parent}: not a run folder (no events.jsonl)")
    raw = events_file.read_bytes()
    if strict and not raw.strip():
        raise TraceError(f"{events_file}: empty: the run recorded nothing")
    events: list[Event] = []
    good_end = 0
    previous: str | None = None
    *complete, torn = raw.split(b"\n")
    for number, line in enumerate(complete, start=1):
        where = f"{events_file}: line {number}"
        event = _event(_json(line, where), where, len(events))
        previous = _check_chain(line, event, previous, where)
        events.append(event)
        good_end += len(line) + 1
    if torn and strict:
        raise TraceError(f"{events_file}: line {len(complete) + 1} is cut off (the run was killed while writing it); "
                         "`kernelwright optimize --resume RUN` repairs the file")
    if repair and good_end < len(raw):
        with open(events_file, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return events


def _check_chain(line: bytes, event: _Event, previous: str | None, where: str) -> str | None:
    """The chain after this line; a TraceError where the line's chain does not match its content."""
    if event.chain is None:
        if previous is not None:
            raise TraceError(f"{where}: no chain after lines that have one: the file was edited")
        return None
    found = _CHAIN_END.search(line)
    if found is None or chain_of(previous, line[:found.start()] + b"}") != event.chain:
        raise TraceError(f"{where}: the line's chain does not match its content or the lines before it: the file was "
                         "edited after the run wrote it")
    return event.chain


def _json(line: bytes, where: str) -> dict:
    """The JSON object of a complete line."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{where}: not JSON ({exc}): a damaged line, left as it is (only a last line cut off "
                         "by a kill is repaired)") from None
    if not isinstance(record, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def _event(record: dict, where: str, seq: int) -> Event:
    if record.get("schema") not in READABLE_EVENTS:
        raise TraceError(f"{where}: schema {record.get('schema')!r}, expected {EVENTS_SCHEMA!r}")
    if record.get("seq") != seq or not isinstance(record.get("kind"), str):
        raise TraceError(f"{where}: expected seq {seq} and a kind, got seq {record.get('seq')!r}, "
                         f"kind {record.get('kind')!r}")
    try:
        return _EVENT.validate_python(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"][1:])) or "kind"
        raise TraceError(f"{where}: a {record['kind']} event that does not fit this kernelwright's record "
                         f"({field}: {first['msg']})") from None


__all__ = ["EVENTS_SCHEMA", "Event", "TraceError", "read_events", "to_line", "json_text", "chained", "PhaseEvent", "RequestEvent",
           "ModelCallEvent", "ProposalEvent", "EvaluationEvent", "SkipEvent", "ScreenedConfig", "ScreenEvent", "BestEvent", "StopEvent",
           "SanitizeEvent",
           "ErrorEvent", "EndEvent"]
