"""The run's claim (``agent.trace.claim.Claim``), made in this order:

1. Before the post-run tuning sweep, the leader is re-checked at the held-out sizes (``Claimant.recheck``): a
   leader that fails one is set aside and never tuned, and its tuned copies never take up held-out re-checks.
2. Once the phases are over, the winner is re-checked at the held-out sizes (the leader that passed before tuning
   is not re-checked unless tuning replaced it), then sanitized: a winner with sanitizer errors gives way to the
   next best, which is re-checked at the held-out sizes in its turn. The held-out check comes first because it is
   the one that sets leaders aside in practice (a configuration tuned to one size), and a leader set aside is then
   never sanitized. Neither runs after an interrupt.
3. The cost ledger and what the built-in search covered.

A GPU run's winner that passed every held-out size is offered to the best-known store (``offer_best``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task, TaskError

from ..trace.claim import Claim, FlaggedWinner, HeldoutRow, HeldoutSection, LedgerRecord, SanitizeSection, \
    TuningSection
from ..trace.writer import Trace
from .heldout import format_heldout, heldout_winner, set_aside_note
from .ledger import Ledger
from .sanitize import sanitize_winner


@dataclass
class Claimant:
    """Makes one session's claim; holds what the held-out re-checks found so far."""

    sandbox: Sandbox
    task: Task
    lineage: object          # agent.loop.lineage.MemoryLineage
    trace: Trace
    sanitize: Any            # the run's [sanitize] (agent.config.SanitizeConfig)
    notes: list[str]
    rows: list[HeldoutRow] | None = None             # the held-out rows of ``passed``
    passed: str | None = None                        # the leader that passed every held-out size
    set_aside: list[FlaggedWinner] = field(default_factory=list)
    sanitized: SanitizeSection | None = None
    _earlier: int = 0                                # entries sanitized before this session's claim

    def eligible(self) -> bool:
        """Whether there is a leader to re-check: a timing sandbox, a leader that is not the baseline, and a measured
        baseline where the task has one."""
        best, base = self.lineage.best(), self.lineage.baseline()
        return (self.sandbox.kind != "compile-only" and best is not None and best is not base
                and (base is not None or not self.task.has_baseline))

    def recheck(self) -> bool:
        """Re-check the leader at the held-out sizes (and the next ones, where it fails one); False where the
        sandbox failed (the notes say so)."""
        best = self.lineage.best()
        if best is not None and best.id == self.passed:
            return True
        try:
            found = heldout_winner(self.sandbox, self.task, self.lineage)
        except (RuntimeError, TaskError) as exc:
            note = f"held-out sizes not re-checked: the sandbox failed ({str(exc).splitlines()[0]})"
            if note not in self.notes:   # the check before tuning may have said so already
                self.notes.append(note)
            return False
        self.set_aside += found.flagged
        if found.note:
            self.notes.append(found.note)
        self.rows = found.rows
        leader = self.lineage.best()
        self.passed = leader.id if found.rows is not None and leader is not None else None
        return True

    def make(self, tuners, totals, interrupted: bool, tuning: TuningSection | None) -> Claim:
        """The claim once the phases are over (steps 2 and 3 above); ``tuning``: what the searches covered."""
        base = self.lineage.baseline()
        self._earlier = self._reports()   # sanitized in an earlier session of a resumed run
        checked = False
        if self.eligible() and not interrupted:
            checked = True
            if self.sanitize.enabled and self.lineage.best().result.sanitize is None:
                self.sandbox.warm_sanitizer(tuple(self.sanitize.tools))   # its start-up beside the held-out check
            while True:
                if not self.recheck():
                    self._sanitize()
                    break
                leader = self.lineage.best()
                self._sanitize()   # the leader that passed (none once every one tried was set aside: the section says)
                after = self.lineage.best()
                if after is None or after is base or after is leader:
                    break          # else the sanitizer rejected that leader, and the next best is re-checked
        elif not interrupted:
            self._sanitize()
        heldout = None
        if checked or self.set_aside:
            best = self.lineage.best()
            rows = self.rows if best is not None and best.id == self.passed else None   # not a tuned copy's
            heldout = HeldoutSection(rows=rows, set_aside=self.set_aside,
                                     text=format_heldout(rows) if rows is not None else None)
        if self.set_aside:
            self.notes.append(set_aside_note(self.set_aside))
        return Claim(heldout=heldout, sanitizer=self.sanitized, ledger=self._ledger(tuners, totals),
                     tuning=tuning)

    def _reports(self) -> int:
        return sum(1 for e in self.lineage.entries() if e.result.sanitize is not None)

    def _sanitize(self) -> None:   # the limit counts this session's reports, however many turns the claim takes
        self.sanitized = sanitize_winner(self.sandbox, self.task, self.lineage, self.trace, self.sanitize,
                                         done=self._reports() - self._earlier)

    def _ledger(self, tuners, totals) -> LedgerRecord:
        ledger = Ledger(wall_before_s=totals.wall_s)
        for e in self.lineage.entries():
            ledger.add_result(e.result)
        for t in tuners:
            for r in t.compile_results:
                ledger.add_compile(r)
        ledger.add_screening(totals.screened, totals.screen_gpu_s)
        ledger.add_usage(totals.usage)
        best = self.lineage.best()
        if best is not None and best is not self.lineage.baseline():   # as the summary: no winner of its own run
            ledger.record_winner(best.result)
        ledger.stop()
        return LedgerRecord.model_validate({**ledger.to_dict(), "text": ledger.summary()})


def offer_best(sandbox: Sandbox, task: Task, lineage, claim: Claim, run: str, notes: list[str]) -> None:
    """A GPU run's winner goes to the best-known store once it is correct at every held-out size."""
    from .best import BestStore

    best = lineage.best()
    if sandbox.kind != "gpu" or best is None or best.origin == "baseline":
        return
    rows = claim.rows
    if task.spec.sizes.heldout and not (rows and all(r.status == "ok" for r in rows)):
        notes.append("best-known store: the winner was not offered (it did not pass every held-out size)")
        return
    try:
        stored = BestStore().offer(task, best.candidate, best.result, run=run)
    except OSError as exc:
        notes.append(f"best-known store: not written ({exc})")
        return
    if stored:
        notes.append(f"best-known store: {best.id} is now the best kernel on record for this GPU and size")
