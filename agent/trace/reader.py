"""Reading a stored run (a trace folder, see ``agent.trace.writer``) into objects, with no GPU and no task
folder.

``read(path)`` is strict: a folder without ``run.json`` or ``events.jsonl``, a line cut off by a kill, a
line that is not JSON or not of schema ``kernelwright-events-1``, a gap in the sequence numbers, an
evaluation of a candidate never proposed: each is one ``TraceError`` naming the file, the line and what
was wrong. ``summary.json`` is optional (a run that was killed or is still running has none).

    stored = read("traces/20260101-120000-softmax-ab12")
    stored.best, stored.steps[-1].gpu_s, stored.source("c0003")
    run = load_run("traces/20260101-120000-softmax-ab12")    # the notebook's ``Run``
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from sandbox.candidate import CandidateError
from sandbox.result import Interval, Result
from sandbox.sanitizer_report import SanitizeReport

from ..loop.lineage import score
from ..protocols import Entry
from .writer import EVENTS_SCHEMA, RUN_SCHEMA, candidate_from_record

UNFINISHED_NOTE = "no summary.json: the run did not finish (it was killed, or it is still running)"


class TraceError(ValueError):
    """A run folder that cannot be read: the message names the file, the line and what was wrong."""


@dataclass
class Step:
    """One evaluation, in the order the run made it, with what had been spent up to and including it."""

    n: int                      # 1-based
    entry: Entry
    wall_s: float
    tokens: int
    usd: float
    gpu_s: float
    best_id: str | None         # the best-ranked entry after this evaluation (the baseline counts)
    best: Interval | None       # its speedup over the baseline


@dataclass
class Unevaluated:
    """A proposal that never became an entry: skipped (duplicate, budget, sandbox) or without a candidate."""

    id: str | None
    parents: list[str]
    origin: str
    phase: str
    iteration: int
    reason: str
    note: str = ""


@dataclass
class StoredRun:
    path: Path
    info: dict
    events: list[dict]
    summary: dict | None
    entries: list[Entry]
    steps: list[Step]
    unevaluated: list[Unevaluated] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.info.get("run_id") or self.path.name

    @property
    def task_name(self) -> str:
        return (self.info.get("task") or {}).get("name", "?")

    @property
    def simulated(self) -> bool:
        if self.summary is not None:
            return bool(self.summary.get("simulated"))
        return (self.info.get("sandbox") or {}).get("kind") == "fake" or any(e.result.env.get("simulated") for e in self.entries)

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
        recorded = (self.summary or {}).get("best")
        if recorded and recorded.get("id") in self.by_id:
            return self.by_id[recorded["id"]]
        last = self.steps[-1] if self.steps else None
        if last is None or last.best_id is None or self.by_id[last.best_id].origin == "baseline":
            return None
        return self.by_id[last.best_id]

    def parent(self, entry: Entry) -> Entry | None:
        return self.by_id.get(entry.parent_ids[0]) if entry.parent_ids else None

    def source(self, entry_id: str) -> str | None:
        """The candidate file as written to the trace (knob values and flags in its plan)."""
        path = self.path / "candidates" / entry_id / "candidate.cu"
        return path.read_text() if path.is_file() else None

    def totals(self) -> dict:
        return (self.summary or {}).get("totals") or {}


def resolve(ref: str | Path, traces: str | Path = "traces") -> Path:
    """A run folder from a path, or from a run id under ``traces``."""
    for candidate in (Path(ref), Path(traces) / str(ref)):
        if candidate.is_dir() and ((candidate / "run.json").exists() or (candidate / "events.jsonl").exists()):
            return candidate
    for candidate in (Path(ref), Path(traces) / str(ref)):
        if candidate.is_dir():
            raise TraceError(f"{candidate}: not a run folder (no run.json and no events.jsonl)")
    raise TraceError(f"{ref}: no such run (neither a run folder nor a run id under {traces}/)")


def read(ref: str | Path, traces: str | Path = "traces") -> StoredRun:
    path = resolve(ref, traces)
    info = _json_file(path / "run.json", required=True)
    if info.get("schema") != RUN_SCHEMA:
        raise TraceError(f"{path / 'run.json'}: schema {info.get('schema')!r}, expected {RUN_SCHEMA!r}")
    events = read_events_strict(path / "events.jsonl")
    summary = _json_file(path / "summary.json", required=False)
    entries, steps, unevaluated = _replay(path / "events.jsonl", events)
    return StoredRun(path, info, events, summary, entries, steps, unevaluated)


def read_events_strict(events_file: Path) -> list[dict]:
    if not events_file.is_file():
        raise TraceError(f"{events_file.parent}: not a run folder (no events.jsonl)")
    raw = events_file.read_bytes()
    if not raw.strip():
        raise TraceError(f"{events_file}: empty: the run recorded nothing")
    events = []
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        where = f"{events_file}: line {number}"
        if not line.endswith(b"\n"):
            raise TraceError(f"{where} is cut off (the run was killed while writing it); "
                             "`kernelwright optimize --resume RUN` repairs the file")
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TraceError(f"{where}: not JSON ({exc})") from None
        if not isinstance(record, dict) or record.get("schema") != EVENTS_SCHEMA:
            found = record.get("schema") if isinstance(record, dict) else type(record).__name__
            raise TraceError(f"{where}: schema {found!r}, expected {EVENTS_SCHEMA!r}")
        if record.get("seq") != len(events) or not isinstance(record.get("kind"), str):
            raise TraceError(f"{where}: expected seq {len(events)} and a kind, got seq {record.get('seq')!r}, "
                             f"kind {record.get('kind')!r}")
        events.append(record)
    return events


def _json_file(path: Path, required: bool) -> dict | None:
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
    return data


def _replay(events_file: Path, events: list[dict]) -> tuple[list[Entry], list[Step], list[Unevaluated]]:
    proposals: dict[str, dict] = {}
    entries: list[Entry] = []
    steps: list[Step] = []
    unevaluated: list[Unevaluated] = []
    tokens, usd, gpu_s = 0, 0.0, 0.0
    best: Entry | None = None
    for ev in events:
        where = f"{events_file}: line {ev['seq'] + 1}"
        try:
            if ev["kind"] == "proposal":
                usage = ev.get("usage") or {}
                tokens += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
                usd += usage.get("cost_usd", 0.0)
                if ev.get("candidate_id"):
                    proposals[ev["candidate_id"]] = ev
                else:
                    unevaluated.append(_unevaluated(ev, ev.get("error") or "no candidate"))
            elif ev["kind"] == "skip" and ev.get("candidate_id"):
                p = proposals.get(ev["candidate_id"])
                if p is not None:
                    reason = ev.get("reason", "skipped")
                    if ev.get("duplicate_of"):
                        reason = f"{reason} of {ev['duplicate_of']}"
                    unevaluated.append(_unevaluated(p, reason))
            elif ev["kind"] == "evaluation":
                p = proposals.get(ev["candidate_id"])
                if p is None:
                    raise TraceError(f"{where}: evaluation of {ev['candidate_id']!r}, which no earlier proposal made")
                entry = Entry(ev["candidate_id"], candidate_from_record(p["candidate"]),
                              Result.model_validate(ev["result"]), list(p["parents"]), p["origin"], p["iteration"],
                              p.get("note", ""), ev.get("diagnosis"))
                entries.append(entry)
                gpu_s += entry.result.cost.gpu_s
                new = score(entry)
                if new is not None and (best is None or new > score(best)):
                    best = entry
                steps.append(Step(len(steps) + 1, entry, ev.get("wall_s", 0.0), tokens, usd, gpu_s,
                                  best.id if best else None, best.result.speedup("baseline") if best else None))
            elif ev["kind"] == "sanitize":
                sanitized = next((e for e in entries if e.id == ev["candidate_id"]), None)
                if sanitized is None:
                    raise TraceError(f"{where}: sanitize event for {ev['candidate_id']!r}, which was never evaluated")
                sanitized.result.record_sanitize(SanitizeReport.model_validate(ev["report"]))
        except TraceError:
            raise
        except ValidationError as exc:
            first = exc.errors()[0]
            raise TraceError(f"{where}: the result of {ev.get('candidate_id')!r} does not fit this kernelwright's "
                             f"Result record ({'.'.join(map(str, first['loc']))}: {first['msg']})") from None
        except CandidateError as exc:
            raise TraceError(f"{where}: candidate {ev.get('candidate_id')!r} cannot be read: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{where}: a {ev['kind']} event without a usable {exc} field") from None
    return entries, steps, unevaluated


def _unevaluated(p: dict, reason: str) -> Unevaluated:
    return Unevaluated(p.get("candidate_id"), list(p.get("parents") or []), p.get("origin", "?"), p.get("phase", "?"),
                       p.get("iteration", 0), reason, p.get("note", ""))


def load_run(ref: str | Path, traces: str | Path = "traces"):
    """Open a stored run as the notebook's ``agent.api.Run`` (no GPU, no model, nothing re-run)."""
    from ..report import summary as summary_mod
    from ..api import Run

    stored = read(ref, traces)
    summary = stored.summary
    if summary is None:
        best, base = stored.best, stored.baseline
        summary = {"run_id": stored.id, "task": {"name": stored.task_name}, "simulated": stored.simulated,
                   "sandbox": (stored.info.get("sandbox") or {}).get("kind"), "stops": {}, "stop_reason": None,
                   "best": summary_mod.entry_row(best) if best else None,
                   "baseline": summary_mod.entry_row(base) if base else None,
                   "candidates": len(stored.entries), "notes": [UNFINISHED_NOTE]}
    return Run(stored.id, stored.path, summary, stored.entries)
