"""What the report, the notebook views and ``kernelwright show`` display of a stored run, as flat dicts
with numbers already formatted: the claim and the baselines it is measured against, the validity
envelope, the held-out table, the cost, the lineage tree and, per candidate, its diff against its parent.
Strings from a model or a trace stay raw here; the templates escape them."""

from __future__ import annotations

import difflib
import math

from sandbox.judging.environment import READINGS, Environment
from sandbox.judging.result import Interval
from sandbox.tasks.task import describe_sizes

from ..claims.heldout import regression_note, set_aside_note
from . import search
from ..protocols import Entry, score
from ..trace.events import ProposalEvent, RequestEvent, ToolCallEvent
from ..trace.reader import RunTrace
from ..trace.records import Claim, EntryRow, Summary

ENVELOPE = (("gpu", "GPU"), ("compute_capability", "compute capability"), ("arch", "target arch"), ("sms", "SMs"),
            ("memory_bytes", "memory"), ("driver", "driver"), ("cuda_driver_api", "CUDA (driver API)"),
            ("cuda_runtime", "CUDA runtime"), ("nvrtc", "NVRTC"), ("cupy", "CuPy"),
            ("sm_clock_mhz", "SM clock (MHz)"), ("mem_clock_mhz", "memory clock (MHz)"),
            ("temperature_c", "temperature (C)"), ("power_w", "power (W)"))
NOT_RECORDED = "not recorded"
NOTE_CHARS = 90


def interval(s: Interval | dict | None) -> str:
    if s is None:
        return "-"
    v, lo, hi = (s.value, s.low, s.high) if isinstance(s, Interval) else (s["value"], s["low"], s["high"])
    return f"{v:.3f}x [{lo:.3f}, {hi:.3f}]"


def verdict(s: Interval | dict | None) -> str:
    if s is None:
        return ""
    lo, hi = (s.low, s.high) if isinstance(s, Interval) else (s["low"], s["high"])
    if lo > 1.0:
        return "faster: the interval clears 1.0"
    if hi < 1.0:
        return "slower: the interval lies below 1.0"
    return "not clearly different: the interval contains 1.0"


def _calls(n) -> str:
    if n is None:
        return "unknown (no timed winner)"
    if n == "inf" or (isinstance(n, float) and math.isinf(n)):
        return "never (no saving)"
    return f"{math.ceil(n):,}"


# ---- the summary ---------------------------------------------------------------------------------


