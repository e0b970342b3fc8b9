"""SEARCH/REPLACE edits against the parent: the second answer form the prompts accept, and its parser.

An answer in this form holds one or more blocks::

    <<<<<<< SEARCH
    lines copied exactly from the parent, as the prompt shows it
    =======
    the lines that replace them
    >>>>>>> REPLACE

They are applied in order, each to the text the previous ones left, and each SEARCH text must occur exactly
once. Nothing is guessed: whitespace counts, and a block that does not match refuses the whole answer with an
``EditError`` naming the block, the closest lines of the parent and the first line that differs.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_SEARCH = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*$")
_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_REPLACE = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE[ \t]*$")
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[\w+#.-]*[ \t]*$")
SHOWN_LINES = 8


class EditError(ValueError):
    """Edits that cannot be applied; the message names the block and what to send instead."""


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str
    line: int      # where the block starts in the answer, counted from 1


def has_edits(text: str) -> bool:
    return any(_SEARCH.match(line) for line in text.splitlines())


def parse_edits(text: str) -> tuple[list[Edit], str]:
    """The answer's blocks and its note (the text outside blocks and code fences), or EditError."""
    lines = text.splitlines()
    edits: list[Edit] = []
    note: list[str] = []
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            if not _FENCE_LINE.match(lines[i]):
                note.append(lines[i])
            i += 1
            continue
        start, n = i + 1, len(edits) + 1
        divider = next((j for j in range(start, len(lines)) if _DIVIDER.match(lines[j]) or _SEARCH.match(lines[j])), None)
        if divider is None or _SEARCH.match(lines[divider]):
            raise EditError(f"edit block {n} (answer line {start}) has no ======= line after its SEARCH text.")
        end = next((j for j in range(divider + 1, len(lines)) if _REPLACE.match(lines[j]) or _SEARCH.match(lines[j])), None)
        if end is None or _SEARCH.match(lines[end]):
            raise EditError(f"edit block {n} (answer line {start}) is not closed by a >>>>>>> REPLACE line.")
        edits.append(Edit(_text(lines[start:divider]), _text(lines[divider + 1:end]), start))
        i = end + 1
    return edits, "\n".join(note).strip()


def apply_edits(source: str, edits: list[Edit]) -> str:
    """``source`` with every edit applied in order, or EditError naming the first block that does not apply."""
    text = source if source.endswith("\n") else source + "\n"
    for n, edit in enumerate(edits, 1):
        where = f"edit block {n} of {len(edits)} (answer line {edit.line})"
        if not edit.search.strip():
            raise EditError(f"{where} has an empty SEARCH text: copy the lines to replace from the parent.")
        found = text.count(edit.search)
        if found > 1:
            raise EditError(f"{where}: its SEARCH text occurs {found} times in the parent; add lines around it so "
                            "that it matches one place only.")
        if found == 0:
            raise EditError(f"{where} did not match: its SEARCH text is not in the parent exactly as written "
                            f"(every character and space counts). {_nearest(text, edit.search)}")
        text = text.replace(edit.search, edit.replace, 1)
    return text


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _nearest(source: str, search: str) -> str:
    """The parent's lines most like ``search`` and the first line where they differ."""
    have, want = source.splitlines(), search.splitlines()
    size = max(1, min(len(want), len(have)))
    best, best_ratio = 0, -1.0
    for start in range(0, len(have) - size + 1):
        ratio = difflib.SequenceMatcher(None, "\n".join(have[start:start + size]), "\n".join(want), autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    window = have[best:best + size]
    first = next((k for k, (a, b) in enumerate(zip(window, want)) if a != b), min(len(window), len(want)))
    shown = "\n".join(window[:SHOWN_LINES]) + (f"\n... [{len(window) - SHOWN_LINES} more lines]"
                                               if len(window) > SHOWN_LINES else "")
    differs = ""
    if first < len(want):
        theirs = window[first] if first < len(window) else "(nothing)"
        differs = (f" The first difference is the SEARCH text's line {first + 1}: {want[first]!r}, where the parent "
                   f"has {theirs!r}.")
    return (f"The closest lines of the parent are lines {best + 1}-{best + len(window)} "
            f"({best_ratio:.0%} alike):\n{shown}\n{differs.strip()}").rstrip()
