"""Rebuilding a run's state from its ``events.jsonl``: the lineage, the totals, the counters, and the
proposals that were recorded but never evaluated (they are evaluated first; their tokens are spent)."""

from __future__ import annotations

from sandbox.result import Result
from sandbox.sanitizer_report import SanitizeReport

from .loop import Loop
from ..protocols import Entry, Proposal, Usage
from ..trace.writer import candidate_from_record


def restore(loop: Loop, events: list[dict]) -> None:
    """Re-apply recorded events to a fresh loop (nothing is written)."""
    proposals: dict[str, dict] = {}
    for ev in events:
        kind = ev["kind"]
        if kind == "request":
            loop.next_request = max(loop.next_request, int(ev["request"][1:]) + 1)
        elif kind == "proposal":
            loop.totals.usage = loop.totals.usage + Usage.from_dict(ev.get("usage") or {})
            if ev.get("phase") == "model":
                loop.totals.iterations += 1
            if ev.get("candidate_id"):
                proposals[ev["candidate_id"]] = ev
                loop.next_candidate = max(loop.next_candidate, int(ev["candidate_id"][1:]) + 1)
        elif kind == "evaluation":
            p = proposals[ev["candidate_id"]]
            entry = Entry(ev["candidate_id"], candidate_from_record(p["candidate"]), Result.model_validate(ev["result"]),
                          list(p["parents"]), p["origin"], p["iteration"], p.get("note", ""), ev.get("diagnosis"))
            loop.account(entry, ev.get("fingerprint"))
        elif kind == "skip" and ev.get("reason") == "duplicate":
            loop.totals.duplicates += 1
        elif kind == "sanitize":
            loop.lineage.get(ev["candidate_id"]).result.record_sanitize(SanitizeReport.model_validate(ev["report"]))
    loop.last = None


def pending_proposals(events: list[dict]) -> list[dict]:
    """Proposals with a candidate and no evaluation (killed, or stopped by a GPU or wall limit)."""
    settled = {ev["candidate_id"] for ev in events
               if ev["kind"] == "evaluation" or (ev["kind"] == "skip" and ev.get("reason") == "duplicate")}
    out = []
    for ev in events:
        if ev["kind"] != "proposal" or not ev.get("candidate_id") or ev["candidate_id"] in settled:
            continue
        cand = candidate_from_record(ev["candidate"])
        out.append({"candidate_id": ev["candidate_id"], "candidate_obj": cand, "origin": ev["origin"],
                    "iteration": ev["iteration"], "phase": ev.get("phase", "model"),
                    "proposal": Proposal(cand, list(ev["parents"]), ev["origin"], note=ev.get("note", ""))})
    return out
