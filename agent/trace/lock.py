"""One process at a time in a run (or batch) folder: an advisory lock (``flock``) on ``<folder>/.lock``.

The lock file says who holds it (process id, host, command, since when). A second process that wants the
folder gets ``RunBusy`` naming the holder. The kernel releases the lock when the holding process ends,
however it ends (SIGKILL included), so a killed run never leaves a stale lock behind; a process that
merely reads a run (``show``, ``report``, ``verify``) takes no lock. A holder that releases the lock removes the
file first (one that is killed leaves it, unlocked); a process that locked a file another one removed meanwhile
tries again on the new one.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from ..redact import redact_urls_in

LOCK_NAME = ".lock"


class RunBusy(RuntimeError):
    """Another live process holds the folder (the message names it)."""


class FolderLock:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._fd: int | None = None

    def acquire(self) -> "FolderLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _describe(os.pread(fd, 4096, 0))
                os.close(fd)
                raise RunBusy(f"{self.folder}: in use by {holder}; wait for it to end (or stop it), then try "
                              "again") from None
            if self._still_linked(fd):
                break
            os.close(fd)  # its holder removed it as it let go: lock the file that is there now
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": redact_urls_in(" ".join(sys.argv))[:300],
              "since": dt.datetime.now().isoformat(timespec="seconds")}
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        except OSError:  # a full disk: the lock holds all the same; the file just cannot say who holds it
            pass
        return self

    def _still_linked(self, fd: int) -> bool:
        try:
            return os.stat(self.folder / LOCK_NAME).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.unlink(self.folder / LOCK_NAME)
            except FileNotFoundError:
                pass
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def __enter__(self) -> "FolderLock":
        return self.acquire() if not self.held else self

    def __exit__(self, *exc) -> None:
        self.release()


def _describe(raw: bytes) -> str:
    try:
        who = json.loads(raw)
        return f"process {who['pid']} on {who['host']} ({who['command']}, since {who['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process (starting up)"
