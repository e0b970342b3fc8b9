"""Files the sandbox and the agent write: the machine-local cache folder, and writes a reader never sees half done
(tempfile and ``os.replace``, as CuPy's kernel cache does)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """Machine-local cache folder; ``KERNELWRIGHT_CACHE_DIR`` overrides it."""
    root = os.environ.get("KERNELWRIGHT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelwright")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write via a temp file in the same folder and ``os.replace``: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def move_in_new(folder: Path, target: Path) -> bool:
    """Move ``folder`` to ``target`` only if no folder has that name: the name is taken with ``mkdir`` (which one
    process wins) and the folder renamed onto the empty one taken. False (and nothing moved) where the name was
    already taken: two writers of one name never both succeed, one silently overwriting the other."""
    try:
        os.mkdir(target)
    except FileExistsError:
        return False
    try:
        os.rename(folder, target)
    except BaseException:
        os.rmdir(target)
        raise
    return True
