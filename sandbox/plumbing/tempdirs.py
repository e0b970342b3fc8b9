"""Private temporary folders that name their owner, and the sweep that removes those whose owner is gone.

Every folder the sandbox makes for itself (worker homes ``kw-compile-*``, ``kw-gpu-*``, ``kw-reference-*``,
benchmark-size data in ``/dev/shm/kw-data-*``, profiler and sanitizer homes ``kw-profile-*``, ``kw-sanitize-*``)
is named ``kw-<role>-<pid>-<random>`` after the process that owns it, and removed by that process when it
closes. A process killed with SIGKILL cannot remove its folders: the next sandbox to open removes every
such folder of this user, in the temp folder and in ``/dev/shm``, whose owner is no longer running.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_OWNED = re.compile(r"kw-[a-z]+-(\d+)-[A-Za-z0-9_]+")
SHM = Path("/dev/shm")


def make(role: str, root: Path | None = None) -> Path:
    """A new folder ``kw-<role>-<this pid>-<random>`` under ``root`` (default: the temp folder), mode 700."""
    path = Path(tempfile.mkdtemp(prefix=f"kw-{role}-{os.getpid()}-", dir=root))
    os.chmod(path, 0o700)
    return path


def shm_root() -> Path | None:
    """/dev/shm where it is a writable folder (RAM-backed data for the GPU workers), else None."""
    return SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None


def sweep(roots: list[Path] | None = None) -> list[Path]:
    """Remove this user's ``kw-<role>-<pid>-*`` folders whose process is gone; returns what was removed."""
    if roots is None:
        roots = [Path(tempfile.gettempdir())] + [r for r in (shm_root(),) if r is not None]
    removed = []
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            owner = _OWNED.fullmatch(entry.name)
            try:
                if not owner or not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                    continue
            except OSError:
                continue
            if not _alive(int(owner.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
