"""What a run achieved: the ``Summary`` written to ``summary.json``, the rows of the final table, and the live
snapshot shown while it runs. Simulated figures (FakeSandbox) are marked so."""

from __future__ import annotations

from collections import Counter

from sandbox.judging.result import Status

from .budget import Totals
from .lineage import MemoryLineage
from ..protocols import Entry, score
from ..stops import Stop
from ..trace.records import Claim, EntryRow, Summary, TaskRef, TotalsRecord

SIMULATED_NOTE = "SIMULATED: the fake sandbox models run times; no kernel ran on a GPU and no figure here is a measurement"


def entry_row(e: Entry) -> EntryRow:
    r = e.result
    row = EntryRow(id=e.id, origin=e.origin, parents=e.parent_ids, status=r.status.value, error=r.error, knobs=r.knobs,
                   flags=r.flags, simulated=r.env.simulated)
    if r.compile and r.compile.kernels:
        ks = list(r.compile.kernels.values())
        row.registers = max((k.registers or 0) for k in ks)
        row.spills = sum(k.spill_stores + k.spill_loads for k in ks)
    if r.timing and "candidate" in r.timing.impls:
        c = r.timing.impls["candidate"]
        row.median_ms, row.ci_ms, row.pct_of_roofline = c.median_ms, c.ci_ms, c.pct_of_roofline
        primary = r.timing.primary  # "baseline", or "eager" for a task imported from PyTorch
        if primary in r.timing.impls:
            row.baseline_ms = r.timing.impls[primary].median_ms
        row.against = primary
        row.speedup, row.vendor_speedup = r.speedup("baseline"), r.speedup("vendor") or r.speedup("compile")
    return row


def rows(lineage: MemoryLineage, winner: Entry | None = None) -> list[EntryRow]:
    """The lineage as rows: the winner first (``winner``, a stored run's recorded one; else
    ``MemoryLineage.best``: a tie goes to the earlier entry), then the other measured entries by speedup, then
    the rest."""
    ranked = lineage.ranked()
    best = winner or lineage.best()
    if best is not None:
        ranked = [best] + [e for e in ranked if e is not best]
    rest = [e for e in lineage.entries() if e not in ranked]
    return [entry_row(e) for e in ranked + rest]


def build(run_id: str, task, sandbox_kind: str, lineage: MemoryLineage, totals: Totals, stops: dict[str, Stop],
          notes: list[str], claim: Claim | None = None) -> Summary:
    entries = lineage.entries()
    simulated = any(e.result.env.simulated for e in entries) or sandbox_kind == "fake"
    best = lineage.best()
    baseline = lineage.baseline()
    counts = Counter(e.result.status.value for e in entries)
    notes = list(notes)
    if simulated:
        notes.insert(0, SIMULATED_NOTE)
    if sandbox_kind == "compile-only":
        compiled = counts.get(Status.compiled.value, 0)
        notes.append(f"compile-only: {compiled} of {len(entries)} candidates compiled; nothing was run, checked or timed")
    if totals.by_model:
        notes.append("models: " + "; ".join(
            f"{name} {u.requests} request(s), {u.prompt_tokens + u.completion_tokens:,} tokens, ${u.cost_usd:.4f}"
            for name, u in totals.by_model.items()))
    return Summary(run_id=run_id, task=TaskRef(name=task.name, fingerprint=task.fingerprint), sandbox=sandbox_kind,
                   simulated=simulated, stops=stops, stop_reason=list(stops.values())[-1].message if stops else None,
                   best=entry_row(best) if best and best is not baseline else None,
                   baseline=entry_row(baseline) if baseline else None, candidates=len(entries),
                   duplicates_skipped=totals.duplicates, counts=dict(counts),
                   totals=TotalsRecord.model_validate(totals.as_dict()), notes=notes, claim=claim or Claim())


def snapshot(lineage: MemoryLineage, totals: Totals, phase: str, last: Entry | None) -> dict:
    best = lineage.best()
    s = best.result.speedup("baseline") if best else None
    return {"phase": phase, "iterations": totals.iterations, "in_flight": totals.in_flight,
            "candidates": len(lineage.entries()), "best_id": best.id if best else None,
            "best_speedup": s.model_dump() if s else None,
            "tokens": totals.tokens, "usd": totals.usage.cost_usd, "gpu_s": totals.gpu_s, "wall_s": totals.wall_s,
            "last": last.result.summary() if last else None, "last_score": score(last) if last else None,
            "simulated": bool(best and best.result.env.simulated)}
