"""Which solution answers which problem, for ``kernelwright judge``: one pair given, two folders paired by file name
and by KernelBench's level/problem-id layout, or a JSON-lines file of ``{"problem": ..., "solution": ...}``.

Every problem given is kept, with or without a solution (``solution`` None): a table over a folder of problems has
every problem in its denominator. Reads file names only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_LEVEL = re.compile(r"level[_-]?(\d+)", re.I)
_PROBLEM_ID = re.compile(r"problem[_-]?(\d+)", re.I)
_LEADING_ID = re.compile(r"^(\d+)_")


class PairingError(ValueError):
    """The inputs cannot be paired; the message says which and why."""


@dataclass(frozen=True)
class Pair:
    problem: Path                 # a KernelBench problem file, or a task folder made by ``kernelwright import``
    solution: Path | None         # None: no solution was given for this problem (it counts as not solved)
    name: str                     # unique, for the result's file and the table's row

    @property
    def level(self) -> int | None:
        m = _LEVEL.search(str(self.problem.parent.name)) or _LEVEL.search(str(self.problem))
        return int(m.group(1)) if m else None


def _key(path: Path, root: Path) -> tuple[int | None, int | None, str]:
    """(level, problem id, stem) of a problem or solution file under ``root``."""
    rel = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
    level = _LEVEL.search(rel)
    pid = _PROBLEM_ID.search(path.stem) or _LEADING_ID.match(path.stem)
    return (int(level.group(1)) if level else None, int(pid.group(1)) if pid else None, path.stem)


def _problems(root: Path) -> list[Path]:
    if (root / "task.toml").is_file():
        return [root]
    found = sorted(p for p in root.rglob("*.py") if not p.name.startswith("_"))
    found += sorted(p.parent for p in root.rglob("task.toml") if p.parent != root)
    return [p for p in found if not any(part.startswith(".") for part in p.relative_to(root).parts)]


def pair_folders(problems: Path, solutions: Path) -> list[Pair]:
    """Every problem under ``problems``, with the solution under ``solutions`` of the same file name (and level
    folder, where there is one), or else of the same level and problem id (``level_1_problem_19_sample_0.py``,
    ``level1/19_ReLU.py``)."""
    probs = _problems(problems)
    if not probs:
        raise PairingError(f"{problems}: no problem files (.py) or task folders under it")
    sols = sorted(p for p in solutions.rglob("*.py"))
    by_stem: dict[tuple, Path] = {}
    by_id: dict[tuple, Path] = {}
    for s in sols:
        level, pid, stem = _key(s, solutions)
        by_stem.setdefault((level, stem), s)
        by_stem.setdefault((None, stem), s)
        if pid is not None:
            by_id.setdefault((level, pid), s)
    pairs, taken = [], set()
    for p in probs:
        level, pid, stem = _key(p, problems)
        s = by_stem.get((level, stem)) or by_stem.get((None, stem)) or by_id.get((level, pid))
        if s is None and level is None and pid is not None:
            s = by_id.get((None, pid))
        if s in taken:
            s = None
        if s is not None:
            taken.add(s)
        pairs.append(Pair(p, s, _unique(f"level{level}_{stem}" if level is not None else stem, pairs)))
    return pairs


def pair_lines(path: Path) -> list[Pair]:
    """The pairs of a JSON-lines file, paths relative to the file's folder."""
    pairs = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise PairingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            problem, solution = Path(item["problem"]), item.get("solution")
        except (ValueError, KeyError, TypeError):
            raise PairingError(f"{path}:{n}: expected a JSON object with \"problem\" and \"solution\"") from None
        problem = problem if problem.is_absolute() else path.parent / problem
        sol = None if solution is None else (Path(solution) if Path(solution).is_absolute() else path.parent / solution)
        for p in (problem, sol):
            if p is not None and not p.exists():
                raise PairingError(f"{path}:{n}: {p} does not exist")
        pairs.append(Pair(problem, sol, _unique(item.get("name") or (sol or problem).stem, pairs)))
    if not pairs:
        raise PairingError(f"{path}: no pairs")
    return pairs


def pairs_for(first: Path, second: Path | None) -> list[Pair]:
    """The pairs ``judge FIRST [SECOND]`` means: a problem and a solution, two folders, or a JSON-lines file."""
    if second is None:
        if first.suffix in (".jsonl", ".json"):
            return pair_lines(first)
        raise PairingError(f"{first}: give a problem and a solution, two folders, or a .jsonl file of pairs")
    for p in (first, second):
        if not p.exists():
            raise PairingError(f"{p} does not exist")
    if first.is_dir() and not (first / "task.toml").is_file():
        if not second.is_dir():
            raise PairingError(f"{first} is a folder of problems: the solutions must be a folder too")
        return pair_folders(first, second)
    if second.is_dir():
        raise PairingError(f"{second} is a folder: a single problem takes a single solution file")
    return [Pair(first, second, second.stem)]


def _unique(name: str, pairs: list[Pair]) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    taken = {p.name for p in pairs}
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    return out
