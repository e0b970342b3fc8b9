"""Reading a stored run (a trace folder, see ``agent.trace.writer``) into objects, with no GPU and no task
folder.

``read(path)`` returns a ``RunTrace``; it is strict: a folder without ``run.json`` or ``events.jsonl``, a line cut off by a kill, a line
that is not JSON, not of a schema this kernelwright reads or does not fit its event model, a gap in the
sequence numbers, an evaluation of a candidate never proposed: each is one ``TraceError`` naming the file,
the line and what was wrong. ``summary.json`` is optional (a run that was killed or is still running has none).

It also refuses a run whose files no longer match its events (``check_integrity``): an events line whose hash
chain does not match (``agent.trace.events``), a ``candidate.cu`` whose SHA-256 is not the one its evaluation
recorded, a ``summary.json`` that no end event holds. These catch accidents and casual edits, not a forger who
rewrites the hashes too. A run written before the hashes existed is read, with ``RunTrace.unchecked`` saying so.

    stored = read("traces/20260101-120000-softmax-ab12")
    stored.best, stored.steps[-1].gpu_s, stored.source("c0003")
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..protocols import Entry
from .events import EndEvent, EvaluationEvent, Event, TraceError, read_events
from .fold import Step, Unevaluated, fold
from .records import RunInfo, Summary

UNFINISHED_NOTE = "no summary.json: the run did not finish (it was killed, or it is still running)"


@dataclass
class RunTrace:
    """A run's trace folder as read back: run.json, the events, the entries and steps they replay to, and
    summary.json where the run finished. (The notebook and Python API's ``agent.api.Run`` is built from it.)"""

    path: Path
    info: RunInfo
    events: list[Event]
    summary: Summary | None
    entries: list[Entry]
    steps: list[Step]
    unevaluated: list[Unevaluated] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.info.run_id

    @property
    def unchecked(self) -> str:
        """Empty when the events carry their hash chain and every evaluation its source's hash; else the note
        that says what of this run cannot be checked against edits (a trace of an older kernelwright)."""
        missing = []
        if any(e.chain is None for e in self.events):
            missing.append("events.jsonl has lines without a hash chain")
        if any(isinstance(e, EvaluationEvent) and e.source_sha256 is None for e in self.events):
            missing.append("evaluations without their candidate's hash")
        if not missing:
            return ""
        return (f"UNCHECKED: {' and '.join(missing)} (written by an older kernelwright): edits to this run's files "
                "cannot be detected")

    @property
    def task_name(self) -> str:
        return self.info.task.name

    @property
    def simulated(self) -> bool:
        if self.summary is not None:
            return self.summary.simulated
        return self.info.sandbox.kind == "fake" or any(e.result.env.simulated for e in self.entries)

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @cached_property
    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}

    @property
    def baseline(self) -> Entry | None:
        return next((e for e in self.entries if e.origin == "baseline"), None)

    @property
    def best(self) -> Entry | None:
        """The winner: the best-ranked entry unless that is the baseline (nothing beat it)."""
        recorded = self.summary.best if self.summary else None
        if recorded and recorded.id in self.by_id:
            return self.by_id[recorded.id]
        last = self.steps[-1] if self.steps else None
        if last is None or last.best_id is None or self.by_id[last.best_id].origin == "baseline":
            return None
        return self.by_id[last.best_id]

    def parent(self, entry: Entry) -> Entry | None:
        return self.by_id.get(entry.parent_ids[0]) if entry.parent_ids else None

    def unchanged_task(self):
        """The run's task when it can be found unchanged (its recorded folder, else the suite); else None."""
        from sandbox.tasks.task import TaskError, load_task

        recorded = self.info.task
        for ref in (recorded.folder, recorded.name):
            try:
                task = load_task(ref)
            except (TaskError, OSError):
                continue
            if task.fingerprint == recorded.fingerprint:
                return task
        return None

    def source(self, entry_id: str) -> str | None:
        """The candidate file as written to the trace (knob values and flags in its plan)."""
        path = self.path / "candidates" / entry_id / "candidate.cu"
        return path.read_text() if path.is_file() else None


def resolve_run(ref: str | Path, traces: str | Path = "traces") -> Path:
    """A run folder from a path, or from a run id under ``traces``."""
    for candidate in (Path(ref), Path(traces) / str(ref)):
        if candidate.is_dir() and ((candidate / "run.json").exists() or (candidate / "events.jsonl").exists()):
            return candidate
    for candidate in (Path(ref), Path(traces) / str(ref)):
        if candidate.is_dir():
            raise TraceError(f"{candidate}: not a run folder (no run.json and no events.jsonl)")
    raise TraceError(f"{ref}: no such run (neither a run folder nor a run id under {traces}/)")


def read(ref: str | Path, traces: str | Path = "traces") -> RunTrace:
    path = resolve_run(ref, traces)
    info = read_record(path / "run.json", RunInfo, required=True)
    events = read_events(path, strict=True)
    summary, state = verify_run(path, events)
    return RunTrace(path, info, events, summary, state.entries, state.steps, state.unevaluated)


def verify_run(path: Path, events: list[Event]):
    """The one check of a run's integrity, made by ``read`` (show, report, export, verify, the Python API) and by
    ``optimize --resume`` of the run it continues: the events hold together, every candidate.cu is the one its
    evaluation hashed, and summary.json is one of the end events. Returns (summary or None, the folded state);
    raises TraceError naming the file."""
    summary = read_record(path / "summary.json", Summary, required=False)
    state = fold(events, path / "events.jsonl")
    check_integrity(path, events, summary)
    return summary, state


def check_integrity(path: Path, events: list[Event], summary: Summary | None) -> None:
    """A TraceError naming the file that no longer matches the events: a candidate.cu edited since it was
    evaluated (or swapped with another's), a summary.json that is none of the run's end events (an edited one, or
    one beside an events.jsonl cut before its end event). (The events' own chain is checked as they are read.)"""
    recorded = {e.candidate_id: e for e in events if isinstance(e, EvaluationEvent) and e.source_sha256}
    for cid, ev in recorded.items():
        source = path / "candidates" / cid / "candidate.cu"
        if source.is_file() and hashlib.sha256(source.read_bytes()).hexdigest() != ev.source_sha256:
            raise TraceError(f"{source}: edited since it was evaluated (its SHA-256 is not the one line "
                             f"{ev.seq + 1} of events.jsonl recorded)")
    ends = [e.summary.model_dump(mode="json") for e in events if isinstance(e, EndEvent)]
    if summary is None or summary.model_dump(mode="json") in ends:
        return
    if ends:
        raise TraceError(f"{path / 'summary.json'}: its numbers are none of the run's end events in events.jsonl: "
                         "the file was edited (or is another run's)")
    if any(e.chain for e in events):  # an older kernelwright's events may hold no end event to compare with
        raise TraceError(f"{path / 'events.jsonl'}: has no end event, but summary.json says the run finished: the file "
                     "was cut short (or summary.json is another run's)")


def read_record(path: Path, model: type[BaseModel], required: bool):
    """``run.json`` or ``summary.json`` as its model; a file that is missing (when required), not JSON, or does
    not fit the model is a TraceError."""
    if not path.is_file():
        if required:
            raise TraceError(f"{path.parent}: not a run folder (no {path.name})")
        return None
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise TraceError(f"{path}: does not fit this kernelwright's {path.name} ({where}: {first['msg']})") from None
