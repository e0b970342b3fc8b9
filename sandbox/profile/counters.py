"""Nsight Compute metrics of one launch, distilled into a flat dict of the numbers a diagnosis uses.

Every field is optional: a metric ncu did not report (another GPU, another ncu version) is simply
absent from the summary, never guessed. Names are ncu's base-unit metrics (``--page raw``).
"""

from __future__ import annotations

import re

FIELDS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("gpu__time_duration.sum",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "l1_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "l2_bytes": ("lts__t_bytes.sum",),
    "l1_bytes": ("l1tex__t_bytes.sum",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "st_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "ld_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",),
    "st_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",),
    "shared_ld_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "shared_st_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "shared_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "shared_st_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "occupancy_achieved_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "occupancy_theoretical_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers": ("launch__registers_per_thread",),
    "shared_static_bytes": ("launch__shared_mem_per_block_static",),
    "shared_dynamic_bytes": ("launch__shared_mem_per_block_dynamic",),
    "block_size": ("launch__block_size",),
    "grid_size": ("launch__grid_size",),
    "waves": ("launch__waves_per_multiprocessor",),
    "ipc": ("sm__inst_executed.avg.per_cycle_active", "smsp__inst_executed.avg.per_cycle_active"),
    "cycles_per_issue": ("smsp__average_warp_latency_per_inst_issued.ratio",),
    "sm_clock_hz": ("gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"),
}

_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_LIMIT = re.compile(r"^launch__occupancy_limit_(\w+)$")
NOT_STALLS = ("selected", "not_selected")  # issuing, or eligible and passed over: not a problem


def _pick(metrics: dict, names: tuple[str, ...]) -> float | None:
    for name in names:
        value = metrics.get(name)
        if isinstance(value, float):
            return value
    return None


def summarize(metrics: dict[str, float | str]) -> dict:
    """The flat summary of one launch's raw metrics (see ``FIELDS``), plus derived numbers:
    sectors per request, shared-memory conflict share, stall reasons (warps per issued instruction,
    largest first) and the occupancy limiter (the resource allowing the fewest blocks per SM)."""
    out: dict = {}
    for field, names in FIELDS.items():
        value = _pick(metrics, names)
        if value is not None:
            out[field] = value
    if "dram_read_bytes" in out or "dram_write_bytes" in out:
        out["dram_bytes"] = out.get("dram_read_bytes", 0.0) + out.get("dram_write_bytes", 0.0)
    for op in ("ld", "st"):
        sectors, requests = out.get(f"{op}_sectors"), out.get(f"{op}_requests")
        if sectors is not None and requests:
            out[f"{op}_sectors_per_request"] = sectors / requests
    conflicts = out.get("shared_ld_conflicts", 0.0) + out.get("shared_st_conflicts", 0.0)
    wavefronts = out.get("shared_ld_wavefronts", 0.0) + out.get("shared_st_wavefronts", 0.0)
    if wavefronts > 0:
        out["shared_conflict_pct"] = 100.0 * conflicts / wavefronts
    stalls = {}
    for name, value in metrics.items():
        m = _STALL.match(name)
        if m and isinstance(value, float):
            stalls[m.group(1)] = value
    if stalls:
        out["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    limits = {m.group(1): v for name, v in metrics.items() if (m := _LIMIT.match(name)) and isinstance(v, float)}
    if limits:
        out["occupancy_limits"] = limits
        out["occupancy_limiter"] = min(limits, key=lambda k: limits[k])
    return out


def top_stalls(summary: dict, k: int = 3) -> list[tuple[str, float, float]]:
    """(reason, warps per issued instruction, share of all stall cycles in %) of the largest stalls."""
    stalls = summary.get("stalls") or {}
    total = sum(stalls.values())
    real = [(r, v) for r, v in stalls.items() if r not in NOT_STALLS and v > 0]
    return [(r, v, 100.0 * v / total if total else 0.0) for r, v in real[:k]]