def summary_view(stored: RunTrace, task=None) -> dict:
    info, summary = stored.info, stored.summary
    claim = summary.claim if summary else Claim()
    best, base = stored.best, stored.baseline
    shown = best or base
    timing = shown.result.timing if shown else None
    model = (info.config.get("model") or {}).get("name")
    notes = list(summary.notes) if summary else []
    if not stored.finished:
        from ..trace.reader import UNFINISHED_NOTE

        notes.append(UNFINISHED_NOTE)
    elif stored.simulated and not any(n.startswith("SIMULATED") for n in notes):
        notes.insert(0, "SIMULATED: no figure in this run is a measurement")
    if stored.unchecked:
        notes.insert(0, stored.unchecked)
    spec = task.spec if task is not None else None
    out = {
        "run_id": stored.id, "task": stored.task_name, "created": info.created, "task_version": info.task.version,
        "fingerprint": info.task.fingerprint, "description": " ".join(spec.description.split()) if spec else "",
        "sandbox": info.sandbox.kind, "proposer": f"{info.proposer.kind}{f' ({model})' if model else ''}",
        "simulated": stored.simulated, "notes": notes,
        "stops": [{"phase": k, "reason": v.message} for k, v in (summary.stops if summary else {}).items()],
        "counts": ", ".join(f"{v} {k}" for k, v in sorted(_counts(stored).items())),
        "candidates": len(stored.entries), "unevaluated": len(stored.unevaluated),
        "best": None, "baselines": [], "envelope": envelope(stored, shown, task), "heldout": heldout(summary),
        "sanitize": claim.sanitizer.text if claim.sanitizer else None, "cost": cost(stored),
        "screened": [r.to_json() for r in search.screened(stored.events, stored.entries, claim.searches)],
        "not_winner": {k: w.to_json() for k, w in search.not_winner(stored.entries, best, base, claim.set_aside).items()},
        "runner_up": None}
    out["no_winner"] = "" if best is not None else no_winner(stored)
    found = search.runner_up(stored.entries, best, base, claim.set_aside) if stored.finished else None
    if found is not None:
        entry, why = found
        out["runner_up"] = {"id": entry.id, "speedup": interval(entry.result.speedup("baseline")), **why.to_json()}
    if best is not None:
        r = best.result
        s, v = r.speedup("baseline"), r.speedup("vendor")
        c = r.timing.impls.get("candidate") if r.timing else None
        out["best"] = {"id": best.id, "origin": best.origin, "speedup": interval(s), "verdict": verdict(s),
                       "against": r.timing.primary if r.timing else "baseline",
                       "regressions": regression_note(claim.rows),
                       "set_aside": set_aside_note(claim.set_aside),
                       "vendor": interval(v) if v else "", "vendor_verdict": verdict(v) if v else "",
                       "median_ms": f"{c.median_ms:.4g}" if c else "-",
                       "pct": f"{c.pct_of_roofline:.1f}" if c and c.pct_of_roofline is not None else "-",
                       "knobs": ", ".join(f"{k}={x}" for k, x in r.knobs.items()), "flags": " ".join(r.flags),
                       "bias": "; ".join(r.bias_flags())}
    if base is not None:
        # the baseline's time in the shown claim's own A/B timing: the figure its speedup and saving come from
        t = timing if timing is not None and "baseline" in timing.impls else base.result.timing
        base_ms = t.impls["baseline"].median_ms if t and "baseline" in t.impls else None
        in_claim = "; its time in the winner's A/B timing" if best is not None and t is timing else ""
        out["baselines"].append({"name": "baseline", "what": "the task's starting kernel (baseline.cu) with its default "
                                 "knobs and flags, timed A/B against every candidate in the same process" + in_claim,
                                 "ms": f"{base_ms:.4g} ms" if base_ms else "not timed", "entry": base.id})
    torch_baselines = {"eager": "the task's PyTorch module as written (float32 arithmetic, TF32 off), timed A/B "
                              "against every candidate in the same process; speedups are over it",
                       "compile": "torch.compile of the same module, compiled before timing, timed A/B likewise"}
    for name, what in torch_baselines.items():
        if timing is not None and name in timing.impls:
            out["baselines"].append({"name": f"PyTorch {name}", "what": what,
                                     "ms": f"{timing.impls[name].median_ms:.4g} ms", "entry": ""})
    if timing is not None and "vendor" in timing.impls:
        out["baselines"].append({"name": "vendor", "what": (spec.vendor if spec and spec.vendor else
                                                            "the task's vendor-library implementation"),
                                 "ms": f"{timing.impls['vendor'].median_ms:.4g} ms", "entry": ""})
    if timing is not None and timing.roofline_ms:
        out["baselines"].append({"name": "hardware limit", "what": f"the roofline floor at {describe_sizes(timing.sizes)} "
                                 f"({timing.bound or '?'}-bound, from the task's flops and bytes and the device's "
                                 "measured ceilings)", "ms": f"{timing.roofline_ms:.4g} ms", "entry": ""})
    return out


def no_winner(stored: RunTrace) -> str:
    """Why a run has no winner, in a few words: nothing timed is not the same as nothing faster."""
    if stored.info.sandbox.kind == "compile-only":
        return "a compile-only run times nothing"
    timed = [e for e in stored.entries if e.result.timing is not None]
    if not timed:
        return "nothing was timed, not even the baseline" + ("" if stored.finished else ": the run did not finish")
    if all(e.origin == "baseline" for e in timed):
        return "no candidate was timed beside the baseline"
    return "no candidate beat the baseline"


def _counts(stored: RunTrace) -> dict:
    counts: dict[str, int] = {}
    for e in stored.entries:
        counts[e.result.status.value] = counts.get(e.result.status.value, 0) + 1
    for u in stored.unevaluated:
        key = "duplicates skipped" if u.reason.startswith("duplicate") else "not evaluated"
        counts[key] = counts.get(key, 0) + 1
    return counts


