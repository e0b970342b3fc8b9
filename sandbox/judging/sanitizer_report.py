"""compute-sanitizer's verdict on a candidate: the records, and the reading of the tool's text output.

``SanitizeReport`` is what ``sandbox.sanitize(task, candidate)`` returns and ``Result.sanitize`` holds:
an overall ``status`` (``clean``, ``errors``, ``failed``: the run gave no verdict, ``unavailable``:
no GPU or no compute-sanitizer, ``skipped``: the candidate does not compile or launch), the sizes
it ran at, and one ``ToolVerdict`` per tool. ``verdict`` joins two independent witnesses: the tool's
summary and the target program's own status file (a target that died early can leave a summary of
zero errors behind).

compute-sanitizer prefixes every line it prints with ``=========``. A report opens with a headline
(one space after the prefix) followed by indented lines; a bare prefix ends it::

    ========= Invalid __global__ write of size 4 bytes
    =========     at k+0x1a0 in candidate.cu:12
    =========     by thread (63,0,0) in block (3,0,0)
    =========     Access at 0x7f1c0000fe00 is out of bounds
    =========
    ========= ERROR SUMMARY: 1 error

racecheck's reports are ``Error: Race reported between Write access at k+0x140 in candidate.cu:12``
(or ``Warning: ...``), and its summary is ``RACECHECK SUMMARY: 1 hazard displayed (1 error,
0 warnings)``. Lines the target program prints itself carry no prefix and are ignored. A run whose
output has no summary line did not finish as the tool intended: the parse says so rather than
calling it clean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PREFIX = "========="
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
DEFAULT_TOOLS = ("memcheck", "racecheck")
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_AT = re.compile(r"\bat (?!0x[0-9a-fA-F]+ in )(.+?)\+0x[0-9a-fA-F]+(?: in (\S+))?")  # at k+0x1b0 in candidate.cu:12
_AT_OFFSET = re.compile(r"\bat 0x[0-9a-fA-F]+ in (.+?)(?: \[\d+ hazards?\])?$")  # older: at 0x1b0 in [FILE:LINE:]k
_FILE_LINE = re.compile(r"^(\S+?:\d+):(.+)$")
_NOT_REPORTS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Target application returned",
                "Process ID", "This version of")
_NOISE = ("Saved host backtrace", "Host Frame", "Device Frame")


@dataclass
class ToolOutput:
    """What one tool's run says: ``errors`` is None when no summary line was printed."""

    tool: str
    errors: int | None
    warnings: int = 0
    reports: list[list[str]] = field(default_factory=list)  # each: headline, then its indented lines

    @property
    def first_error(self) -> str:
        report = next((r for r in self.reports if not r[0].lower().startswith("warning")), None)
        return "\n".join(report[:4]) if report else ""

    @property
    def kernel(self) -> str | None:
        """The kernel named by the first error, if any."""
        return self._where()[0]

    @property
    def location(self) -> str | None:
        """``file:line`` of the first error where the cubin carries line information."""
        return self._where()[1]

    def _where(self) -> tuple[str | None, str | None]:
        report = next((r for r in self.reports if not r[0].lower().startswith("warning")), None)
        for line in report or []:
            found = where(line)
            if found:
                return found
        return None, None


def where(line: str) -> tuple[str, str | None] | None:
    """(kernel, ``file:line`` or None) from a report line that says where: ``at k+0x1b0 in candidate.cu:12``, or
    in older tools' words ``at 0x1b0 in candidate.cu:12:k`` and ``at 0x1b0 in k``; None for other lines."""
    m = _AT.search(line)
    if m:
        return m.group(1).strip(), m.group(2)
    m = _AT_OFFSET.search(line)
    if not m:
        return None
    rest = m.group(1).strip()
    f = _FILE_LINE.match(rest)
    return (f.group(2).strip(), f.group(1)) if f else (rest, None)


