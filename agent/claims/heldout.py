"""Generalization: before a winner is declared, re-check and re-time it at the task's held-out sizes.

``heldout_table(sandbox, task, baseline_candidate, best_candidate)`` evaluates the winner at each
size of ``task.spec.sizes.heldout``; the sandbox re-checks correctness there and times the winner
A/B against the task's baseline, so ``Result.timing.speedup['baseline']`` is the interval. When
``baseline_candidate`` is not the task's own baseline (e.g. the start of a model-driven run), it is
evaluated at each size too and the winner is compared with it: intervals that do not overlap decide.

A row is flagged when the winner is not correct there (any status but ok), or when it is slower:
its interval lies entirely below 1.0 (or entirely below the start's interval). A wrong row disqualifies a leader;
a slower one only a leader that claimed to be faster (``disqualifies``). A leader is checked size after size and
set aside at the first size that disqualifies it: the sizes not yet evaluated are not (the claim cannot be its).
The sizes that set a leader aside are evaluated first for the next one: leaders of one run tend to fail at the same
size, so one that will fail is set aside after one evaluation, and one that passes is evaluated at every size anyway.

``heldout_winner`` makes the claim: the winner is the best entry that passes every held-out size. A leader
that fails one is set aside (``MemoryLineage.set_aside``) and named beside the winner, and the next best is
re-checked, up to ``TRIES`` candidates; the summary, ``best.cu``, the report and every export follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from sandbox.candidates.candidate import Candidate, load_candidate
from sandbox.judging.result import Result, Status
from sandbox.tasks.task import Task, describe_sizes

from ..trace.records import FlaggedWinner, HeldoutRow

TRIES = 3   # leaders re-checked at the held-out sizes before the claim stops looking


@dataclass
class HeldoutClaim:
    """The outcome of ``heldout_winner``: the winner's rows, the leaders set aside, and a note where the search
    stopped without a winner."""

    rows: list[HeldoutRow] | None = None
    flagged: list[FlaggedWinner] = field(default_factory=list)
    note: str = ""


def heldout_winner(sandbox, task: Task, lineage, after_set_aside: Callable[[], None] | None = None,
                   tries: int = TRIES) -> HeldoutClaim:
    """Re-check the best entry at the held-out sizes; where it fails one (wrong, or slower), set it aside and
    re-check the next best, up to ``tries`` leaders. ``after_set_aside`` runs each time one is set aside (the
    session sanitizes the new leader there). When every leader tried fails, the remaining untried entries are
    set aside too: no winner is claimed that was not re-checked, and the note says so."""
    base = lineage.baseline()
    claim = HeldoutClaim()
    failed_at: list[dict[str, int]] = []   # the sizes that set a leader aside, the latest first
    for _ in range(tries):
        best = lineage.best()
        if best is None or best is base:
            return claim
        claimed = best.result.speedup("baseline")
        rows = heldout_table(sandbox, task, base.candidate if base else None, best.candidate,
                             until=lambda rows: disqualifies(rows, claimed), first=failed_at)
        if not disqualifies(rows, claimed):
            claim.rows = rows
            return claim
        failed = next(r.sizes for r in rows if disqualifies([r], claimed))   # the last evaluated: the one it stopped at
        failed_at[:] = [failed] + [s for s in failed_at if s != failed]
        claim.flagged.append(FlaggedWinner(id=best.id, speedup=claimed, rows=rows,
                                           note=regression_note(rows, of=len(task.spec.sizes.heldout))))
        lineage.set_aside(best.id)
        if after_set_aside is not None:
            after_set_aside()
    best = lineage.best()
    if best is not None and best is not base:
        untried = [e.id for e in lineage.ranked() if e is not base]
        for entry_id in untried:
            lineage.set_aside(entry_id)
        claim.note = (f"held-out sizes: no winner claimed; the {tries} leaders re-checked all failed a held-out size, "
                      f"and {len(untried)} other candidates that beat the baseline were not re-checked")
    return claim


def set_aside_note(flagged: list[FlaggedWinner]) -> str:
    """One line naming the leaders that failed a held-out size, for the headline beside the winner."""
    parts = []
    for f in flagged:
        s = f.speedup
        fast = f" at {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s else ""
        parts.append(f"{f.id} led{fast} but {f.note.replace('REGRESSES', 'regresses', 1)}")
    return ("set aside: " + "; ".join(parts)) if parts else ""


def heldout_table(sandbox, task: Task, baseline_candidate: Candidate | None, best_candidate: Candidate,
                  until: Callable[[list[HeldoutRow]], bool] | None = None,
                  first: list[dict[str, int]] = ()) -> list[HeldoutRow]:
    """A row per held-out size, in the task's order. The sizes are evaluated in that order, but those in ``first``
    before the rest (in ``first``'s order); with ``until``, evaluation stops after the first row it holds for (the
    sizes left are not evaluated, and have no row). ``baseline_candidate`` is None for a task without a CUDA baseline
    (the winner is timed against PyTorch)."""
    distinct = baseline_candidate is not None and baseline_candidate.key != load_candidate(task.baseline_path).key
    heldout = task.spec.sizes.heldout
    ahead = [s for s in first if s in heldout]
    rows = []
    for sizes in ahead + [s for s in heldout if s not in ahead]:
        result = sandbox.evaluate(task, best_candidate, sizes=sizes)
        start = sandbox.evaluate(task, baseline_candidate, sizes=sizes) if distinct else None
        rows.append(_row(sizes, result, start))
        if until is not None and until(rows):
            break
    return sorted(rows, key=lambda r: heldout.index(r.sizes))


def _row(sizes: dict[str, int], result: Result, start: Result | None) -> HeldoutRow:
    row = HeldoutRow(sizes=dict(sizes), status=result.status.value, error=result.error,
                     measured_on=result.env.measured_by())
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


def disqualifies(rows: list[HeldoutRow], claimed) -> bool:
    """Whether the held-out rows take the lead from an entry whose speedup at the task's own size is ``claimed``:
    a size where it is not correct always; a size where it is slower only when its own interval cleared 1.0 (a
    leader that was never faster claims no speed that a slower held-out size could contradict)."""
    faster = claimed is not None and claimed.low > 1.0
    return any(r.flagged and (r.status != "ok" or faster) for r in rows)


def any_flagged(rows: list[HeldoutRow]) -> bool:
    return any(r.flagged for r in rows)


def regression_note(rows: list[HeldoutRow] | None, of: int | None = None) -> str:
    """The held-out sizes where the winner is wrong or slower, for the headline next to its speedup; empty when
    there are none. ``of``: the task's count of held-out sizes, where a leader set aside was not checked at all."""
    flagged = [r for r in rows or [] if r.flagged]
    if not flagged:
        return ""
    parts = []
    for r in flagged:
        where = describe_sizes(r.sizes)
        parts.append(f"{r.speedup.value:.3f}x at {where}" if r.speedup else f"{r.status} at {where}")
    total = max(of or 0, len(rows))
    unchecked = f" ({total - len(rows)} not checked: it was set aside before them)" if total > len(rows) else ""
    return f"REGRESSES at {len(flagged)} of {total} held-out sizes{unchecked}: " + "; ".join(parts)


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
