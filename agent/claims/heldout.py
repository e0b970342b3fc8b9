"""Generalization: before a winner is declared, re-check and re-time it at the task's held-out sizes.

``heldout_table(sandbox, task, baseline_candidate, best_candidate)`` evaluates the winner at each
size of ``task.spec.sizes.heldout``; the sandbox re-checks correctness there and times the winner
A/B against the task's baseline, so ``Result.timing.speedup['baseline']`` is the interval. When
``baseline_candidate`` is not the task's own baseline (e.g. the start of a model-driven run), it is
evaluated at each size too and the winner is compared with it: intervals that do not overlap decide.

A row is flagged when the winner is not correct there (any status but ok), or when it is slower:
its interval lies entirely below 1.0 (or entirely below the start's interval).
"""

from __future__ import annotations

from sandbox.candidate import Candidate, load_candidate
from sandbox.result import Result, Status
from sandbox.task import Task, describe_sizes

from ..trace.records import HeldoutRow


def heldout_table(sandbox, task: Task, baseline_candidate: Candidate | None, best_candidate: Candidate) -> list[HeldoutRow]:
    """``baseline_candidate`` is None for a task without a CUDA baseline (the winner is timed against PyTorch)."""
    distinct = baseline_candidate is not None and baseline_candidate.key != load_candidate(task.baseline_path).key
    rows = []
    for sizes in task.spec.sizes.heldout:
        result = sandbox.evaluate(task, best_candidate, sizes=sizes)
        start = sandbox.evaluate(task, baseline_candidate, sizes=sizes) if distinct else None
        rows.append(_row(sizes, result, start))
    return rows


def _row(sizes: dict[str, int], result: Result, start: Result | None) -> HeldoutRow:
    row = HeldoutRow(sizes=dict(sizes), status=result.status.value, error=result.error,
                     measured_on=(result.env.get("measured_on") or {}).get("id"))
    if result.status is Status.compiled:
        row.reason = "not run: the sandbox only compiles"
        return row
    if not result.ok:
        row.flagged, row.reason = True, f"the winner is {result.status.value} at this size"
        return row
    t = result.timing
    row.speedup, row.vendor_speedup = result.speedup("baseline"), result.speedup("vendor") or result.speedup("compile")
    if t is not None:
        row.against = t.primary
        row.winner_ms = t.impls["candidate"].median_ms if "candidate" in t.impls else None
        row.baseline_ms = t.impls["baseline"].median_ms if "baseline" in t.impls else None
    if start is not None:
        row.start_speedup = start.speedup("baseline")
    s, s0 = row.speedup, row.start_speedup
    if s is None:
        row.reason = "not timed"
    elif s.high < 1.0:
        row.flagged, row.reason = True, "slower than the baseline (interval below 1.0)"
    elif s0 is not None and s.high < s0.low:
        row.flagged, row.reason = True, "slower than the start configuration (intervals do not overlap)"
    return row


def any_flagged(rows: list[HeldoutRow]) -> bool:
    return any(r.flagged for r in rows)


def regression_note(rows: list[HeldoutRow] | None) -> str:
    """The held-out sizes where the winner is wrong or slower, for the headline next to its speedup; empty when
    there are none."""
    flagged = [r for r in rows or [] if r.flagged]
    if not flagged:
        return ""
    parts = []
    for r in flagged:
        where = describe_sizes(r.sizes)
        parts.append(f"{r.speedup.value:.3f}x at {where}" if r.speedup else f"{r.status} at {where}")
    return f"REGRESSES at {len(flagged)} of {len(rows)} held-out sizes: " + "; ".join(parts)


def format_heldout(rows: list[HeldoutRow]) -> str:
    """A plain-text table: one line per held-out size."""
    if not rows:
        return "held-out sizes: none declared by the task"
    against = next((r.against for r in rows if r.measured), "baseline")
    lines = [f"held-out sizes (winner re-checked and timed A/B against {'PyTorch eager' if against == 'eager' else 'the baseline'}):"]
    for r in rows:
        where = describe_sizes(r.sizes)
        if r.speedup is not None:
            s = r.speedup
            text = f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}] vs {r.against}"
            if r.vendor_speedup is not None:
                v = r.vendor_speedup
                text += f", {v.value:.3f}x [{v.low:.3f}, {v.high:.3f}] vs {'compile' if r.against == 'eager' else 'vendor'}"
            if r.start_speedup is not None:
                s0 = r.start_speedup
                text += f" (start: {s0.value:.3f}x [{s0.low:.3f}, {s0.high:.3f}])"
        else:
            text = r.status + (f": {r.error}" if r.error else "")
        flag = f"  <-- FLAGGED: {r.reason}" if r.flagged else (f"  ({r.reason})" if r.reason else "")
        lines.append(f"  {where}: {text}{flag}")
    return "\n".join(lines)
