"""The headline re-timed alone: before the claim is printed, the winner is evaluated once more against its baselines
with nothing else of the sandbox in flight (``Sandbox.evaluate_alone``: the jobs of the run drained, one evaluation on
one GPU). The claim keeps both intervals; its headline is the re-time's, and where the two intervals do not overlap
it says so.

A run whose every session evaluated one candidate at a time with nothing else in flight (``--parallel 1``, no
cluster: ``SessionInfo.concurrent`` False) measured its winner alone already: it is not re-timed, and the claim says
why. Any other run is re-timed: with ``--parallel`` above 1 the next answers' candidates compile beside each
evaluation, on a cluster the other GPUs measure at the same time, and a session that did not record which is counted
as neither. A second, independent measurement also takes the winner's selection out of its figure: the best of many
noisy intervals tends to be the luckiest one.

The re-time is a trace event (``RetimeEvent``): a resumed run whose winner was re-timed reads it back instead of
timing it again.
"""

from __future__ import annotations

from sandbox.judging.result import Interval, Result, Status
from sandbox.tasks.task import Task, TaskError

from ..trace.claim import Retime
from ..trace.events import RetimeEvent
from ..trace.records import SessionInfo

ALONE = "its evaluation ran alone: every session of the run evaluated one candidate at a time with nothing else in " \
        "flight (--parallel 1, no cluster)"


def concurrent(parallel: int, cluster: bool) -> bool:
    """Whether a session's evaluations had other work of the run in flight beside them."""
    return parallel > 1 or cluster


def why_retimed(sessions: list[SessionInfo]) -> str | None:
    """Why the winner's first figure may not have been measured alone; None where it was."""
    if sessions and all(s.concurrent is False for s in sessions):
        return None
    if any(s.concurrent for s in sessions):
        return ("the run kept other work in flight beside its evaluations (--parallel above 1: the next candidates "
                "compiling; or a cluster: other GPUs measuring at the same time)")
    return "the run's sessions do not record whether other work was in flight beside its evaluations"


def retime_winner(sandbox, task: Task, winner, sessions: list[SessionInfo], trace,
                  events: list) -> tuple[Retime, Result | None]:
    """The ``Retime`` section for ``winner`` (an ``Entry`` with an ok, timed result), and the re-time's result (its
    cost goes to the ledger): recorded in ``events`` already, re-timed now (and written to ``trace``), or none where it
    ran alone."""
    first = winner.result
    primary = first.timing.primary if first.timing else "baseline"
    out = Retime(candidate=winner.id, status="ran alone", reason=ALONE, against=primary, original=speedups(first),
                 original_ms=median_ms(first))
    why = why_retimed(sessions)
    if why is None:
        out.text = f"re-time: {winner.id} was not re-timed, {ALONE}"
        return out, None
    recorded = next((e for e in reversed(events) if isinstance(e, RetimeEvent) and e.candidate_id == winner.id), None)
    if recorded is not None:
        result = recorded.result
    else:
        try:
            result = sandbox.evaluate_alone(task, winner.candidate)
        except (RuntimeError, TaskError) as exc:
            out.status, out.reason = "failed", f"the sandbox failed ({(str(exc).splitlines() or ['?'])[0]})"
            out.text = (f"re-time: {winner.id} could not be re-timed alone: {out.reason}; the headline is its first "
                        "figure")
            return out, None
        trace.event(RetimeEvent(candidate_id=winner.id, reason=why, result=result))
    out.reason, out.gpu_s = why, result.cost.gpu_s
    if result.status is not Status.ok or result.timing is None:
        out.status = "failed"
        error = f": {result.error}" if result.error else ""
        out.reason = f"{why}; re-timed alone it was {result.status.value}{error}"
        out.text = (f"re-time: {winner.id} re-timed alone was {result.status.value}, not ok; the headline is its first "
                    "figure")
        return out, result
    out.status, out.isolated, out.isolated_ms = "retimed", speedups(result), median_ms(result)
    out.differs = [name for name, s in out.isolated.items()
                   if name in out.original and not overlap(s, out.original[name])]
    out.text = retime_text(out)
    return out, result


def speedups(result: Result) -> dict[str, Interval]:
    return dict(result.timing.speedup) if result.timing else {}


def median_ms(result: Result) -> float | None:
    impl = result.timing.impls.get("candidate") if result.timing else None
    return impl.median_ms if impl else None


def overlap(a: Interval, b: Interval) -> bool:
    return a.low <= b.high and b.low <= a.high


def retime_text(r: Retime) -> str:
    """One line: the re-timed headline, the first figure, and a difference where the intervals do not overlap."""
    iso, first = r.isolated.get(r.against), r.original.get(r.against)
    line = f"re-timed alone on the GPU: {r.candidate} {_interval(iso)} vs {r.against}"
    if first is not None:
        line += f" (first measured {_interval(first)}"
        line += ", the intervals do not overlap" if r.against in r.differs else ", the intervals overlap"
        line += ")"
    others = [name for name in r.differs if name != r.against]
    if others:
        line += "; also differs vs " + ", ".join(f"{n} ({_interval(r.original[n])} -> {_interval(r.isolated[n])})"
                                                 for n in others)
    return line + "; the headline is the re-time"


def _interval(s: Interval | None) -> str:
    return f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s is not None else "-"
