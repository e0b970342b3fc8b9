"""Nsight Compute: where ``ncu`` is, the command lines we run, and parsing of its CSV pages.

One profiling run writes a report (``-o``); two imports of that report print the ``details`` page
(sections and ncu's rule results, long format) and the ``raw`` page (every collected metric, wide
format: header row, units row, one row per profiled launch, numbers with thousands separators).
``tests/fixtures/ncu/capture.sh`` runs the same command lines on a GPU host to record fixtures.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from pathlib import Path

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "Occupancy", "LaunchStats",
            "WarpStateStats", "ComputeWorkloadAnalysis", "SchedulerStats")

# Metrics collected beside the sections (most sections already hold the rest).
METRICS = ("gpu__time_duration.sum",
           "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_bytes.sum", "l1tex__t_bytes.sum",
           "lts__t_sector_hit_rate.pct", "l1tex__t_sector_hit_rate.pct",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "sm__maximum_warps_per_active_cycle_pct",
           "launch__registers_per_thread", "launch__occupancy_limit_registers",
           "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks",
           "launch__waves_per_multiprocessor")

NCU_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu")


def find_ncu() -> str | None:
    """``$KERNELWRIGHT_NCU``, then ``ncu`` on PATH, then the usual install folders (newest first)."""
    explicit = os.environ.get("KERNELWRIGHT_NCU")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which("ncu")
    if on_path:
        return on_path
    for pattern in NCU_GLOBS:
        found = sorted(glob.glob(pattern), key=_version_key, reverse=True)
        for path in found:
            if os.access(path, os.X_OK):
                return path
    return None


def _version_key(path: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"[^0-9A-Za-z]+", path)]


def kernel_filter(names: list[str]) -> str:
    """An anchored ``-k`` regex over mangled function names (``--kernel-name-base mangled``)."""
    unique = sorted(set(names))
    return "regex:^(" + "|".join(re.escape(n) for n in unique) + ")$"


def profile_command(ncu: str, names: list[str], skip: int, count: int, report: Path, target: list[str],
                    metrics: bool = True) -> list[str]:
    """The profiling run: the plan's kernels only, past the warm-up, real clocks, fixed sections."""
    cmd = [ncu, "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
           "--kernel-name-base", "mangled", "-k", kernel_filter(names),
           "--launch-skip", str(skip), "--launch-count", str(count)]
    for section in SECTIONS:
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(METRICS)]
    return cmd + ["--export", str(report), "--force-overwrite", *target]


def import_command(ncu: str, report: Path, page: str) -> list[str]:
    """Print one page (``details`` or ``raw``) of a report as CSV."""
    cmd = [ncu, "--import", str(report), "--csv", "--page", page]
    if page == "details":
        cmd += ["--print-details", "all"]
    return cmd
