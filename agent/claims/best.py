"""The best-known store: the fastest correct kernel seen for a task, per GPU, driver, CUDA and size.

A record is valid only inside its envelope: the task's content (``Task.fingerprint``), the GPU
model, the driver, the CUDA runtime, the NVRTC version that compiled it, and the size it was timed
at. Records live under ``sandbox.plumbing.files.cache_dir()/best/<task>/<fingerprint>/`` as one JSON
file per envelope, written atomically under a lock, so concurrent runs never leave half a file and
never lose the faster of two offers. Each record carries ``digest``, the SHA-256 of the rest of it: a record
whose kernel or numbers were edited by hand is refused (``TamperedRecord``, naming the file), a check against
accidents and casual edits, not a signature. Ranking is by the speedup over the task's baseline timed A/B in
the same measurement (drift cancels), not by raw milliseconds from different sessions.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import time
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from sandbox.candidates.candidate import Candidate
from sandbox.judging.environment import Environment
from sandbox.judging.result import Interval, Result
from sandbox.tasks.task import Task, describe_sizes

SCHEMA_VERSION = 1


class TamperedRecord(ValueError):
    """A stored record whose content is not the one its digest was made of (the message names the file)."""


class Envelope(BaseModel):
    """Where a measurement holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    driver: str | None = None
    cuda: str | None = None
    nvrtc: str | None = None

    @classmethod
    def from_env(cls, env: Environment) -> "Envelope | None":
        """From a Result's ``env`` (or a GPU worker's device info read as one); None without a GPU."""
        if not env.gpu:
            return None
        return cls(gpu=env.gpu, driver=_s(env.driver), cuda=_s(env.cuda_runtime), nvrtc=_s(env.nvrtc))

    def describe(self) -> str:
        return f"{self.gpu} (driver {self.driver}, CUDA {self.cuda}, NVRTC {self.nvrtc})"


class BestRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    task: str
    task_version: int
    task_fingerprint: str
    envelope: Envelope
    sizes: dict[str, int]
    kernel: str                          # Candidate.render(): source with its plan, knobs and flags
    label: str
    knobs: dict[str, int]
    flags: list[str]
    median_ms: float
    speedup: Interval                    # over the task's baseline (PyTorch eager for a task imported from PyTorch)
    vendor_speedup: Interval | None = None  # over the vendor library (torch.compile for such a task)
    against: str = "baseline"
    pct_of_roofline: float | None = None
    run: str | None = None
    recorded_at: str
    digest: str | None = None            # SHA-256 of the record without it; a record without one is refused

    def content_digest(self) -> str:
        data = self.model_dump(mode="json", exclude={"digest"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def describe(self) -> str:
        s = self.speedup
        text = (f"{self.task} at {describe_sizes(self.sizes)} on {self.envelope.describe()}: {self.label}, "
                f"{self.median_ms:.4g} ms, {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}] vs {self.against}")
        if self.vendor_speedup:
            v = self.vendor_speedup
            text += f", {v.value:.3f}x [{v.low:.3f}, {v.high:.3f}] vs {'compile' if self.against == 'eager' else 'vendor'}"
        if self.pct_of_roofline is not None:
            text += f", {self.pct_of_roofline:.1f}% of roofline"
        return text + (f" (run {self.run})" if self.run else "")


def _s(x) -> str | None:
    return None if x is None else str(x)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", text).strip("_")[:60]


class BestStore:
    def __init__(self, root: Path | None = None):
        if root is None:
            from sandbox.plumbing.files import cache_dir

            root = cache_dir() / "best"
        self.root = Path(root)

    def path(self, task: Task, envelope: Envelope, sizes: dict[str, int]) -> Path:
        ident = repr((envelope.model_dump(), sorted(sizes.items())))
        name = f"{_slug(envelope.gpu)}__{_slug(describe_sizes(sizes))}__{hashlib.sha256(ident.encode()).hexdigest()[:12]}.json"
        return self.root / task.name / task.fingerprint / name

    def offer(self, task: Task, candidate: Candidate, result: Result, run: str | None = None) -> bool:
        """Store ``candidate`` if its result is correct, timed on a real GPU, and faster than the record."""
        envelope = Envelope.from_env(result.env)
        speedup = result.speedup("baseline")
        if not result.ok or result.timing is None or speedup is None or envelope is None or result.env.simulated:
            return False
        if result.task_fingerprint != task.fingerprint:
            return False
        t = result.timing
        record = BestRecord(
            task=task.name, task_version=task.spec.version, task_fingerprint=task.fingerprint, envelope=envelope,
            sizes=dict(t.sizes), kernel=candidate.render(), label=candidate.label, knobs=candidate.defines(),
            flags=list(candidate.flags), median_ms=t.impls["candidate"].median_ms, speedup=speedup,
            vendor_speedup=result.speedup("vendor") or result.speedup("compile"), against=t.primary,
            pct_of_roofline=t.impls["candidate"].pct_of_roofline,
            run=run, recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        record.digest = record.content_digest()
        path = self.path(task, envelope, record.sizes)
        with self._lock(path.parent):
            try:
                current = self._read(path)
            except TamperedRecord:
                current = None  # a measured kernel takes the place of an edited record
            if current is not None and current.speedup.value >= record.speedup.value:
                return False
            from sandbox.plumbing.files import atomic_write

            atomic_write(path, record.model_dump_json(indent=2))
        return True

    def get(self, task: Task, envelope: Envelope, sizes: dict[str, int] | None = None) -> BestRecord | None:
        return self._read(self.path(task, envelope, sizes or task.spec.sizes.benchmark))

    def records(self, task: Task, any_version: bool = False) -> list[BestRecord]:
        """Every record for this task (this version only unless ``any_version``), fastest first."""
        folder = self.root / task.name
        pattern = "*/*.json" if any_version else f"{task.fingerprint}/*.json"
        found = [r for p in sorted(folder.glob(pattern)) if (r := self._read(p)) is not None]
        return sorted(found, key=lambda r: -r.speedup.value)

    def for_gpu(self, task: Task, gpu: str, sizes: dict[str, int] | None = None) -> BestRecord | None:
        """The fastest record for a GPU model at ``sizes`` (any driver or CUDA version)."""
        sizes = sizes or task.spec.sizes.benchmark
        hits = [r for r in self.records(task) if r.envelope.gpu == gpu and r.sizes == sizes]
        return hits[0] if hits else None

    @staticmethod
    def _read(path: Path) -> BestRecord | None:
        """The record in ``path``; None where there is none or it cannot be read; TamperedRecord where its
        content does not match its digest."""
        try:
            record = BestRecord.model_validate_json(path.read_text())
        except (OSError, ValidationError, UnicodeDecodeError):
            return None
        if record.digest is None:
            raise TamperedRecord(f"{path}: has no digest, so an edit to its kernel or numbers cannot be detected "
                                 "(removed, or stored by an older kernelwright); delete the file to drop the record")
        if record.digest != record.content_digest():
            raise TamperedRecord(f"{path}: its kernel or numbers were edited after it was stored (the digest does "
                                 "not match); delete the file to drop the record")
        return record

    @contextmanager
    def _lock(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
