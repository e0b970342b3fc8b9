"""Writing a command's output file: a folder given for a file, a full disk, a missing permission are one error
line (``BadInput``, exit code 2), and nothing half-written is left (``atomic_write``)."""

from __future__ import annotations

from pathlib import Path

from .app import BadInput


def write_output(path: Path, data: str | bytes, option: str = "-o") -> None:
    from sandbox.plumbing.files import atomic_write

    if path.is_dir():
        raise BadInput(f"{option} {path}: is a folder; give a file name")
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write it: {exc.strerror or exc}") from None


def output_folder(path: Path, option: str = "-o") -> None:
    """A folder to write into must not be a file."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"{option} {path}: is a file; give a folder")
