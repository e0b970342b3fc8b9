"""A batch: several tasks optimized one after another, each its own run inside the batch folder.

``traces/<batch-id>/batch.json`` records the tasks and the config (file data and flags; no secrets);
``<batch-id>/<task>/`` is each task's run. Reopening a batch skips finished runs, resumes started
ones and starts the rest; ``summary.json`` holds one row per task.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sandbox.candidates.compiler import atomic_write
from sandbox.judging.result import Interval
from sandbox.tasks.task import load_task

from ..config import ConfigError, api_key, build, run_name
from ..redact import redact_config, redact_url, redact_urls_in
from ..trace.events import EndEvent, read_events
from ..trace.lock import FolderLock
from ..trace.records import Summary
from ..stops import StopReason

BATCH_SCHEMA = "kernelwright-batch-1"


class BatchRow(BaseModel):
    """One task of a batch, as ``summary.json`` and the table give it."""

    model_config = ConfigDict(extra="forbid")

    task: str
    state: str                           # done, failed, stopped (Ctrl-C), error (it could not run), not run
    run: str | None = None               # the run folder
    best: str | None = None              # the winner's id
    speedup: Interval | None = None      # the winner's over the baseline
    candidates: int | None = None
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    simulated: bool = False
    stop: str | None = None              # why the run stopped (its failure, where one did), or why it could not run


class Batch:
    def __init__(self, path: Path, info: dict):
        self.path = Path(path)
        self.info = info
        self.lock = FolderLock(self.path)

    def __enter__(self) -> "Batch":
        """Hold the batch folder for this process (a second batch on it gets ``RunBusy``)."""
        self.lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()

    @classmethod
    def create(cls, path: Path, tasks: list[str], base: dict, overrides: dict) -> "Batch":
        """Check every task and the config first: a batch that cannot start leaves no folder behind."""
        if (path / "batch.json").exists():
            raise ConfigError(f"{path}: a batch already exists there (use --resume to continue it)")
        names = [run_name(Path(t).name, f"batch task {t!r}") for t in tasks]
        if len(set(names)) != len(names):
            raise ConfigError(f"batch: tasks repeat: {', '.join(names)}")
        from .session import check_baseline

        for task in tasks:
            check_baseline(load_task(task))
        cfg = build(base, overrides, "batch")
        if cfg.model:
            api_key(cfg.model)
        info = {"schema": BATCH_SCHEMA, "created": dt.datetime.now().isoformat(timespec="seconds"),
                "tasks": list(tasks), "base": base, "overrides": overrides, "results": {}}
        batch = cls(path, info)
        with batch.lock:
            if (path / "batch.json").exists():
                raise ConfigError(f"{path}: a batch already exists there (use --resume to continue it)")
            batch._save()
        return batch

    @classmethod
    def open(cls, ref: str, traces: Path) -> "Batch":
        for path in (Path(ref), Path(traces) / ref):
            if (path / "batch.json").is_file():
                try:
                    info = json.loads((path / "batch.json").read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError) as exc:
                    raise ConfigError(f"{path / 'batch.json'}: not JSON ({exc})") from None
                if not isinstance(info, dict) or info.get("schema") != BATCH_SCHEMA:
                    found = info.get("schema") if isinstance(info, dict) else type(info).__name__
                    raise ConfigError(f"{path / 'batch.json'}: schema {found!r}, expected {BATCH_SCHEMA!r}")
                return cls(path, info)
        raise ConfigError(f"{ref}: no such batch (neither a batch folder nor a batch id under {traces})")

    tasks = property(lambda self: self.info["tasks"])
    base = property(lambda self: self.info["base"])
    overrides = property(lambda self: self.info["overrides"])

    def run_dir(self, task: str) -> Path:
        return self.path / Path(task).name

    def started(self, task: str) -> bool:
        return (self.run_dir(task) / "events.jsonl").is_file()

    def done(self, task: str) -> bool:
        if not self.started(task):
            return False
        events = read_events(self.run_dir(task))
        return bool(events) and isinstance(events[-1], EndEvent) and not _interrupted(events[-1].summary)

    def record(self, task: str, summary: Summary) -> None:
        best, t = summary.best, summary.totals
        failed = next((stop for stop in summary.stops.values() if stop.reason.failed), None)  # even if tuning ran after
        state = "stopped" if _interrupted(summary) else "failed" if failed else "done"
        self._put(BatchRow(task=task, state=state, run=str(self.run_dir(task)), best=best.id if best else None,
                           speedup=summary.claim.headline(best.id, best.speedup) if best else None, candidates=summary.candidates, tokens=t.tokens,
                           usd=t.usd, gpu_s=t.gpu_s, simulated=summary.simulated,
                           stop=failed.message if failed else summary.stop_reason))

    def record_error(self, task: str, error: str) -> None:
        self._put(BatchRow(task=task, state="error", run=str(self.run_dir(task)), stop=error))

    def _put(self, row: BatchRow) -> None:
        self.info["results"][row.task] = row.model_dump(mode="json")
        self._save()

    def write_summary(self) -> list[BatchRow]:
        rows = []
        for task in self.tasks:
            row = self.info["results"].get(task)
            if row is None and self.done(task):
                self.record(task, read_events(self.run_dir(task))[-1].summary)
                row = self.info["results"][task]
            rows.append(BatchRow.model_validate(row) if row else BatchRow(task=task, state="not run"))
        data = [r.model_dump(mode="json") for r in rows]
        atomic_write(self.path / "summary.json", json.dumps({"schema": BATCH_SCHEMA, "tasks": _public(data)}, indent=2) + "\n")
        return rows

    def _save(self) -> None:
        """batch.json without credentials, in the config file's data and the flags alike (an endpoint URL's and
        ``extra_body``'s are given again on --resume), and without any URL's key-like query values."""
        public = dict(self.info)
        for part in ("base", "overrides"):
            model = (public.get(part) or {}).get("model") or {}
            if model.get("base_url"):
                model = {**model, "base_url": redact_url(model["base_url"])}
            if isinstance(model.get("extra_body"), dict):
                model = {**model, "extra_body": redact_config(model["extra_body"])}
            if model:
                public[part] = {**public[part], "model": model}
        public = {k: v if k in ("base", "overrides") else _public(v) for k, v in public.items()}
        atomic_write(self.path / "batch.json", json.dumps(public, indent=2, default=str) + "\n")


def _public(value):
    """A JSON-like value with every URL in its strings redacted (a stop message may quote an endpoint)."""
    if isinstance(value, str):
        return redact_urls_in(value)
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


def _interrupted(summary: Summary) -> bool:
    stop = summary.last_stop
    return stop is not None and stop.reason is StopReason.INTERRUPTED
