"""Parsing a model's answer into a candidate: the parser paired with the answer format the prompts ask for.

The answer must hold one fenced code block (```cuda) with the whole candidate file: the
``/*@kernelwright ... @*/`` plan and the device code. Text outside the block is kept as the note.
Blocks tagged otherwise (cpp, c++, cu, none) are accepted when exactly one of them holds a plan.
Where the request has a parent, the answer may instead hold SEARCH/REPLACE edits against the parent's file
(``agent.proposers.edits``): they are applied exactly, or the answer is refused naming the block that did not match.
Everything wrong is a ``FormatError`` whose message tells the model what was missing and what to send.
"""

from __future__ import annotations

import re

from sandbox.candidates.candidate import PLAN_OPEN, Candidate, CandidateError, parse_candidate, validate_for_task
from sandbox.tasks.task import Task

from .edits import EditError, apply_edits, has_edits, parse_edits

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)", re.M)
_THINK = re.compile(r"<think>(.*?)(</think>|$)", re.S)
NOTE_CHARS = 2000


class FormatError(Exception):
    """An unusable answer. ``reason`` is one of no_code, several, unclosed, plan, empty, truncated, edit."""

    def __init__(self, problem: str, reason: str):
        super().__init__(problem)
        self.problem = problem
        self.reason = reason


def split_reasoning(content: str) -> tuple[str, str]:
    """Servers that inline reasoning send ``<think>...</think>`` before the answer: (answer, reasoning)."""
    found = _THINK.findall(content)
    if not found:
        return content, ""
    return _THINK.sub("", content).strip(), "\n".join(f[0].strip() for f in found)


def extract(text: str) -> tuple[str, str]:
    """(code, note) from an answer, or FormatError."""
    if not text.strip():
        raise FormatError("the answer was empty.", "empty")
    blocks = [(m.group(2).lower(), m.group(3), m.span()) for m in _FENCE.finditer(text)]
    if not blocks:
        if _OPEN_FENCE.search(text):
            raise FormatError("the code block is opened with ``` but never closed.", "unclosed")
        if PLAN_OPEN in text:
            raise FormatError("the code is not inside a fenced block: put the whole file between ```cuda and ```.",
                              "no_code")
        raise FormatError("the answer has no ```cuda code block.", "no_code")
    with_plan = [b for b in blocks if PLAN_OPEN in b[1]]
    cuda = [b for b in blocks if b[0] in ("cuda", "cu")]
    chosen = with_plan if with_plan else cuda
    if len(chosen) > 1:
        raise FormatError(f"the answer has {len(chosen)} code blocks that could be the candidate; "
                          "send exactly one ```cuda block holding the whole file.", "several")
    if not chosen:
        tags = ", ".join(sorted({b[0] or "untagged" for b in blocks}))
        raise FormatError(f"the answer's code blocks ({tags}) hold no launch plan: the file must start with "
                          f"the {PLAN_OPEN} ... @*/ plan.", "plan")
    _, code, (start, end) = chosen[0]
    note = (text[:start] + text[end:]).strip()
    return code, note[:NOTE_CHARS]


def parse_answer(text: str, task: Task, label: str = "candidate",
                 parent: Candidate | None = None) -> tuple[Candidate, str]:
    """A validated candidate and the note around it, or FormatError naming what to fix. With a ``parent``, an
    answer of SEARCH/REPLACE edits is applied to the parent's file (``parent.render()``, as the prompt shows it)."""
    edited = has_edits(text)
    if edited:
        code, note = apply_answer_edits(text, parent)
    else:
        code, note = extract(text)
    try:
        candidate = parse_candidate(code, label=label)
        validate_for_task(candidate, task)
    except CandidateError as exc:
        what = "after the edits, the candidate file" if edited else "the candidate file"
        raise FormatError(f"{what} is malformed: {exc}", "plan") from None
    return candidate, note


def apply_answer_edits(text: str, parent: Candidate | None) -> tuple[str, str]:
    """(the edited file, the note) of an answer made of SEARCH/REPLACE blocks, or FormatError."""
    if parent is None:
        raise FormatError("SEARCH/REPLACE edits are not accepted for this request (there is no parent file to edit, "
                          "or the run takes whole files only): send the whole file in one ```cuda block.", "edit")
    try:
        edits, note = parse_edits(text)
        return apply_edits(parent.render(), edits), note[:NOTE_CHARS]
    except EditError as exc:
        raise FormatError(str(exc), "edit") from None
