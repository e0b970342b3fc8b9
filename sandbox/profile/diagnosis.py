"""The diagnosis: what bounds a candidate, how far from the roofline it is, its top three issues with
their numbers, and what changed against its parent; short text for the model and a dict for traces.

Inputs are values already measured elsewhere: the compiler's resource report (every candidate), the
timing stage's roofline (when timed) and the profile's counters (when profiled; see
``sandbox.profile``). The issues themselves are found in ``sandbox.profile.issues``. Nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .counters import top_stalls
from .issues import (SECTOR_BYTES, UNIT_NAMES, byte_size, compiled_info, counter_issues, merge_issues, resource_issues,
                     resource_text, rule_issues, traffic_issue)

LATENCY_BELOW_PCT = 60.0   # ncu's own guideline: throughput below 60% of peak points at latency
IDLE_BELOW_PCT = 20.0
ISSUES = 3


@dataclass
class Diagnosis:
    text: str
    data: dict = field(default_factory=dict)


# ---- bound -----------------------------------------------------------------------------------

def kernel_bound(s: dict) -> tuple[str | None, str, bool]:
    """(bound, the numbers behind it, latency-limited?) from one launch's speed-of-light counters.

    The bound is the unit closest to its peak: "compute" (SM), "memory" (DRAM bandwidth, the
    roofline's memory) or "cache" (L1/shared or L2 throughput while DRAM runs at under half of that
    unit's share: a data-reuse problem, not a DRAM one); "latency" when nothing reaches 20% of peak.
    Latency-limited: the top unit is below 60% of peak (ncu's own guideline for latency issues).
    """
    sm = s.get("sm_pct")
    units = {k: s[k] for k in UNIT_NAMES if s.get(k) is not None}
    mem = s.get("memory_pct", max(units.values(), default=None))
    if sm is None and mem is None:
        return None, "", False
    sm_v, mem_v = sm or 0.0, mem or 0.0
    numbers = ", ".join([f"SM {sm_v:.0f}%"] + [f"{UNIT_NAMES[k]} {v:.0f}%" for k, v in units.items()]) + " of peak"
    top = max(sm_v, mem_v)
    limited = top < LATENCY_BELOW_PCT
    if top < IDLE_BELOW_PCT:
        return "latency", numbers, True
    if sm_v > mem_v:
        return "compute", numbers, limited
    busiest = max(units.values(), default=mem_v)
    if units.get("dram_pct", 0.0) >= 0.5 * busiest:
        return "memory", numbers, limited
    return "cache", numbers, limited


BOUND_WORDS = {"memory": "memory-bound (DRAM bandwidth)",
               "cache": "bound by on-chip memory throughput (L1/shared or L2), not DRAM",
               "compute": "compute-bound", "latency": "latency-bound (no unit reaches 20% of its peak)"}
LIMITED_WORDS = "; below 60% of peak, so latency limits it (too little independent work in flight)"


def bound_text(bound: str | None, limited: bool) -> str:
    return BOUND_WORDS.get(bound, "bound unknown") + (LIMITED_WORDS if limited and bound != "latency" else "")


# ---- changes against the parent -------------------------------------------------------------

COMPARED = (("duration_ns", "ncu duration", "ns"), ("dram_pct", "DRAM throughput", "%"), ("sm_pct", "SM throughput", "%"),
            ("occupancy_achieved_pct", "achieved occupancy", "%"), ("registers", "registers/thread", ""),
            ("dram_bytes", "DRAM bytes", "B"), ("ld_bytes_per_sector", "bytes used per global load sector", ""),
            ("shared_conflict_pct", "shared bank conflicts", "%"), ("l2_hit_pct", "L2 hit rate", "%"))


def changes(profile: dict, parent: dict | None) -> list[str]:
    """Counter deltas against the parent's profile: kernels matched by name, then by position."""
    if not parent or parent.get("status") != "ok" or profile.get("status") != "ok":
        return []
    out = []
    now_t, then_t = (profile.get("timing") or {}).get("median_ms"), (parent.get("timing") or {}).get("median_ms")
    if now_t and then_t:
        out.append(f"measured time {then_t:.4g} -> {now_t:.4g} ms ({_pct_change(then_t, now_t)})")
    mine, theirs = profile["kernels"], parent["kernels"]
    by_name = {k["kernel"]: k for k in theirs}
    names_now, names_then = [k["kernel"] for k in mine], [k["kernel"] for k in theirs]
    if names_now != names_then:
        out.append(f"kernels {', '.join(names_then)} -> {', '.join(names_now)}")
    for i, k in enumerate(mine):
        old = by_name.get(k["kernel"]) or (theirs[i] if i < len(theirs) else None)
        if old is None:
            continue
        prefix = f"{k['kernel']}: " if len(mine) > 1 else ""
        for key, label, unit in COMPARED:
            a, b = old["summary"].get(key), k["summary"].get(key)
            if a is None or b is None or not _differs(a, b, unit):
                continue
            out.append(f"{prefix}{label} {_fmt(a, unit)} -> {_fmt(b, unit)}")
        sa, sb = top_stalls(old["summary"], 1), top_stalls(k["summary"], 1)
        if sa and sb and sa[0][0] != sb[0][0]:
            out.append(f"{prefix}top stall {sa[0][0]} ({sa[0][2]:.0f}%) -> {sb[0][0]} ({sb[0][2]:.0f}%)")
    return out


def _differs(a: float, b: float, unit: str) -> bool:
    if unit == "%":
        return abs(a - b) >= 5.0
    return abs(a - b) > 0.05 * max(abs(a), abs(b), 1e-12)


def _pct_change(a: float, b: float) -> str:
    return f"{100.0 * (b - a) / a:+.0f}%"


def _fmt(v: float, unit: str) -> str:
    if unit == "%":
        return f"{v:.0f}%"
    if unit == "ns":
        return f"{v / 1e3:.4g} us"
    if unit == "B":
        return byte_size(v)
    return f"{v:.4g}"


# ---- text ------------------------------------------------------------------------------------

def kernel_lines(k: dict, many: bool) -> list[str]:
    s = k["summary"]
    head = k["kernel"]
    if many:
        word = k.get("bound") or "unknown"
        head += f" [{k['share_pct']:.0f}% of profiled time, {word}-bound" + (", latency-limited]" if k.get("latency_limited") and word != "latency" else "]")
    facts = [f"{_duration(s['duration_ns'])} under ncu"] if "duration_ns" in s else []
    if k.get("bound_numbers"):
        facts.append(k["bound_numbers"])
    lines = [f"{head}: {'; '.join(facts)}"]
    mem = []
    if "dram_bytes" in s:
        mem.append(f"DRAM {byte_size(s['dram_bytes'])} moved")
    for key, label in (("l2_hit_pct", "L2 hit"), ("l1_hit_pct", "L1 hit")):
        if key in s:
            mem.append(f"{label} {s[key]:.0f}%")
    for op, what in (("ld", "loads"), ("st", "stores")):
        used = s.get(f"{op}_bytes_per_sector")
        if used is not None and (op == "ld" or used < SECTOR_BYTES):
            mem.append(f"global {what} use {used:.1f} of 32 bytes per sector")
    if "shared_conflict_pct" in s:
        mem.append(f"{s['shared_conflict_pct']:.0f}% shared bank conflicts")
    if mem:
        lines.append("  memory: " + ", ".join(mem))
    occ = []
    if "occupancy_achieved_pct" in s:
        occ.append(f"achieved {s['occupancy_achieved_pct']:.0f}%")
    if "occupancy_theoretical_pct" in s:
        theo = s["occupancy_theoretical_pct"]
        occ.append(f"theoretical {theo:.0f}%" + (f" (limited by {s['occupancy_limiter']})"
                                                 if s.get("occupancy_limiter") and theo < 100.0 else ""))
    res = resource_text(s)
    if "waves" in s:
        res += f", {s['waves']:.1f} waves"
    if occ or res:
        lines.append("  occupancy: " + ", ".join(occ) + ("; " if occ and res else "") + res)
    stalls = top_stalls(s)
    if stalls:
        lines.append("  top stalls: " + ", ".join(f"{r} {share:.0f}%" for r, _, share in stalls)
                     + (f" ({s['cycles_per_issue']:.1f} cycles per issued instruction)" if "cycles_per_issue" in s else ""))
    return lines


def resources_line(result, info=None) -> str:
    info = compiled_info(result, info)
    if not info or not info.kernels:
        return "resources: none reported (not compiled)"
    parts = []
    for k in info.kernels.values():
        spill = f"spills {k.spill_stores}/{k.spill_loads} B st/ld" if (k.spill_stores or k.spill_loads) else "no spills"
        extra = f", {k.stack_frame} B stack" if k.stack_frame else ""
        parts.append(f"{k.name} {k.registers} registers, {spill}{extra}, {k.static_shared} B static smem")
    return "resources: " + "; ".join(parts)


def roofline_line(result) -> tuple[str, dict]:
    tm = getattr(result, "timing", None) if result is not None else None
    cand = tm.impls.get("candidate") if tm else None
    if not tm or not cand:
        return "", {}
    data = dict(task_bound=tm.bound, floor_ms=tm.roofline_ms, median_ms=cand.median_ms, pct=cand.pct_of_roofline)
    if cand.pct_of_roofline is None or tm.roofline_ms is None:
        return f"measured: {cand.median_ms:.4g} ms (no roofline for this task)", data
    size = ",".join(f"{k}={v}" for k, v in tm.sizes.items())
    return (f"roofline: {cand.pct_of_roofline:.1f}% of the task's roofline at {size} "
            f"({cand.median_ms:.4g} ms measured, floor {tm.roofline_ms:.4g} ms, {tm.bound}-bound by its byte and FLOP counts)"), data


def diagnose(task=None, result=None, profile: dict | None = None, parent_profile: dict | None = None,
             compile_info=None) -> Diagnosis:
    """The diagnosis of one candidate. Without a profile (not profiled, or no ncu) it says so and
    still reports resources and the roofline; with one it adds the bound, counters and ncu's hints.
    Resources come from ``compile_info`` when given (a candidate profiled without an evaluated result),
    else from the result."""
    lines, data = [], {"profiled": False}
    info = compiled_info(result, compile_info)
    roof, roof_data = roofline_line(result)
    issues = resource_issues(result, info)
    kernels = []
    if profile and profile.get("status") == "ok" and profile.get("kernels"):
        data["profiled"] = True
        kernels = [dict(k, **dict(zip(("bound", "bound_numbers", "latency_limited"), kernel_bound(k["summary"]))))
                   for k in profile["kernels"]]
        many = len(kernels) > 1
        for k in kernels:
            weight = k["share_pct"] / 100.0
            issues += counter_issues(k["kernel"], k["summary"], weight, k["bound"])
            issues += rule_issues(k["kernel"], k.get("rules", []), weight, k["bound"])
        main = max(kernels, key=lambda k: k["share_pct"])
        data["bound"], data["latency_limited"] = main["bound"], main["latency_limited"]
        where = f" (dominated by {main['kernel']}, {main['share_pct']:.0f}% of profiled time)" if many else ""
        lines.append(f"bound: {bound_text(main['bound'], main['latency_limited'])}{where}")
        if roof:
            lines.append(roof)
        for k in kernels:
            lines += kernel_lines(k, many)
        sizes = (roof_data and getattr(result.timing, "sizes", None)) or profile.get("sizes")
        extra = traffic_issue(task, sizes, kernels)
        if extra:
            issues.append(extra)
    else:
        why = (profile or {}).get("reason") or "not profiled"
        lines.append(f"counters: none ({why}); diagnosis from timing and resources only")
        if roof:
            lines.append(roof)
    top = merge_issues(issues)[:ISSUES]
    if top:
        lines.append("top issues:")
        lines += [f"{i + 1}. {issue.render()}" for i, issue in enumerate(top)]
    lines.append(resources_line(result, info))
    delta = changes(profile or {}, parent_profile)
    if delta:
        lines.append("vs parent: " + "; ".join(delta))
    data.update(roofline=roof_data, issues=[i.as_dict() for i in top], changes=delta,
                kernels=[dict(kernel=k["kernel"], share_pct=k["share_pct"], bound=k["bound"],
                              latency_limited=k["latency_limited"]) for k in kernels],
                resources=[k.model_dump() for k in info.kernels.values()] if info else [])
    if profile:
        data["profiler"] = {"status": profile.get("status"), "reason": profile.get("reason", "")}
    return Diagnosis("\n".join(lines), data)


def _duration(ns: float) -> str:
    """``930.5 us``, ``17.27 ms``: microseconds up to a millisecond, then milliseconds."""
    return f"{ns / 1e3:.4g} us" if ns < 1e6 else f"{ns / 1e6:.4g} ms"