def envelope(stored: RunTrace, shown: Entry | None, task=None) -> list[dict]:
    env = shown.result.env if shown else Environment()
    software = stored.info.environment
    rows = []
    for key, label in ENVELOPE:
        value = getattr(env, key)
        if value is None and key in ("nvrtc", "cupy"):   # the fake and compile-only sandboxes record neither
            value = software.get(key)
        if key in READINGS:
            value = env.describe_reading(key)
        if key == "memory_bytes" and value:
            value = f"{value / 2**30:.0f} GiB"
        rows.append({"key": key, "label": label, "value": NOT_RECORDED if value in (None, "") else str(value)})
    rows.append({"key": "kernelwright", "label": "kernelwright", "value": str(software.get("kernelwright", NOT_RECORDED))})
    gpus = measured_on(stored, shown)
    if gpus:
        rows.append({"key": "measured_on", "label": "measured on (each figure on one GPU)", "value": "; ".join(gpus)})
    r = shown.result if shown else None
    if r is not None and r.timing is not None:
        t = r.timing
        rows.append({"key": "benchmark", "label": "benchmark size (timed)", "value": describe_sizes(t.sizes)})
        rows.append({"key": "timing", "label": "timing protocol", "value": f"{t.rounds} interleaved A/B rounds, L2 flush "
                     f"{t.l2_flush_bytes / 2**20:.0f} MiB, {t.rotating_sets} rotating sets of input and output buffers"})
    if r is not None and r.checks:
        sizes = dict.fromkeys(describe_sizes(c.sizes) for c in r.checks)
        rows.append({"key": "checked", "label": "checked at sizes", "value": "; ".join(sizes)})
    if task is not None:
        spec = task.spec
        rows.append({"key": "dtypes", "label": "dtypes", "value": ", ".join(
            f"{t.name}: {t.dtype}" for t in [*spec.inputs, *spec.outputs])})
        rows.append({"key": "tolerance", "label": "tolerance", "value": "; ".join(
            f"{o.name}: atol {t.atol:g}, rtol {t.rtol:g}" + (f", spread {t.spread:g}" if t.spread else "") for o in spec.outputs for t in [task.output_tolerance(o)])})
        if spec.sizes.heldout:
            rows.append({"key": "heldout_sizes", "label": "held-out sizes", "value": "; ".join(
                describe_sizes(s) for s in spec.sizes.heldout)})
    return rows


def measured_on(stored: RunTrace, shown: Entry | None) -> list[str]:
    """Every GPU of a cluster run that measured a figure shown: the shown candidate's A/B timing, each held-out row."""
    where = [shown.result.env.measured_by()] if shown else []
    summary = stored.summary
    where += [row.measured_on for row in (summary.claim.rows or [])] if summary is not None else []
    return list(dict.fromkeys(w for w in where if w))


def heldout(summary: Summary | None) -> list[dict] | None:
    if summary is None or summary.claim.rows is None:
        return None
    return [{"sizes": describe_sizes(r.sizes), "status": r.status, "speedup": interval(r.speedup),
             "verdict": verdict(r.speedup), "vendor": interval(r.vendor_speedup), "start": interval(r.start_speedup),
             "winner_ms": f"{r.winner_ms:.4g}" if r.winner_ms is not None else "-",
             "baseline_ms": f"{r.baseline_ms:.4g}" if r.baseline_ms is not None else "-",
             "flagged": r.flagged, "reason": r.reason or r.error} for r in summary.claim.rows]


