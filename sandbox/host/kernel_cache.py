"""CuPy's compiled kernels carried from one worker process to the next, without one process's cache reaching a
trusted process.

Every GPU and reference worker has a private CuPy kernel cache (``CUPY_CACHE_DIR`` in its own home folder). Left
empty, each new worker compiles every CuPy kernel the stages use again (input generation, guard bands, masks,
comparisons): tens of seconds on a sandbox's first evaluation. So a worker's private cache starts as a copy of
the **seed** (``cache_dir()/cupy-seed``), and kernels compiled by a process that has run only trusted code go back
into the seed:

- the reference worker never loads candidate code: what it compiled is always harvested;
- a GPU worker is harvested only until it is given device code that is not trusted (``WorkerProcess.trust``:
  the harness and the tasks' own baselines). From then on its process may have been written by a kernel (a
  device with access to host memory can reach any page of it), so nothing it writes goes back, until it is
  replaced by a fresh process.

Only ``*.cubin`` files travel (CuPy's finished modules; it writes each through a temp file and a rename, and
checks each file's digest when it loads it). The seed is written one file at a time through a rename, so
workers of other sandboxes on the machine can read it while it grows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..plumbing.files import atomic_write, cache_dir

PATTERN = "*.cubin"


def seed() -> Path:
    path = cache_dir() / "cupy-seed"
    path.mkdir(parents=True, exist_ok=True)
    return path


def seed_into(private: Path) -> int:
    """Copy the seed's kernels into a new worker's private cache; returns how many."""
    src, n = seed(), 0
    for path in src.glob(PATTERN):
        target = private / path.name
        if not target.exists():
            try:
                shutil.copyfile(path, target)
                n += 1
            except OSError:
                pass   # another sandbox replaced it meanwhile: the worker compiles that one itself
    return n


def harvest(private: Path) -> int:
    """Copy the kernels of a trusted worker's private cache that the seed lacks into the seed; returns how many."""
    dst, n = seed(), 0
    for path in private.glob(PATTERN):
        if not (dst / path.name).exists():
            try:
                atomic_write(dst / path.name, path.read_bytes())
                n += 1
            except OSError:
                pass
    return n


def cubins(message) -> list[bytes]:
    """Every ``bytes`` value anywhere in a wire record (its fields, lists, tuples and dicts, however deep): the
    device code the request asks the worker to load. Any bytes count, whatever the field's name."""
    out: list[bytes] = []
    todo = [message]
    while todo:
        item = todo.pop()
        if isinstance(item, (bytes, bytearray)):
            out.append(bytes(item))
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif hasattr(item, "__dataclass_fields__"):
            todo.extend(getattr(item, name) for name in item.__dataclass_fields__)
    return out
