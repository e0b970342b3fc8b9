"""Rendering the prompts in ``prompts/`` (Jinja2, undefined variables are errors).

``messages(request)`` picks the message kind from the parent's state (first attempt, next iteration,
repair after a compile error, repair after a failed run) and renders it with ``context(request)``: flat
dicts built from the task, the device, the parent's and best's results, and the recent failures.
No prompt text lives here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from sandbox.candidates import candidate as cand_mod
from sandbox.candidates import source_filter
from sandbox.candidates.compiler import condense_log
from sandbox.judging.environment import Ceilings
from sandbox.judging.result import Result, Status
from sandbox.tasks.dtypes import DTYPES
from sandbox.tasks.expr import FUNCTIONS
from sandbox.tasks.task import Task, describe_sizes

from ..protocols import Entry, ProposalRequest

DETAIL_LINES, DETAIL_CHARS = 60, 6000
SHORT_DETAIL_LINES = 12
NOTE_CHARS = 600


def prompts_dir() -> Path:
    """prompts/ in a checkout, agent/_prompts in an installed wheel."""
    package = Path(__file__).resolve().parents[1]  # agent/
    for candidate in (package / "_prompts", package.parent / "prompts"):
        if (candidate / "system.j2").is_file():
            return candidate
    raise FileNotFoundError(f"no prompts folder next to {package}")


@lru_cache(maxsize=1)
def environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(prompts_dir())), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)


def render(name: str, **context) -> str:
    text = environment().get_template(f"{name}.j2").render(**context)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def kind(request: ProposalRequest) -> str:
    """Which user message fits: ``first``, ``first_module`` (no kernel yet: the task's PyTorch module),
    ``iterate``, ``repair_compile`` or ``repair_wrong``."""
    if not request.parents:
        return "first_module"
    parent = request.parents[0]
    status = parent.result.status
    if status is Status.compile_error:
        return "repair_compile"
    if status not in (Status.ok, Status.compiled):
        return "repair_wrong"
    if parent.origin == "baseline" and request.best in (None, parent) and not request.recent_failures:
        return "first"
    return "iterate"


def messages(request: ProposalRequest, edits: bool = False) -> list[dict]:
    """The system and user messages of a request; ``edits``: SEARCH/REPLACE edits against the parent are offered
    beside the whole file (only where there is a parent)."""
    ctx = {**context(request), "edits": edits and bool(request.parents)}
    return [{"role": "system", "content": render("system", **ctx)},
            {"role": "user", "content": render(kind(request), **ctx)}]


def format_error(problem: str, reason: str, edits: bool = False) -> str:
    return render("format_error", problem=problem, reason=reason, edits=edits)


# ---- context ---------------------------------------------------------------------------------------


def context(request: ProposalRequest) -> dict:
    parent = request.parents[0] if request.parents else None
    best = request.best
    return {"task": task_view(request.task), "format": format_view(),
            "gpu": gpu_view(request.device, request.extra.get("sandbox", "gpu"), _ceilings(request)),
            "parent": entry_view(parent) if parent else None, "best": entry_view(best) if best else None,
            "best_is_parent": best is not None and parent is not None and best.id == parent.id,
            "failures": [entry_view(f, short=True) for f in request.recent_failures if parent is None or f.id != parent.id],
            "inspirations": [{**entry_view(i.entry, short=True), "why": i.why} for i in request.inspirations
                             if best is None or i.entry.id != best.id]}


def task_view(task: Task) -> dict:
    spec = task.spec

    def tensor(t):
        return {"name": t.name, "dtype": t.dtype, "ctype": DTYPES[t.dtype].ctype, "shape": [str(d) for d in t.shape]}

    return {"name": spec.name, "description": spec.description.strip(), "category": spec.category,
            "inputs": [tensor(t) for t in spec.inputs], "outputs": [tensor(t) for t in spec.outputs],
            "scalars": [{"name": s.name, "dtype": s.dtype, "ctype": DTYPES[s.dtype].ctype, "value": s.value}
                        for s in spec.scalars],
            "symbols": task.symbols,
            "derived": [f"{k} = {v}" for k, v in spec.sizes.derived.items()],
            "constraints": list(spec.sizes.constraints),
            "sizes": {"benchmark": describe_sizes(spec.sizes.benchmark),
                      "check": [describe_sizes(s) for s in spec.sizes.check],
                      "heldout": len(spec.sizes.heldout)},   # how many, never which: they test generalization
            "tolerance": [{"output": o.name, "atol": t.atol, "rtol": t.rtol, "spread": t.spread}
                          for o in spec.outputs for t in [task.output_tolerance(o)]],
            "roofline": {"flops": str(spec.roofline.flops), "bytes": str(spec.roofline.bytes),
                         "compute": spec.roofline.compute},
            "allow_fast_math": spec.allow_fast_math, "torch": torch_view(task)}


def torch_view(task: Task) -> dict | None:
    """A task imported from PyTorch: its module's source, how its parameters reach the kernel, its baselines."""
    t = task.spec.torch
    if t is None:
        return None
    from sandbox.pytorch.problem import problem_at  # reads the source's constants; imports no torch

    constants = problem_at(task.folder / t.problem).values()
    return {"problem": t.problem, "source": (task.folder / t.problem).read_text().strip(), "arguments": t.arguments,
            "parameters": [{"name": n, "key": k} for n, k in t.parameters.items()], "baselines": t.baselines,
            "fixed": [{"name": n, "value": constants.get(n, "?")} for n in t.fixed]}


def format_view() -> dict:
    return {"flags": [f"`{p.replace(chr(92), '')}`" for p in cand_mod.FLAG_PATTERNS],
            "includes": [f"`{h}`" for h in source_filter.ALLOWED_INCLUDES],
            "directives": [f"`#{d}`" for d in source_filter.ALLOWED_DIRECTIVES if d != "include"],
            "pragmas": [f"`{p}`" for p in source_filter.ALLOWED_PRAGMAS],
            "functions": [f"`{f}`" for f in FUNCTIONS], "max_launches": cand_mod.MAX_LAUNCHES}


def gpu_view(device: dict, mode: str, ceilings: Ceilings | None) -> dict:
    def kib(key):
        return round(device[key] / 1024) if device.get(key) else None

    view = {"mode": mode, "simulated": bool(device.get("simulated")), "name": device.get("gpu") or "none",
            "arch": device.get("arch") or "unknown", "sms": device.get("sms"),
            "l2_mib": round(device["l2_bytes"] / 2**20) if device.get("l2_bytes") else None,
            "memory_gib": round(device["memory_bytes"] / 2**30) if device.get("memory_bytes") else None,
            "smem_block_kib": kib("shared_per_block_optin"), "smem_sm_kib": kib("shared_per_sm"), "ceilings": None}
    if ceilings and ceilings.copy_bytes_per_s:
        read = ceilings.read_bytes_per_s
        view["ceilings"] = {"bandwidth_tbs": f"{ceilings.copy_bytes_per_s / 1e12:.2f}",
                            "read_tbs": f"{read / 1e12:.2f}" if read else None,
                            "fp32_tflops": f"{(ceilings.fp32_flops or 0) / 1e12:.1f}",
                            "fp16_tflops": f"{(ceilings.fp16_tensor_flops or 0) / 1e12:.1f}"}
    return view


def _ceilings(request: ProposalRequest) -> Ceilings | None:
    for entry in (request.best, request.baseline, *request.parents):
        if entry is not None and entry.result.env.ceilings:
            return entry.result.env.ceilings
    return None


def entry_view(entry: Entry, short: bool = False) -> dict:
    r = entry.result
    speed = r.speedup("baseline")
    return {"id": entry.id, "origin": entry.origin, "parents": entry.parent_ids,
            "note": entry.note[:NOTE_CHARS], "status": r.status.value, "error": r.error,
            "detail": excerpt(condense_log(r.detail) if r.status is Status.compile_error else r.detail,
                              SHORT_DETAIL_LINES if short else DETAIL_LINES),
            "resources": resources_view(r), "checks": checks_view(r), "timing": timing_view(r),
            "warnings": excerpt("\n".join(r.compile.warnings()), SHORT_DETAIL_LINES if short else DETAIL_LINES)
            if r.compile and r.compile.ok else "",
            "simulated": r.env.simulated, "diagnosis": entry.diagnosis,
            "speedup_text": f"{speed.value:.3f}x over the baseline, interval [{speed.low:.3f}, {speed.high:.3f}]"
            if speed else "not timed",
            "source": entry.candidate.render()}


def excerpt(text: str, max_lines: int) -> str:
    lines = text.strip().splitlines()
    out = "\n".join(lines[:max_lines])
    if len(lines) > max_lines:
        out += f"\n... [{len(lines) - max_lines} more lines]"
    if len(out) > DETAIL_CHARS:
        out = out[:DETAIL_CHARS] + f"\n... [{len(out) - DETAIL_CHARS} more characters]"
    return out


def resources_view(r: Result) -> list[dict]:
    if not r.compile or not r.compile.ok:
        return []
    return [{"kernel": k.name, "registers": k.registers, "spill_stores": k.spill_stores, "spill_loads": k.spill_loads,
             "static_shared": k.static_shared} for k in r.compile.kernels.values()]


def checks_view(r: Result) -> dict | None:
    if not r.checks:
        return None
    failed = []
    for c in r.failed_checks()[:3]:
        text = f"{c.label} at {describe_sizes(c.sizes)}, output `{c.output}`: {c.mismatches} mismatches"
        if c.first_mismatch:
            m = c.first_mismatch
            text += f", first at index {m.index}: got {m.got}, expected {m.expected}"
        if c.max_abs_error is not None:
            text += f", max abs error {c.max_abs_error:.3g}"
        if c.max_rel_error is not None:
            text += f", max rel error {c.max_rel_error:.3g}"
        if c.note:
            text += f" ({c.note})"
        failed.append(text)
    return {"passed": sum(c.passed for c in r.checks), "total": len(r.checks), "failed": failed}


def timing_view(r: Result) -> dict | None:
    t = r.timing
    if t is None:
        return None
    impls = [{"name": "this kernel" if name == "candidate" else name, "median_ms": f"{it.median_ms:.4g}", "low_ms": f"{it.ci_ms.low:.4g}",
              "high_ms": f"{it.ci_ms.high:.4g}",
              "pct_of_roofline": f"{it.pct_of_roofline:.1f}" if it.pct_of_roofline is not None else None}
             for name, it in t.impls.items()]
    speedups = [{"name": name, "value": f"{s.value:.3f}", "low": f"{s.low:.3f}", "high": f"{s.high:.3f}",
                 "faster": s.low > 1.0} for name, s in t.speedup.items()]
    return {"size": describe_sizes(t.sizes), "rounds": t.rounds, "impls": impls, "speedups": speedups,
            "roofline_ms": f"{t.roofline_ms:.4g}" if t.roofline_ms else None, "bound": t.bound}