def cost(stored: RunTrace) -> list[dict]:
    summary = stored.summary
    totals = summary.totals.model_dump() if summary and summary.totals else {}
    claim = summary.claim if summary else Claim()
    ledger = claim.ledger
    last = stored.steps[-1] if stored.steps else None
    tokens = totals.get("tokens", last.tokens if last else 0)
    usage = ledger.usage if ledger else None
    rows = [("model tokens", f"{tokens:,} (prompt {totals.get('prompt_tokens', usage.prompt_tokens if usage else 0):,}, "
                             f"completion {totals.get('completion_tokens', usage.completion_tokens if usage else 0):,}, "
                             f"reasoning {totals.get('reasoning_tokens', 0):,}, cached {totals.get('cached_tokens', 0):,}) "
                             f"in {totals.get('model_requests', usage.requests if usage else 0)} requests"),
            ("money", f"${totals.get('usd', last.usd if last else 0.0):.4f}" + (
                "" if stored.info.config.get("prices") else " (no token prices configured)")),
            ("GPU time", f"{ledger.gpu_s if ledger else (last.gpu_s if last else 0.0):.2f} GPU-s" + (
                (f" (screen {ledger.screen_gpu_s:.2f}, " if ledger.screen_gpu_s else " (")
                + f"check {ledger.check_gpu_s:.2f}, time {ledger.time_gpu_s:.2f}, profile {ledger.profile_gpu_s:.2f}"
                + (f", sanitize {ledger.sanitize_gpu_s:.2f}" if ledger.sanitize_gpu_s else "") + ")"
                if ledger else "")),
            ("compile time", f"{ledger.compile_s:.2f} s in {ledger.evaluations} evaluations"
                             + (f" + {ledger.compiles} search compiles" if ledger.compiles else "")
             if ledger else NOT_RECORDED),
            ("wall time", f"{ledger.wall_s if ledger else totals.get('wall_s', last.wall_s if last else 0.0):.1f} s")]
    if claim.tuning:
        rows.append(("built-in search", claim.tuning.text.replace("\n", "; ")))
    saving = ledger.saving if ledger else None
    if saving:
        size = describe_sizes(saving.sizes)
        rows.append(("saving per call", f"{saving.per_call_s * 1e6:.2f} us at {size} ({saving.reference_ms:.4g} ms "
                                        f"{saving.over} -> {saving.winner_ms:.4g} ms winner)"))
    be = ledger.break_even_calls if ledger else None
    if be and be.gpu is not None:
        rows.append(("break-even", f"{_calls(be.gpu)} calls repay the GPU time ({_calls(be.gpu_conservative)} "
                                   f"at the interval's low end); {_calls(be.wall)} calls repay the wall time"))
    elif stored.finished:
        rows.append(("break-even", "unknown (no timed winner)"))
    sim = " (simulated)" if stored.simulated else ""
    return [{"label": k, "value": v + (sim if k in ("GPU time", "saving per call", "break-even") else "")} for k, v in rows]


# ---- the lineage ---------------------------------------------------------------------------------


def node(stored: RunTrace, entry: Entry) -> dict:
    r = entry.result
    s = r.speedup("baseline") if r.ok else None
    best = stored.best
    return {"id": entry.id, "origin": entry.origin, "status": r.status.value, "ok": r.status.value in ("ok", "compiled"),
            "speedup": interval(s) if s else "", "faster": bool(s and s.low > 1.0), "best": best is not None and best.id == entry.id,
            "baseline": entry.origin == "baseline", "skipped": "", "evaluated": True,
            "note": _first_line(entry.note), "error": _first_line(r.error)}


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= NOTE_CHARS else line[:NOTE_CHARS - 3] + "..."


def picked(stored: RunTrace) -> dict[str, str]:
    """Per candidate, how its request chose the parent (the island, the rule), the inspirations shown beside it
    and, with roles, the model that answered; empty for what older traces did not record."""
    requests = {ev.request: ev for ev in stored.events if isinstance(ev, RequestEvent)}
    tools: dict[str, list[ToolCallEvent]] = {}
    for ev in stored.events:
        if isinstance(ev, ToolCallEvent):
            tools.setdefault(ev.request, []).append(ev)
    out = {}
    for ev in stored.events:
        if not isinstance(ev, ProposalEvent) or not ev.candidate_id or ev.request not in requests:
            continue
        req = requests[ev.request]
        parts = [f"parent by {req.why}"] if req.why else []
        if req.inspirations:
            parts.append("inspirations " + ", ".join(req.inspirations))
        if ev.answered_by:
            parts.append(f"answered by {ev.answered_by} ({ev.model_rule})")
        if tools.get(ev.request):
            done = tools[ev.request]
            parts.append(f"{len(done)} tool calls (" + ", ".join(f"{t.name} {t.status}" for t in done)
                         + f"; {sum(t.gpu_s for t in done):.3f} GPU-s)")
        if parts:
            out[ev.candidate_id] = "; ".join(parts)
    return out


