"""compute-sanitizer on the winner before the run declares it (``[sanitize]`` in the run config).

``sanitize_winner`` takes the best-ranked entry and asks the sandbox to sanitize it (by default memcheck
and racecheck at the task's two smallest non-trivial check sizes: ``Sandbox.sanitize``). The report goes
on the entry's result (``Result.record_sanitize``: ``Result.sanitize``, its seconds in ``cost.sanitize_gpu_s``),
into the trace (a ``sanitize`` event, and the candidate's ``result.json`` rewritten) and into the summary. A winner with
errors is not a winner: its status becomes ``rejected``, its error says what the tool found, and the next
best is sanitized in its turn, up to ``max_candidates``. A report without a verdict (no compute-sanitizer,
no GPU, the tool failed or timed out) leaves the winner standing, and the summary says so in words
("not sanitized (...)", "no verdict (...)"); nothing claims a check that did not happen.
"""

from __future__ import annotations

from ..trace.claim import SanitizedEntry, SanitizeSection
from ..trace.events import SanitizeEvent

DISABLED = "not sanitized (disabled: --no-sanitize or [sanitize] enabled = false)"


def sanitize_winner(sandbox, task, lineage, trace, config, done: int = 0) -> SanitizeSection | None:
    """Sanitize the winner (and the next best after one with errors); the summary's ``sanitize`` section.
    ``done``: candidates this session sanitized already (in earlier calls), counted against ``max_candidates``.

    Entries sanitized in an earlier session of a resumed run keep their reports. None when there is no
    winner and nothing was rejected (nothing beat the baseline, or nothing was timed)."""
    base, best = lineage.baseline(), lineage.best()
    sanitized = done
    while config.enabled and best is not None and best is not base and best.result.sanitize is None:
        if sanitized >= config.max_candidates:
            break
        report = sandbox.sanitize(task, best.candidate, tools=tuple(config.tools), check_sizes=config.check_sizes,
                                  timeout_s=config.timeout_s)
        best.result.record_sanitize(report)
        trace.save_candidate(best.id, best.candidate.render(), best.result.to_json())
        trace.event(SanitizeEvent(candidate_id=best.id, report=report))
        sanitized += 1
        best = lineage.best()
    return section(lineage, config)


def section(lineage, config) -> SanitizeSection | None:
    """What the run's sanitizer reports say, as the summary's ``sanitize`` section (``text``: one line)."""
    base, best = lineage.baseline(), lineage.best()
    winner = best if best is not None and best is not base else None
    checked = [e for e in lineage.entries() if e.result.sanitize is not None]
    rejected = [e for e in checked if e.result.sanitize.status == "errors"]
    if winner is None and not rejected:
        return None
    parts = [f"{e.id} rejected ({e.result.sanitize.text()})" for e in rejected]
    if winner is None:
        status, said = "none left", "no winner left: every candidate that beat the baseline had sanitizer errors"
    elif winner.result.sanitize is not None:
        status, said = winner.result.sanitize.status, f"winner {winner.id}: {winner.result.sanitize.text()}"
    elif not config.enabled:
        status, said = "disabled", f"winner {winner.id}: {DISABLED}"
    else:
        status = "not sanitized"
        said = f"winner {winner.id}: not sanitized (the limit of {config.max_candidates} sanitized candidates was reached)"
    return SanitizeSection(status=status, winner=winner.id if winner else None, rejected=[e.id for e in rejected],
                           checked=[SanitizedEntry(id=e.id, status=e.result.sanitize.status,
                                                   text=e.result.sanitize.text()) for e in checked],
                           text="sanitizer: " + "; ".join(parts + [said]))
