"""A run's trace folder: ``traces/<run-id>/``.

- ``run.json``: schema ``kernelwright-run-1``; the resolved config (no secrets), the task's name, version
  and fingerprint, the environment, and one line per session (start and resumes).
- ``events.jsonl``: append-only, one JSON object per line, each carrying ``"schema": "kernelwright-events-1"``,
  a sequence number ``seq``, the time ``t`` (Unix seconds), the run's cumulative wall time ``wall_s`` and a
  ``kind``: ``session``, ``phase``, ``request``, ``model_call`` (one per attempt: the messages added since
  the previous attempt, the response, reasoning, finish reason, usage), ``proposal``, ``evaluation``,
  ``skip``, ``best``, ``stop``, ``sanitize`` (compute-sanitizer's report on a winner: ``candidate_id``, ``report``),
  ``error``, ``end``. Each line is flushed and fsynced before the run goes on.
- ``candidates/<id>/``: ``candidate.cu`` (``Candidate.render()``, knob values and flags written in) and
  ``result.json``.
- ``best.cu`` and ``summary.json`` at the end of each session.

Every text written passes through the run's ``Redactor`` (``agent.redact``), which replaces its secrets
(API keys, the endpoint URL's credentials) with ``[redacted]``: no key lands on disk, whatever echoed it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from sandbox.candidate import Candidate, parse_candidate
from sandbox.compiler import atomic_write

from ..redact import Redactor
from .lock import FolderLock

EVENTS_SCHEMA = "kernelwright-events-1"
RUN_SCHEMA = "kernelwright-run-1"


class Trace:
    def __init__(self, path: Path, redactor: Redactor | None = None, wall_offset: float = 0.0,
                 lock: FolderLock | None = None):
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self.lock = lock
        self._seq = 0
        self._wall0 = time.monotonic() - wall_offset
        self._file = None

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, run_info: dict, redactor: Redactor | None = None) -> "Trace":
        """A new run folder, locked for this process; events.jsonl exists before run.json does."""
        path = Path(path)
        existed = path.exists()
        lock = FolderLock(path).acquire()
        try:
            if (path / "events.jsonl").exists() or (path / "run.json").exists():
                raise FileExistsError(f"{path}: a run already exists there (use --resume to continue it)")
            trace = cls(path, redactor, lock=lock)
            trace._open()
            trace.write_json("run.json", {"schema": RUN_SCHEMA, **run_info})
        except BaseException:
            lock.release()
            if not existed:
                shutil.rmtree(path, ignore_errors=True)
            raise
        return trace

    @classmethod
    def resume(cls, path: Path, redactor: Redactor | None = None, lock: FolderLock | None = None) -> "Trace":
        """Reopen a trace for appending: a line torn by a kill is cut off, everything complete is kept."""
        path = Path(path)
        lock = lock or FolderLock(path).acquire()
        try:
            events_file = path / "events.jsonl"
            if not events_file.is_file():
                raise FileNotFoundError(f"{path}: not a run folder (no events.jsonl)")
            events = read_events(path, repair=True)
            trace = cls(path, redactor, wall_offset=events[-1].get("wall_s", 0.0) if events else 0.0, lock=lock)
            trace._seq = events[-1]["seq"] + 1 if events else 0
            trace._open()
        except BaseException:
            lock.release()
            raise
        return trace

    def _open(self) -> None:
        self._file = open(self.path / "events.jsonl", "a", encoding="utf-8")

    # ---- writing -------------------------------------------------------------------------------

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self._wall0

    def scrub(self, text: str) -> str:
        return self.redactor.text(text)

    def event(self, kind: str, **data: Any) -> dict:
        record = {"schema": EVENTS_SCHEMA, "seq": self._seq, "t": round(time.time(), 3),
                  "wall_s": round(self.wall_s, 3), "kind": kind, **data}
        line = self.scrub(json.dumps(record, default=_jsonable, ensure_ascii=False))
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self._seq += 1
        return record

    def write_json(self, name: str, data: Any) -> Path:
        target = self.path / name
        atomic_write(target, self.scrub(json.dumps(data, indent=2, default=_jsonable, ensure_ascii=False)) + "\n")
        return target

    def write_text(self, name: str, text: str) -> Path:
        target = self.path / name
        atomic_write(target, self.scrub(text))
        return target

    def save_candidate(self, entry_id: str, rendered: str, result_json: str | None = None) -> None:
        self.write_text(f"candidates/{entry_id}/candidate.cu", rendered)
        if result_json is not None:
            self.write_text(f"candidates/{entry_id}/result.json", result_json)

    def run_info(self) -> dict:
        return json.loads((self.path / "run.json").read_text())

    def update_run_info(self, **changes: Any) -> None:
        self.write_json("run.json", {**self.run_info(), **changes})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.lock is not None:
            self.lock.release()


def read_events(path: Path, repair: bool = False) -> list[dict]:
    """All complete events of a run. With ``repair``, a torn last line (a kill mid-write) is cut from the file."""
    events_file = Path(path) / "events.jsonl"
    raw = events_file.read_bytes()
    good_end = 0
    events = []
    for line in raw.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if record.get("schema") != EVENTS_SCHEMA:
            raise ValueError(f"{events_file}: line {len(events) + 1}: unknown schema {record.get('schema')!r}")
        events.append(record)
        good_end += len(line)
    if repair and good_end < len(raw):
        with open(events_file, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return events


def candidate_record(c: Candidate) -> dict:
    """A candidate as events store it: the source as received, plus the chosen flags and knob values."""
    return {"source": c.source, "flags": list(c.flags), "knobs": {k: list(v) for k, v in c.knobs.items()},
            "knob_values": dict(c.knob_values), "label": c.label}


def candidate_from_record(d: dict) -> Candidate:
    c = parse_candidate(d["source"], label=d["label"])
    return dataclasses.replace(c, flags=tuple(d["flags"]), knobs={k: tuple(v) for k, v in d["knobs"].items()},
                               knob_values=dict(d["knob_values"]))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "value"):
        return value.value
    raise TypeError(f"cannot write {type(value).__name__} to a trace")
