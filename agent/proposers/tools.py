"""The tools of a tool-calling session (``[model] tools = true``), backed by the run's sandbox.

The model reads the task, the GPU and the lineage; compiles, checks, times and profiles a candidate of its own
(a whole file, or SEARCH/REPLACE edits against the parent); and submits one, which then enters the lineage and is
evaluated in full like any answer: what the model measured with the tools never stands in for that evaluation.
Each call returns JSON for the model and a ``ToolCall`` record for the trace, with the GPU-seconds it spent.
Expected failures (a file that does not parse, a compile error, a wrong result) are results the model reads.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from . import prompts
from .answer import FormatError, parse_answer
from ..protocols import ProposalRequest

_SOURCE = {"type": "object", "properties": {"answer": {
    "type": "string", "description": "The candidate: the whole file in a ```cuda block, or SEARCH/REPLACE edit blocks "
                                     "against the parent."}}, "required": ["answer"]}
_NONE = {"type": "object", "properties": {}}
SPECS = [
    ("read_task", "The task: inputs, outputs, sizes, tolerance, roofline counts, the GPU and its ceilings.", _NONE),
    ("read_lineage", "Every candidate so far: id, origin, parents, status, speedup, note.", _NONE),
    ("read_candidate", "One candidate's source and full result.",
     {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
    ("compile", "Compile a candidate: status, registers, spills, shared memory, warnings, the compiler log.", _SOURCE),
    ("check", "Compile and run a candidate at every check size against the reference: the first mismatch.", _SOURCE),
    ("time", "Check and time a candidate against the baseline: its speedup with a 95% interval.", _SOURCE),
    ("profile", "Nsight Compute's diagnosis of a candidate (where the sandbox has a profiler).", _SOURCE),
    ("submit", "Submit the final candidate: it enters the lineage and is evaluated in full. Ends the session.", _SOURCE),
]
TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": p}} for n, d, p in SPECS]


@dataclass
class ToolCall:
    """One tool call and what came of it, as the trace keeps it."""

    name: str
    arguments: dict
    result: str
    status: str            # ok, or why the call gave nothing: bad_arguments, unparsable, unknown_tool, error, limit
    gpu_s: float = 0.0
    seconds: float = 0.0
    turn: int = 0          # the model call (0-based) that asked for it


@dataclass
class ToolBox:
    sandbox: Any
    request: ProposalRequest
    edits: bool
    calls: list[ToolCall] = field(default_factory=list)

    def run(self, name: str, raw_arguments: str) -> ToolCall:
        t0 = time.perf_counter()
        try:
            arguments = json.loads(raw_arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("the arguments are not a JSON object")
        except ValueError as exc:
            call = ToolCall(name, {"raw": raw_arguments[:2000]}, json.dumps({"error": f"bad arguments: {exc}"}),
                            "bad_arguments")
        else:
            call = self._dispatch(name, arguments)
        call.seconds = round(time.perf_counter() - t0, 3)
        self.calls.append(call)
        return call

    def candidate(self, arguments: dict):
        parent = self.request.parents[0].candidate if self.request.parents and self.edits else None
        return parse_answer(str(arguments.get("answer", "")), self.request.task, parent=parent)

    def _dispatch(self, name: str, arguments: dict) -> ToolCall:
        req = self.request
        if name == "read_task":
            ctx = prompts.context(req)
            return _ok(name, arguments, {"task": ctx["task"], "gpu": ctx["gpu"]})
        if name == "read_lineage":
            rows = [{k: v for k, v in prompts.entry_view(e, short=True).items() if k in (
                "id", "origin", "parents", "status", "speedup_text", "note", "error")} for e in _entries(req)]
            return _ok(name, arguments, {"parent": req.parents[0].id if req.parents else None, "candidates": rows})
        if name == "read_candidate":
            entry = next((e for e in _entries(req) if e.id == arguments.get("id")), None)
            if entry is None:
                return ToolCall(name, arguments, json.dumps({"error": f"no candidate {arguments.get('id')!r}"}),
                                "bad_arguments")
            return _ok(name, arguments, prompts.entry_view(entry))
        if name not in ("compile", "check", "time", "profile", "submit"):
            return ToolCall(name, arguments, json.dumps({"error": f"no tool named {name!r}"}), "unknown_tool")
        try:
            candidate, _ = self.candidate(arguments)
        except FormatError as exc:
            return ToolCall(name, arguments, json.dumps({"error": f"the candidate cannot be used: {exc.problem}"}),
                            "unparsable")
        if name == "submit":
            return _ok(name, arguments, {"submitted": True})
        return self._measure(name, arguments, candidate)

    def _measure(self, name: str, arguments: dict, candidate) -> ToolCall:
        task = self.request.task
        try:
            if name == "compile":
                result = self.sandbox.compile(task, candidate)
            elif name == "profile":
                profile = self.sandbox.profile(task, candidate)
                return _ok(name, arguments, {"status": profile.status, "diagnosis": profile.diagnosis,
                                             "reason": profile.reason}, profile.seconds)
            else:
                result = self.sandbox.evaluate(task, candidate, timing=name == "time")
        except Exception as exc:  # the sandbox refused this candidate: the model reads why
            return ToolCall(name, arguments, json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}), "error")
        view = prompts.entry_view(_as_entry(self.request, candidate, result), short=False)
        keep = ("status", "error", "detail", "resources", "warnings") + (
            ("checks",) if name != "compile" else ()) + (("timing", "speedup_text") if name == "time" else ())
        cost = result.cost
        return _ok(name, arguments, {k: view[k] for k in keep},
                   cost.check_gpu_s + cost.time_gpu_s + cost.profile_gpu_s)


def _ok(name: str, arguments: dict, data: dict, gpu_s: float = 0.0) -> ToolCall:
    return ToolCall(name, arguments, json.dumps(data, default=str), "ok", round(gpu_s, 6))


def _entries(req: ProposalRequest) -> list:
    seen, out = set(), []
    for e in [req.baseline, req.best, *req.parents, *(i.entry for i in req.inspirations), *req.recent_failures]:
        if e is not None and e.id not in seen:
            seen.add(e.id)
            out.append(e)
    return out


def _as_entry(req: ProposalRequest, candidate, result):
    from ..protocols import Entry

    return Entry("trial", candidate, result, [p.id for p in req.parents[:1]], "tool", req.iteration)

