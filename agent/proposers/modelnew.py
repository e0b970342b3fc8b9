"""KernelBench's own answer format in the agent loop (``model.answer_format = "modelnew"``): the prompts that ask
for a ``ModelNew`` module (``prompts/system_modelnew.j2``, ``prompts/modelnew.j2``) paired with the parser of the
answer. The answer is one fenced Python block defining ``class ModelNew``; it is parsed on the host
(``sandbox.pytorch.modelnew``: ``ast`` only, never executed here) and becomes the candidate the sandbox judges.
Only a task imported from PyTorch can take it.
"""

from __future__ import annotations

from sandbox.pytorch.modelnew import ModelNewError, ModelNewSolution, is_modelnew, parse_modelnew
from sandbox.tasks.task import Task

from . import prompts
from .answer import NOTE_CHARS, FormatError, fenced_blocks
from ..protocols import Entry, ProposalRequest

PYTHON_TAGS = ("python", "py", "python3", "")


def messages(request: ProposalRequest, edits: bool = False) -> list[dict]:
    """The system and user messages; ``edits`` is ignored: a ModelNew answer is always the whole file."""
    ctx = prompts.context(request)
    lines = {e.id: verdict_lines(e) for e in (*request.parents, request.best, *request.recent_failures) if e}
    for view in (ctx["parent"], ctx["best"], *ctx["failures"]):
        if view is not None:
            view["verdicts"] = lines.get(view["id"], [])
    return [{"role": "system", "content": prompts.render("system_modelnew", **ctx)},
            {"role": "user", "content": prompts.render("modelnew", **ctx)}]


def verdict_lines(entry: Entry) -> list[str]:
    """The format's own checks (``Result.verdicts``), those that decided something."""
    return [f"{v.check}: {v.outcome}: {v.line}" for v in entry.result.verdicts if v.outcome != "not run"]


def format_error(problem: str, reason: str, edits: bool = False) -> str:
    return prompts.render("format_error_modelnew", problem=problem, reason=reason)


def parse_answer(text: str, task: Task, label: str = "candidate", parent=None) -> tuple[ModelNewSolution, str]:
    """The solution in the answer's one Python block and the note around it, or FormatError naming what to fix
    (``parent`` is not read: edits against it are not offered in this format)."""
    if not text.strip():
        raise FormatError("the answer was empty.", "empty")
    blocks = fenced_blocks(text)
    if not blocks:
        if "```" in text or "~~~" in text:
            raise FormatError("the code block is opened with ``` but never closed.", "unclosed")
        raise FormatError("the answer has no ```python code block.", "no_code")
    chosen = [b for b in blocks if is_modelnew(b[1])] or [b for b in blocks if b[0] in PYTHON_TAGS]
    if len(chosen) > 1:
        raise FormatError(f"the answer has {len(chosen)} code blocks that could be the solution; send exactly one "
                          "```python block holding the whole file.", "several")
    if not chosen:
        tags = ", ".join(sorted({b[0] or "untagged" for b in blocks}))
        raise FormatError(f"the answer's code blocks ({tags}) define no class ModelNew.", "plan")
    _, code, (start, end) = chosen[0]
    try:
        solution = parse_modelnew(code, "the answer", label=label)
    except ModelNewError as exc:
        raise FormatError(f"the file is not a ModelNew solution: {exc}", "plan") from None
    note = (text[:start] + text[end:]).strip()
    return solution, note[:NOTE_CHARS]
