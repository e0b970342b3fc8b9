"""What a run achieved, as flat dicts: the summary written to ``summary.json``, the rows of the final
table, and the live snapshot shown while it runs. Simulated figures (FakeSandbox) are marked so."""

from __future__ import annotations

from collections import Counter

from sandbox.result import Status

from ..loop.budget import Totals
from ..loop.lineage import MemoryLineage, score
from ..protocols import Entry

SUMMARY_SCHEMA = "kernelwright-summary-1"
SIMULATED_NOTE = "SIMULATED: the fake sandbox models run times; no kernel ran on a GPU and no figure here is a measurement"


def entry_row(e: Entry) -> dict:
    r = e.result
    row = {"id": e.id, "origin": e.origin, "parents": e.parent_ids, "status": r.status.value, "error": r.error,
           "median_ms": None, "ci_ms": None, "speedup": None, "vendor_speedup": None, "pct_of_roofline": None,
           "registers": None, "spills": None, "knobs": r.knobs, "flags": r.flags, "simulated": bool(r.env.get("simulated"))}
    if r.compile and r.compile.kernels:
        ks = list(r.compile.kernels.values())
        row["registers"] = max((k.registers or 0) for k in ks)
        row["spills"] = sum(k.spill_stores + k.spill_loads for k in ks)
    if r.timing and "candidate" in r.timing.impls:
        c = r.timing.impls["candidate"]
        row.update(median_ms=c.median_ms, ci_ms=[c.ci_ms.low, c.ci_ms.high], pct_of_roofline=c.pct_of_roofline)
        primary = r.timing.primary  # "baseline", or "eager" for a task imported from PyTorch
        if primary in r.timing.impls:
            row["baseline_ms"] = r.timing.impls[primary].median_ms
        row["against"] = primary
        second = r.speedup("vendor") or r.speedup("compile")
        for key, s in (("speedup", r.speedup("baseline")), ("vendor_speedup", second)):
            if s:
                row[key] = {"value": s.value, "low": s.low, "high": s.high, "faster": s.low > 1.0}
    return row


def rows(lineage: MemoryLineage) -> list[dict]:
    ranked = lineage.ranked()
    rest = [e for e in lineage.entries() if e not in ranked]
    return [entry_row(e) for e in ranked + rest]


def build(run_id: str, task, sandbox_kind: str, lineage: MemoryLineage, totals: Totals, stops: dict[str, str],
          notes: list[str]) -> dict:
    entries = lineage.entries()
    simulated = any(e.result.env.get("simulated") for e in entries) or sandbox_kind == "fake"
    best = lineage.best()
    baseline = lineage.baseline()
    counts = Counter(e.result.status.value for e in entries)
    notes = list(notes)
    if simulated:
        notes.insert(0, SIMULATED_NOTE)
    if sandbox_kind == "compile-only":
        compiled = counts.get(Status.compiled.value, 0)
        notes.append(f"compile-only: {compiled} of {len(entries)} candidates compiled; nothing was run, checked or timed")
    return {"schema": SUMMARY_SCHEMA, "run_id": run_id, "task": {"name": task.name, "fingerprint": task.fingerprint},
            "sandbox": sandbox_kind, "simulated": simulated, "stops": stops,
            "stop_reason": list(stops.values())[-1] if stops else None,
            "best": entry_row(best) if best and best is not baseline else None,
            "baseline": entry_row(baseline) if baseline else None,
            "candidates": len(entries), "duplicates_skipped": totals.duplicates, "counts": dict(counts),
            "totals": totals.as_dict(), "notes": notes}


def snapshot(lineage: MemoryLineage, totals: Totals, phase: str, last: Entry | None) -> dict:
    best = lineage.best()
    s = best.result.speedup("baseline") if best else None
    return {"phase": phase, "iterations": totals.iterations, "in_flight": totals.in_flight,
            "candidates": len(lineage.entries()), "best_id": best.id if best else None,
            "best_speedup": {"value": s.value, "low": s.low, "high": s.high} if s else None,
            "tokens": totals.tokens, "usd": totals.usage.cost_usd, "gpu_s": totals.gpu_s, "wall_s": totals.wall_s,
            "last": last.result.summary() if last else None, "last_score": score(last) if last else None,
            "simulated": bool(best and best.result.env.get("simulated"))}
