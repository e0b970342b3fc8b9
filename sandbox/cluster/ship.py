"""Task folders travel to the actors: a GPU on another host has no copy of the driver's task folder.

``pack(task)`` reads the folder's files (no caches, at most ``MAX_BYTES``); ``TaskShelf.get(packed)`` writes them
once per task fingerprint under a private folder of the actor's host and loads the task from there, refusing a
copy whose fingerprint differs from the driver's (the files changed while they travelled, or a different
kernelwright reads them differently).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..plumbing import tempdirs
from ..tasks.task import Task, TaskError, load_task

MAX_BYTES = 16 * 2**20
SKIP = ("__pycache__", ".git", ".ipynb_checkpoints")


@dataclass(frozen=True)
class PackedTask:
    """A task folder's files by relative path, with the fingerprint the driver computed."""

    name: str
    fingerprint: str
    files: tuple[tuple[str, bytes], ...]


def pack(task: Task) -> PackedTask:
    folder = task.folder.resolve()
    files, total = [], 0
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in SKIP or part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_BYTES:
            raise TaskError(f"{folder}: the task folder holds more than {MAX_BYTES // 2**20} MiB of files; "
                            "a task sent to a cluster must be smaller")
        files.append((rel.as_posix(), data))
    return PackedTask(task.name, task.fingerprint, tuple(files))


class TaskShelf:
    """Unpacked task folders of one actor, by fingerprint; ``close`` removes them."""

    def __init__(self):
        self.root = tempdirs.make("tasks")
        self._tasks: dict[str, Task] = {}

    def get(self, packed: PackedTask) -> Task:
        task = self._tasks.get(packed.fingerprint)
        if task is not None:
            return task
        folder = self.root / packed.fingerprint / packed.name
        folder.mkdir(parents=True, exist_ok=True)
        for rel, data in packed.files:
            target = (folder / rel).resolve()
            if folder.resolve() not in target.parents:
                raise TaskError(f"{packed.name}: the packed file {rel!r} would land outside its task folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        task = load_task(folder)
        if task.fingerprint != packed.fingerprint:
            raise TaskError(f"{packed.name}: the task's fingerprint is {task.fingerprint} on this host and "
                            f"{packed.fingerprint} on the driver (a different kernelwright reads it?)")
        self._tasks[packed.fingerprint] = task
        return task

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self._tasks.clear()
