"""Writing a run's trace folder: ``traces/<run-id>/``.

- ``run.json``: ``RunInfo`` (``agent.trace.records``): the resolved config (no secrets), the task's name,
  version and fingerprint, the environment, and one line per session (start and resumes).
- ``events.jsonl``: append-only, one event per line (``agent.trace.events``: each model says its fields);
  each line is flushed and fsynced before the run goes on, and carries a hash chain over the lines so far.
- ``candidates/<id>/``: ``candidate.cu`` (``Candidate.render()``, knob values and flags written in) and
  ``result.json``; the evaluation event records the SHA-256 of the candidate.cu it judged.
- ``best.cu`` and ``summary.json`` (``Summary``) at the end of each session.

Every text written passes through the run's ``Redactor`` (``agent.redact``), which replaces its secrets
(API keys, the endpoint URL's credentials) with ``[redacted]``: no key lands on disk, whatever echoed it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sandbox.candidates.compiler import atomic_write

from ..redact import Redactor
from .events import EvaluationEvent, Event, chained, json_text, read_events, to_line
from .lock import FolderLock
from .records import RunInfo


class Trace:
    def __init__(self, path: Path, redactor: Redactor | None = None, wall_offset: float = 0.0,
                 lock: FolderLock | None = None):
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self.lock = lock
        self._seq = 0
        self._chain: str | None = None   # the chain of the last line on disk
        self._sources: dict[str, str] = {}  # candidate id -> SHA-256 of its candidate.cu as last written
        self._wall0 = time.monotonic() - wall_offset
        self._file = None
        self._writing = threading.Lock()   # a tool-calling session writes its calls from its own thread

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, run_info: RunInfo, redactor: Redactor | None = None) -> "Trace":
        """A new run folder, locked for this process; events.jsonl exists before run.json does."""
        path = Path(path)
        existed = path.exists()
        lock = FolderLock(path).acquire()
        try:
            if (path / "run.json").exists():
                raise FileExistsError(f"{path}: a run already exists there (use --resume to continue it)")
            events = path / "events.jsonl"
            if events.exists() and events.stat().st_size:  # an empty one is a start that was killed at once
                raise FileExistsError(f"{events}: events without a run.json: not a run to continue or overwrite")
            trace = cls(path, redactor, lock=lock)
            trace._open()
            trace.write_json("run.json", run_info)
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
            events = read_events(path, repair=True)
            trace = cls(path, redactor, wall_offset=events[-1].wall_s if events else 0.0, lock=lock)
            trace._seq = events[-1].seq + 1 if events else 0
            trace._chain = events[-1].chain if events else None
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

    def event(self, event: Event) -> Event:
        """Number, time-stamp and append ``event``; it is on disk when this returns."""
        with self._writing:
            return self._append(event)

    def _append(self, event: Event) -> Event:
        update = {"seq": self._seq, "t": round(time.time(), 3), "wall_s": round(self.wall_s, 3)}
        if isinstance(event, EvaluationEvent) and event.source_sha256 is None:
            update["source_sha256"] = self._sources.get(event.candidate_id)
        event = event.model_copy(update=update)
        line, link = chained(self.scrub(to_line(event)), self._chain)
        try:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            self._seq += 1
            self._chain = link
        except OSError as exc:  # a full disk: the torn line is cut, the error names the file
            self._resync()
            raise OSError(exc.errno, exc.strerror, str(self.path / "events.jsonl")) from None
        except BaseException:
            self._resync()  # a Ctrl-C between the write and the count must not give two lines one number
            raise
        return event

    def _resync(self) -> None:
        """Number the next event after the complete lines on disk (a torn last line is cut off)."""
        self._file.flush()
        events_file = self.path / "events.jsonl"
        raw = events_file.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        if len(complete) < len(raw):
            os.truncate(events_file, len(complete))
        self._seq = complete.count(b"\n")
        last = re.search(rb'"chain": "([0-9a-f]{64})"\}\n$', complete)
        self._chain = last.group(1).decode() if last else None

    def write_json(self, name: str, data: Any) -> Path:
        """``data`` (a record or plain JSON data) as ``name``, scrubbed, written atomically."""
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json", by_alias=True)
        target = self.path / name
        atomic_write(target, self.scrub(json_text(data, indent=2, default=_jsonable)) + "\n")
        return target

    def write_text(self, name: str, text: str) -> Path:
        """``text`` scrubbed, as UTF-8 (a lone surrogate from a model's answer written as ``\\udXXX``)."""
        target = self.path / name
        atomic_write(target, self.scrub(text).encode("utf-8", "backslashreplace"))
        return target

    def save_candidate(self, entry_id: str, rendered: str, result_json: str | None = None) -> None:
        path = self.write_text(f"candidates/{entry_id}/candidate.cu", rendered)
        self._sources[entry_id] = hashlib.sha256(path.read_bytes()).hexdigest()
        if result_json is not None:
            self.write_text(f"candidates/{entry_id}/result.json", result_json)

    def run_info(self) -> RunInfo:
        return RunInfo.model_validate_json((self.path / "run.json").read_text())

    def update_run_info(self, **changes: Any) -> None:
        info = RunInfo.model_validate({**self.run_info().model_dump(by_alias=True), **changes})
        self.write_json("run.json", info)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.lock is not None:
            self.lock.release()


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