def parse(tool: str, output: str) -> ToolOutput:
    """Parse the output of ``compute-sanitizer --tool TOOL``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r} (known: {', '.join(TOOLS)})")
    reports: list[list[str]] = []
    current: list[str] | None = None
    errors: int | None = None
    warnings = 0
    for raw in output.splitlines():
        if not raw.startswith(PREFIX):
            continue
        body = raw[len(PREFIX):].rstrip()
        if not body.strip():
            current = None
            continue
        if m := _RACE_SUMMARY.search(body):
            errors, warnings = (errors or 0) + int(m.group(2)), warnings + int(m.group(3))
        elif tool != "racecheck" and (m := _ERROR_SUMMARY.search(body)) and "not printed" not in body:
            errors = (errors or 0) + int(m.group(1))
        headline = not body.startswith("  ")
        text = body.strip()
        if headline:
            current = None if text.startswith(_NOT_REPORTS) else [text]
            if current is not None:
                reports.append(current)
        elif current is not None and not text.startswith(_NOISE):
            current.append(text)
    return ToolOutput(tool, errors, warnings, reports)


class ToolVerdict(BaseModel):
    """One tool's run: ``clean``, ``errors`` (``errors`` counts them) or ``failed`` (``reason`` says why)."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    status: Literal["clean", "errors", "failed"]
    errors: int | None = None
    warnings: int = 0
    first_error: str = ""
    kernel: str | None = None
    location: str | None = None
    reason: str = ""
    seconds: float = 0.0
    program_s: dict[str, float] = Field(default_factory=dict)   # the target program's parts (its ``split_s``)

    def line(self) -> str:
        if self.status == "clean":
            return f"{self.tool}: clean" + (f" ({self.warnings} warnings)" if self.warnings else "")
        if self.status == "failed":
            return f"{self.tool}: no verdict ({self.reason})"
        where = " at ".join(x for x in (self.kernel, self.location) if x)
        head = self.first_error.splitlines()[0] if self.first_error else "error"
        return f"{self.tool}: {self.errors} error{'s' if self.errors != 1 else ''}" + (f" in {where}" if where else "") + f": {head}"


class SanitizeReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["clean", "errors", "failed", "unavailable", "skipped"]
    reason: str = ""
    sizes: list[dict[str, int]] = Field(default_factory=list)
    tools: list[ToolVerdict] = Field(default_factory=list)
    tool_version: str | None = None
    simulated: bool = False
    wall_s: float = 0.0   # the tools ran side by side: from the first start to the last end (0: not recorded)

    @property
    def seconds(self) -> float:
        """The tools' seconds added up (each its own process's wall)."""
        return sum(t.seconds for t in self.tools)

    @property
    def held_s(self) -> float:
        """How long the sanitizer held the GPU: the wall where recorded, else the tools' seconds added up."""
        return self.wall_s or self.seconds

    def text(self) -> str:
        """One line for summaries, notes and terminals."""
        sim = " (simulated)" if self.simulated else ""
        if self.status in ("unavailable", "skipped"):
            return f"not sanitized ({self.reason})"
        return "; ".join(t.line() for t in self.tools) + sim


def overall(tools: list[ToolVerdict]) -> str:
    if any(t.status == "errors" for t in tools):
        return "errors"
    return "failed" if any(t.status == "failed" for t in tools) else "clean"


def verdict(tool: str, code: int | None, output: str, target, seconds: float, limit_s: float) -> ToolVerdict:
    """Join the tool's output (``code`` None: killed at ``limit_s``) with how the target said its request ended
    (``target``: a ``sandbox.wire.TargetRan``, None where it wrote none)."""
    out = parse(tool, output)
    base = dict(tool=tool, errors=out.errors, warnings=out.warnings, seconds=seconds,
                program_s=dict(target.split_s) if target is not None else {})
    if out.errors:
        return ToolVerdict(status="errors", first_error=out.first_error, kernel=out.kernel, location=out.location, **base)
    if code is None:
        return ToolVerdict(status="failed", reason=f"passed its {limit_s:.0f} s limit and was killed", **base)
    if target is None or target.status != "ran":
        said = f"{target.status}: {target.error}" if target is not None else "wrote no status"
        return ToolVerdict(status="failed", reason=f"the target program ended with {said}"[:500], **base)
    if out.errors is None:
        first = out.reports[0][0] if out.reports else f"exit code {code}"
        return ToolVerdict(status="failed", reason=f"compute-sanitizer printed no summary ({first})"[:500], **base)
    return ToolVerdict(status="clean", **base)