def lineage_lines(stored: RunTrace) -> list[dict]:
    """The lineage tree, flattened in display order: each node with its tree prefix (``├─ ``, ``│  ``...) and how
    its parent was picked (``picked``)."""
    chosen = picked(stored)
    nodes = {e.id: {**node(stored, e), "picked": chosen.get(e.id, "")} for e in stored.entries}
    parents = {e.id: (e.parent_ids[0] if e.parent_ids else None) for e in stored.entries}
    for u in stored.unevaluated:
        if u.id:
            nodes[u.id] = {"id": u.id, "origin": u.origin, "status": "skipped", "ok": False, "speedup": "", "faster": False,
                           "best": False, "baseline": False, "skipped": u.reason, "evaluated": False,
                           "note": _first_line(u.note), "error": "", "picked": ""}
            parents[u.id] = u.parents[0] if u.parents else None
    children: dict[str | None, list[str]] = {}
    for nid in sorted(nodes, key=lambda i: (len(i), i)):
        parent = parents[nid] if parents[nid] in nodes else None
        children.setdefault(parent, []).append(nid)
    lines: list[dict] = []
    stack = [(nid, "", "") for nid in reversed(children.get(None, []))]
    while stack:
        nid, lead, branch = stack.pop()
        lines.append({**nodes[nid], "prefix": lead + branch})
        kids = children.get(nid, [])
        below = lead + ("" if not branch else ("   " if branch.startswith("└") else "│  "))
        for i, kid in reversed(list(enumerate(kids))):
            stack.append((kid, below, "└─ " if i == len(kids) - 1 else "├─ "))
    return lines


# ---- candidates ----------------------------------------------------------------------------------


def diff_lines(parent_id: str | None, parent_source: str | None, entry_id: str, source: str | None) -> list[dict]:
    """A unified diff against the parent as (kind, text) rows; the whole file when there is no parent."""
    if source is None:
        return [{"kind": "head", "text": f"{entry_id}/candidate.cu is missing from the trace"}]
    if parent_source is None:
        return [{"kind": "src", "text": line} for line in source.splitlines()]
    rows = []
    for line in difflib.unified_diff(parent_source.splitlines(), source.splitlines(), f"{parent_id}/candidate.cu",
                                     f"{entry_id}/candidate.cu", lineterm="", n=3):
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        rows.append({"kind": kind, "text": line})
    return rows or [{"kind": "head", "text": f"identical to {parent_id}"}]


def own_diagnosis(entry: Entry) -> str:
    """The entry's diagnosis text where its result's profile does not already show it."""
    text = entry.diagnosis if isinstance(entry.diagnosis, str) else ""
    profile = entry.result.profile
    return "" if text == (profile.diagnosis if profile else "") else text


def candidate_view(stored: RunTrace, entry: Entry) -> dict:
    parent = stored.parent(entry)
    phases = {ev.candidate_id: ev.phase for ev in stored.events if isinstance(ev, ProposalEvent) and ev.candidate_id}
    return {**node(stored, entry), "phase": phases.get(entry.id, ""), "iteration": entry.iteration,
            "picked": picked(stored).get(entry.id, ""),
            "parents": entry.parent_ids, "full_note": entry.note, "diagnosis": own_diagnosis(entry),
            "diff": diff_lines(parent.id if parent else None, stored.source(parent.id) if parent else None,
                               entry.id, stored.source(entry.id)),
            "diff_label": f"diff against {parent.id}" if parent else "source",
            "score": score(entry)}


def rows_view(rows: list[EntryRow]) -> list[dict]:
    """``Run.rows()`` with numbers formatted for a table."""
    out = []
    for r in rows:
        ci = r.ci_ms
        out.append({"id": r.id, "origin": r.origin, "status": r.status,
                    "median": f"{ci.value:.4g} [{ci.low:.4g}, {ci.high:.4g}]" if ci else "-",
                    "speedup": interval(r.speedup), "vendor": interval(r.vendor_speedup),
                    "pct": f"{r.pct_of_roofline:.1f}" if r.pct_of_roofline is not None else "-",
                    "registers": "-" if r.registers is None else str(r.registers), "error": _first_line(r.error)})
    return out


def unevaluated_view(stored: RunTrace) -> list[dict]:
    return [{"id": u.id or "-", "origin": u.origin, "phase": u.phase, "iteration": u.iteration,
             "parents": ", ".join(u.parents), "reason": u.reason, "note": u.note} for u in stored.unevaluated]
