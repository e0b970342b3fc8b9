"""``kernelwright.compare``: runs side by side, each by its claim (the winner's speedup interval over the
baseline), what it cost and why it stopped. Reads traces only: no GPU, no model.

Imports ``agent``'s API and trace records.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Iterable

from agent.api import Run, load_run
from sandbox.judging.result import Interval


@dataclass(frozen=True)
class RunRow:
    """One run's claim, flat."""

    run: str
    task: str
    sandbox: str | None
    simulated: bool
    winner: str | None            # the winning entry's id; None when nothing beat the baseline
    speedup: Interval | None      # the winner over the task's primary baseline (95% interval)
    median_ms: float | None
    knobs: dict[str, int]
    flags: list[str]
    evaluations: int | None       # candidates evaluated in full
    screened: int | None          # configurations the built-in search screened
    gpu_s: float | None
    usd: float | None
    stop: str | None              # why the last phase stopped, in words

    @property
    def claim(self) -> str:
        if self.speedup is None:
            return "no winner"
        s = self.speedup
        return f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" + (" SIMULATED" if self.simulated else "")


@dataclass(frozen=True)
class Comparison:
    """Runs side by side (``rows``, in the order given); prints as a table, renders as one in Jupyter."""

    rows: list[RunRow]

    COLUMNS = ("run", "task", "winner", "speedup", "median ms", "evaluations", "screened", "GPU-s", "stop")

    def _cells(self, r: RunRow) -> tuple[str, ...]:
        def num(v, fmt):
            return "" if v is None else format(v, fmt)
        return (r.run, r.task, r.winner or "-", r.claim, num(r.median_ms, ".4g"), num(r.evaluations, "d"),
                num(r.screened, "d"), num(r.gpu_s, ".1f"), r.stop or "")

    def __str__(self) -> str:
        table = [self.COLUMNS, *(self._cells(r) for r in self.rows)]
        widths = [max(len(row[i]) for row in table) for i in range(len(self.COLUMNS))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(c)}</th>" for c in self.COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in self._cells(r)) + "</tr>"
                       for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _row(run: Run) -> RunRow:
    s = run.summary
    best, totals = s.best, s.totals
    return RunRow(run=run.id, task=s.task.name, sandbox=s.sandbox, simulated=s.simulated,
                  winner=best.id if best else None, speedup=best.speedup if best else None,
                  median_ms=best.median_ms if best else None, knobs=dict(best.knobs) if best else {},
                  flags=list(best.flags) if best else [], evaluations=totals.evaluations if totals else None,
                  screened=totals.screened if totals else None, gpu_s=totals.gpu_s if totals else None,
                  usd=totals.usd if totals else None, stop=s.stop_reason)


def compare(runs: Iterable[Run | str | Path], traces: str | Path = "traces") -> Comparison:
    """Put runs side by side: each a ``Run`` (from ``optimize`` or ``load_run``), a run folder, or a run id under
    ``traces``. A missing or damaged run raises the error ``load_run`` gives."""
    return Comparison([_row(r if isinstance(r, Run) else load_run(r, traces)) for r in runs])
