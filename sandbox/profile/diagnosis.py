"""The diagnosis: what bounds a candidate, how far from the roofline it is, its top three issues with
their numbers, and what changed against its parent; short text for the model and a dict for traces.

Inputs are values already measured elsewhere: the compiler's resource report (every candidate), the
timing stage's roofline (when timed) and the profile's counters (when profiled; see
``sandbox.profile``). Nothing here runs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .counters import top_stalls

LATENCY_BELOW_PCT = 60.0   # ncu's own guideline: throughput below 60% of peak points at latency
IDLE_BELOW_PCT = 20.0
SECTOR_BYTES = 32.0
ISSUES = 3

STALL_HINTS = {
    "long_scoreboard": "waiting on global/local memory through L1TEX",
    "short_scoreboard": "waiting on shared memory or special math (MUFU)",
    "mio_throttle": "the shared-memory / special-instruction queue is full",
    "lg_throttle": "the global/local memory instruction queue is full",
    "barrier": "waiting at a block barrier (__syncthreads)",
    "membar": "waiting on a memory fence",
    "math_pipe_throttle": "a math pipe is saturated",
    "tex_throttle": "the texture/L1TEX pipe is saturated",
    "wait": "fixed-latency dependencies between instructions",
    "dispatch_stall": "the dispatcher could not issue",
    "branch_resolving": "waiting for branch targets",
    "no_instructions": "instruction cache misses",
    "imc_miss": "constant cache misses",
    "drain": "waiting for memory stores to drain at exit",
    "sleeping": "threads sleeping (nanosleep, divergent yields)",
}
UNIT_NAMES = {"dram_pct": "DRAM", "l2_pct": "L2", "l1_pct": "L1/shared"}
TOPICS = (("occupancy", ("Occupancy",)), ("stalls", ("Stall", "CPI", "IssueSlot")),
          ("coalescing", ("Coalesc", "AccessPattern", "Sector")), ("bank", ("Bank", "Conflict")),
          ("launch", ("Wave", "Tail", "LaunchConfiguration")), ("pipes", ("PipeUtilization",)), ("bound", ("SOL",)))


@dataclass
class Diagnosis:
    text: str
    data: dict = field(default_factory=dict)


@dataclass
class Issue:
    text: str
    priority: float
    source: str          # "resources", "counters" or "ncu:<RuleName>"
    kernel: str = ""
    topic: str = ""
    gain: float | None = None   # ncu's estimated speedup in %, where a rule gave one

    def render(self) -> str:
        return self.text + (f" (ncu estimates up to {self.gain:.0f}% shorter runtime)" if self.gain else "")

    def as_dict(self) -> dict:
        return dict(text=self.render(), priority=round(self.priority, 2), source=self.source, kernel=self.kernel,
                    topic=self.topic, ncu_gain_pct=self.gain)


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


# ---- issues ----------------------------------------------------------------------------------

def _compiled(result, info=None):
    """The compiler's report: ``info`` if given, else the result's."""
    return info if info is not None else (result.compile if result is not None else None)


def resource_issues(result, info=None) -> list[Issue]:
    issues = []
    info = _compiled(result, info)
    kernels = info.kernels.values() if info else []
    for k in kernels:
        if k.spill_stores or k.spill_loads:
            issues.append(Issue(f"register spills in {k.name}: {k.spill_stores} B stored / {k.spill_loads} B loaded "
                                f"per thread to local memory ({k.registers} registers)", 40.0, "resources", k.name, "spills"))
        elif k.stack_frame:
            issues.append(Issue(f"local memory in {k.name}: a {k.stack_frame} B stack frame per thread "
                                "(local arrays indexed at run time)", 15.0, "resources", k.name, "spills"))
    return issues


def counter_issues(name: str, s: dict, weight: float, bound: str | None) -> list[Issue]:
    """Issues read from one launch's summary. Priorities approximate the share of time at stake
    (the scale of ncu's estimated speedups), times ``weight``, the launch's share of the time."""
    out = []
    mem = s.get("memory_pct", 0.0)
    poor = [(what, s[f"{op}_bytes_per_sector"]) for op, what in (("ld", "loads"), ("st", "stores"))
            if s.get(f"{op}_bytes_per_sector") is not None and s[f"{op}_bytes_per_sector"] < 0.6 * SECTOR_BYTES]
    if poor:
        worst = min(b for _, b in poor)
        detail = ", ".join(f"{what} use {b:.1f} of 32 bytes per sector" for what, b in poor)
        spr = s.get("ld_sectors_per_request")
        extra = f"; {spr:.1f} sectors per load request" if spr is not None else ""
        out.append(Issue(f"uncoalesced global memory access in {name}: {detail}{extra} "
                         "(neighbouring threads should touch neighbouring addresses)",
                         (1.0 - worst / SECTOR_BYTES) * mem * weight, "counters", name, "coalescing"))
    dram = s.get("dram_pct")
    if bound == "memory" and dram is not None and dram < 80.0 and not poor:
        rate = s.get("dram_bytes", 0.0) / (s["duration_ns"] * 1e-9) if s.get("duration_ns") else 0.0
        at = f" ({rate / 1e12:.2f} TB/s)" if rate else ""
        out.append(Issue(f"{name} is memory-bound but DRAM runs at {dram:.0f}% of peak{at}: keep more bytes in flight "
                         "(wider or more independent loads per thread)", (90.0 - dram) * weight, "counters", name,
                         "bandwidth"))
    if bound == "cache":
        unit = max(("l1_pct", "l2_pct"), key=lambda k: s.get(k, 0.0))
        busy = s.get(unit, 0.0)
        out.append(Issue(f"{name} is limited by {UNIT_NAMES[unit]} throughput ({busy:.0f}% of peak) while DRAM runs at "
                         f"{s.get('dram_pct', 0.0):.0f}%: reuse data from registers or shared memory (tiling) so that "
                         "fewer memory instructions reach the cache", max(busy - 40.0, 10.0) * weight, "counters", name,
                         "reuse"))
    conflict = s.get("shared_conflict_pct")
    if conflict is not None and conflict > 10.0:
        n = s.get("shared_ld_conflicts", 0.0) + s.get("shared_st_conflicts", 0.0)
        out.append(Issue(f"shared-memory bank conflicts in {name}: {conflict:.0f}% of shared-memory wavefronts are "
                         f"extra ({n:,.0f} conflicts)", conflict * 0.5 * weight, "counters", name, "bank"))
    theo, ach = s.get("occupancy_theoretical_pct"), s.get("occupancy_achieved_pct")
    limiter = s.get("occupancy_limiter")
    if theo is not None and theo < 50.0:
        lim = f", limited by {limiter}" if limiter else ""
        out.append(Issue(f"low occupancy in {name}: theoretical {theo:.0f}%{lim} ({_resource_text(s)})",
                         (100.0 - theo) * 0.5 * weight, "counters", name, "occupancy"))
    elif theo is not None and ach is not None and ach < 0.8 * theo:
        out.append(Issue(f"occupancy in {name}: achieved {ach:.0f}% of a theoretical {theo:.0f}% "
                         "(uneven work between warps or blocks, or a tail)", (theo - ach) * weight, "counters", name,
                         "occupancy"))
    stalls = top_stalls(s, 1)
    if stalls and stalls[0][2] >= 30.0:
        reason, _, share = stalls[0]
        hint = STALL_HINTS.get(reason, "")
        cpi = f", {s['cycles_per_issue']:.1f} cycles between a warp's instructions" if "cycles_per_issue" in s else ""
        out.append(Issue(f"warp stalls in {name}: {reason} is {share:.0f}% of stall cycles"
                         + (f" ({hint})" if hint else "") + cpi, share * 0.5 * weight, "counters", name, "stalls"))
    waves = s.get("waves")
    if waves is not None and waves < 1.0:
        out.append(Issue(f"grid too small in {name}: {waves:.2f} waves ({s.get('grid_size', 0):.0f} blocks) leave SMs idle",
                         (1.0 - waves) * 100.0 * weight, "counters", name, "launch"))
    return out


def _topic(rule: str) -> str:
    for topic, words in TOPICS:
        if any(w.lower() in rule.lower() for w in words):
            return topic
    return ""


def rule_issues(name: str, rules: list[dict], weight: float, bound: str | None) -> list[Issue]:
    """ncu's OPT/WRN rule results. Its hints about idle compute pipes are dropped unless the launch is
    compute-bound (for the others they restate the bound); local estimates (one unit's gain, not the
    kernel's) rank at half weight and are not quoted as speedups."""
    out = []
    for r in rules:
        topic = _topic(r["rule"])
        message = r.get("message", "")
        if r.get("type") not in ("OPT", "WRN") or topic == "bound" or "optional metric" in message:
            continue
        if topic == "pipes" and bound != "compute":
            continue
        gain = r.get("speedup")
        is_global = r.get("speedup_type", "global") != "local"
        priority = (gain or 5.0) * (1.0 if is_global else 0.5) * weight
        text = _first_sentences(message) or r["rule"]
        out.append(Issue(f"{r['rule']} in {name}: {text}", priority, f"ncu:{r['rule']}", name, topic,
                         gain if gain and is_global else None))
    return out


def _first_sentences(text: str, limit: int = 280) -> str:
    """The sentences of a rule message that carry numbers (in order), else its first ones, within ``limit``."""
    sentences = [x for x in re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(text.split())) if x]
    chosen = [x for x in sentences if re.search(r"\d", x) and "http" not in x] or sentences[:2]
    out = ""
    for sentence in chosen:
        if out and len(out) + 1 + len(sentence) > limit:
            break
        out = f"{out} {sentence}".strip()
    return out if len(out) <= limit else out[: limit - 3].rstrip() + "..."


def merge_issues(issues: list[Issue]) -> list[Issue]:
    """One issue per (kernel, topic): our own numbers where we have them, ncu's largest estimate."""
    groups: dict[tuple, list[Issue]] = {}
    for issue in issues:
        key = (issue.kernel, issue.topic) if issue.topic else (issue.kernel, issue.source, issue.text)
        groups.setdefault(key, []).append(issue)
    merged = []
    for group in groups.values():
        own = [i for i in group if not i.source.startswith("ncu:")]
        base = max(own or group, key=lambda i: i.priority)
        gains = [i.gain for i in group if i.gain]
        merged.append(Issue(base.text, max(i.priority for i in group), base.source, base.kernel, base.topic,
                            max(gains) if gains else None))
    return sorted(merged, key=lambda i: -i.priority)


def traffic_issue(task, sizes: dict | None, kernels: list[dict]) -> Issue | None:
    """DRAM bytes moved against the task's minimum (its roofline byte count)."""
    if task is None or not sizes:
        return None
    moved = sum(k["summary"].get("dram_bytes", 0.0) for k in kernels)
    need = float(task.bytes(sizes))
    if moved <= 0 or need <= 0 or moved < 1.5 * need:
        return None
    ratio = moved / need
    return Issue(f"DRAM traffic is {ratio:.1f}x the task's minimum ({_bytes(moved)} moved for {_bytes(need)} needed): "
                 "data is read or written more than once", min(40.0, (ratio - 1.0) * 10.0), "counters", "", "traffic")


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
        return _bytes(v)
    return f"{v:.4g}"


def _bytes(v: float) -> str:
    return f"{v / 1e9:.2f} GB" if v >= 1e9 else f"{v / 1e6:.1f} MB"


# ---- text ------------------------------------------------------------------------------------

def _resource_text(s: dict) -> str:
    parts = []
    if "registers" in s:
        parts.append(f"{s['registers']:.0f} registers/thread")
    shared = s.get("shared_static_bytes", 0.0) + s.get("shared_dynamic_bytes", 0.0)
    if shared:
        parts.append(f"{shared / 1024:.1f} KiB shared/block")
    if "block_size" in s:
        parts.append(f"{s['block_size']:.0f} threads/block")
    return ", ".join(parts)


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
        mem.append(f"DRAM {_bytes(s['dram_bytes'])} moved")
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
    res = _resource_text(s)
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
    info = _compiled(result, info)
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
    info = _compiled(result, compile_info)
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
