"""The issues of one candidate, each with its numbers and a priority: from the compiler's resource report (spills,
local memory), a launch's counters (coalescing, bandwidth, cache reuse, bank conflicts, occupancy, stalls, waves),
ncu's own rules and the DRAM traffic against the task's minimum; one issue per kernel and topic after merging.
``sandbox.profile.diagnosis`` ranks them into the diagnosis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .counters import top_stalls

SECTOR_BYTES = 32.0
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


def compiled_info(result, info=None):
    """The compiler's report: ``info`` if given, else the result's."""
    return info if info is not None else (result.compile if result is not None else None)


def resource_issues(result, info=None) -> list[Issue]:
    issues = []
    info = compiled_info(result, info)
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
        out.append(Issue(f"low occupancy in {name}: theoretical {theo:.0f}%{lim} ({resource_text(s)})",
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
    return Issue(f"DRAM traffic is {ratio:.1f}x the task's minimum ({byte_size(moved)} moved for {byte_size(need)} needed): "
                 "data is read or written more than once", min(40.0, (ratio - 1.0) * 10.0), "counters", "", "traffic")


def byte_size(v: float) -> str:
    return f"{v / 1e9:.2f} GB" if v >= 1e9 else f"{v / 1e6:.1f} MB"


def resource_text(s: dict) -> str:
    parts = []
    if "registers" in s:
        parts.append(f"{s['registers']:.0f} registers/thread")
    shared = s.get("shared_static_bytes", 0.0) + s.get("shared_dynamic_bytes", 0.0)
    if shared:
        parts.append(f"{shared / 1024:.1f} KiB shared/block")
    if "block_size" in s:
        parts.append(f"{s['block_size']:.0f} threads/block")
    return ", ".join(parts)
