"""Nsight Compute: where ``ncu`` is, the command lines we run, and parsing of its CSV pages.

One profiling run writes a report (``-o``); two imports of that report print the ``details`` page
(sections and ncu's rule results, long format) and the ``raw`` page (every collected metric, wide
format: header row, units row, one row per profiled launch, numbers with thousands separators), both
with every value in its base unit (``--print-units base``).
``tests/fixtures/ncu/capture.sh`` runs the same command lines on a GPU host to record fixtures.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..plumbing.tools import find_tool

# The sections the diagnosis reads (bound, occupancy, launch, stalls, compute pipes) and whose rules it quotes.
# Left out, measured on the H200 with bench/profile_cost.py:
# - SchedulerStats: the diagnosis reads none of its metrics, and its one rule (issue slots) restates the stall
#   reasons WarpStateStats gives.
# - MemoryWorkloadAnalysis_Tables: 13 of 33 replay passes for four numbers the diagnosis reads, collected below as
#   metrics instead (bytes used per global load and store sector, shared-memory wavefronts), and for one rule
#   (MemoryCacheAccessPattern) whose finding, the bytes used per sector, the diagnosis states from those numbers.
# - MemoryWorkloadAnalysis: on its own 9 replay passes, which took 0.9 s more than one pass at softmax's benchmark
#   size. The diagnosis reads none of its numbers that the metrics below and SpeedOfLight do not give (the bytes
#   and hit rates of DRAM, L2 and L1; the units' throughputs), and none of its rules fired in the H200 profiles of
#   softmax, sgemm, a copy, a strided copy and a naive SGEMM. Without it, the profiles of new bests in the
#   candidates' loop took at most 1.77 and 1.87 s in two runs (medians 1.67 and 1.77 s); the last run with it,
#   median 2.73 s and at most 3.18 s.
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "ComputeWorkloadAnalysis")

# Metrics collected beside the sections (most sections already hold the rest).
METRICS = ("gpu__time_duration.sum",
           "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_bytes.sum", "l1tex__t_bytes.sum",
           "lts__t_sector_hit_rate.pct", "l1tex__t_sector_hit_rate.pct",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
           "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
           "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
           "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "sm__maximum_warps_per_active_cycle_pct",
           "launch__registers_per_thread", "launch__occupancy_limit_registers",
           "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks",
           "launch__waves_per_multiprocessor")

# Every other metric the summary reads (``sandbox.profile.counters``), named so that the details page the
# profiling run prints lists it by name: with these, that page holds all the diagnosis needs and no import of the
# report is run. Each is one the sections above collect anyway (no extra replay pass).
SUMMARY_METRICS = ("gpc__cycles_elapsed.avg.per_second",
                   "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                   "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                   "l1tex__throughput.avg.pct_of_peak_sustained_active",
                   "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                   "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                   "sm__inst_executed.avg.per_cycle_active",
                   "smsp__average_warp_latency_per_inst_issued.ratio",
                   "launch__block_size", "launch__grid_size", "launch__occupancy_limit_barriers",
                   "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static",
                   *(f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio" for reason in (
                       "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
                       "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                       "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")))

# The flags that make the profiling run print its details page (rules, and every metric by name, base units)
# into its log file, as an import of the report would print it.
PRINT_DETAILS = ("--csv", "--page", "details", "--print-details", "all", "--print-units", "base",
                 "--print-metric-name", "name")

NCU_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu")


def find_ncu() -> str | None:
    """``$KERNELWRIGHT_NCU``, then ``ncu`` on PATH, then the usual install folders (newest first)."""
    return find_tool("ncu", "KERNELWRIGHT_NCU", NCU_GLOBS)


def kernel_filter(names: list[str]) -> str:
    """An anchored ``-k`` regex over mangled function names (``--kernel-name-base mangled``)."""
    unique = sorted(set(names))
    return "regex:^(" + "|".join(re.escape(n) for n in unique) + ")$"


def profile_command(ncu: str, names: list[str] | None, skip: int, count: int, report: Path, target: list[str],
                    metrics: tuple[str, ...] | bool = True, log: Path | None = None) -> list[str]:
    """The profiling run: the plan's kernels only, past the warm-up, real clocks, fixed sections. ``metrics``:
    True for ``METRICS``, False for none, or the names. With ``log``, ncu's own output goes to that file, the
    details page included (``PRINT_DETAILS``): the profiled program's output, a candidate's printf among it,
    cannot reach it. ``names`` None: the kernels are not known when ncu starts (a run started ahead), so ncu
    profiles what the program launches between its ``cudaProfilerStart`` and ``cudaProfilerStop``."""
    cmd = [ncu, "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
           "--kernel-name-base", "mangled"]
    if names is None:
        cmd += ["--profile-from-start", "off"]
    else:
        cmd += ["-k", kernel_filter(names), "--launch-skip", str(skip), "--launch-count", str(count)]
    for section in SECTIONS:
        cmd += ["--section", section]
    metrics = METRICS if metrics is True else metrics or ()
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    if log is not None:
        cmd += [*PRINT_DETAILS, "--log-file", str(log)]
    return cmd + ["--export", str(report), "--force-overwrite", *target]


def import_command(ncu: str, report: Path, page: str) -> list[str]:
    """Print one page (``details`` or ``raw``) of a report as CSV, every value in its metric's base unit
    (``--print-units base``: bytes, nanoseconds, ... rather than whatever magnitude ncu finds readable)."""
    cmd = [ncu, "--import", str(report), "--csv", "--print-units", "base", "--page", page]
    if page == "details":
        cmd += ["--print-details", "all"]
    return cmd


# ---- what ncu said -------------------------------------------------------------------------

NO_PERMISSION = ("ERR_NVGPUCTRPERM", "LibraryNotLoaded", "permission to access NVIDIA GPU Performance Counters")


def messages(output: str) -> list[str]:
    """ncu's own ``==ERROR==`` / ``==WARNING==`` lines (``==PROF==`` progress lines are dropped)."""
    return [line.strip() for line in output.splitlines()
            if line.startswith(("==ERROR==", "==WARNING==")) or any(k in line for k in NO_PERMISSION)]


def no_permission(output: str) -> str | None:
    """The line that says ncu may not read the counters here (no permission, or a runtime that blocks it)."""
    for line in output.splitlines():
        if any(k in line for k in NO_PERMISSION):
            return line.strip()
    return None


def unknown_option(output: str) -> str | None:
    """The line where ncu refused a command-line option (an older ncu), if it did."""
    for line in output.splitlines():
        low = line.lower()
        if line.startswith("==ERROR==") and "option" in low and any(w in low for w in ("unrecogni", "unknown",
                                                                                         "invalid")):
            return line.strip()
    return None


def unknown_metric(output: str) -> str | None:
    """The line where ncu refused a metric name, if it did."""
    for line in output.splitlines():
        low = line.lower()
        if line.startswith("==ERROR==") and "metric" in low and any(w in low for w in ("not", "invalid", "unknown", "fail")):
            return line.strip()
    return None


# ---- CSV pages -------------------------------------------------------------------------------

_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?$")


def number(text: str) -> float | str | None:
    """A cell as a float (thousands separators dropped), the text itself when it is not a number, or None."""
    text = (text or "").strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    if _NUMBER.match(text):
        return float(text.replace(",", ""))
    return text


def _rows(text: str) -> list[list[str]]:
    """CSV rows from the header (``"ID",...``) on; ncu's ``==`` lines and the program's own output before it are dropped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), len(lines))
    kept = [line for line in lines[start:] if line.strip() and not line.startswith("==")]
    return list(csv.reader(io.StringIO("\n".join(kept))))


_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_PER_SECOND = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "second": 1.0}


def to_base(value: float | str, unit: str) -> tuple[float | str, str]:
    """A raw-page value in our base units' spelling: bytes, nanoseconds, hertz, and rates per second.

    The pages are imported with ``--print-units base``, so ncu's values are already in base units
    (``byte``, ``nsecond``, ``byte/second``) and only the spelling changes. A page printed without that
    option (a report imported by hand, an ncu that ignores it) has units scaled for reading (``Gbyte``,
    ``ms``, ``Kbyte/block``; SI prefixes: 1 Kbyte = 1000 bytes); the units row says which, and the
    value is scaled back.
    """
    if isinstance(value, str):
        return value, unit
    head, sep, tail = unit.partition("/")
    scale, base = 1.0, head
    if head.endswith("byte") and head[:-4] in _SI:
        scale, base = _SI[head[:-4]], "byte"
    elif head in _TIME_NS:
        scale, base = _TIME_NS[head], "ns"
    elif head.lower().endswith("hz") and head[:-2] in _SI:
        scale, base = _SI[head[:-2]], "hz"
    if sep and tail in _PER_SECOND:
        return value * scale / _PER_SECOND[tail], f"{base}/s"
    return value * scale, base + (sep + tail if sep else "")


def parse_raw(text: str) -> list[dict]:
    """``--page raw --csv``: one dict per profiled launch, in profiling order.

    Each dict: ``id`` (int), ``kernel`` (ncu's name), ``metrics`` (metric name -> float or text, base units)
    and ``units`` (metric name -> unit). Columns without ``__`` (process, grid, ...) go into ``launch``.
    """
    rows = _rows(text)
    if len(rows) < 2:
        return []
    header, units = rows[0], rows[1]
    out = []
    for row in rows[2:]:
        cells = dict(zip(header, row))
        metrics, unit_of, launch = {}, {}, {}
        for i, name in enumerate(header):
            value = number(row[i]) if i < len(row) else None
            if "__" in name:
                if value is not None:
                    metrics[name], unit_of[name] = to_base(value, units[i] if i < len(units) else "")
            else:
                launch[name] = row[i] if i < len(row) else ""
        out.append(dict(id=_int(cells.get("ID")), kernel=cells.get("Kernel Name", ""), metrics=metrics, units=unit_of,
                        launch=launch))
    return out


def parse_details(text: str) -> dict[int, dict]:
    """``--page details --csv`` (long format): per launch ID, the section metrics and the rule results.

    ``sections``: section -> {metric label: (value, unit)}; ``rules``: dicts with ``section``, ``rule``,
    ``type`` (OPT, WRN, INF), ``message``, ``speedup`` (ncu's estimated speedup in %, or None) and
    ``speedup_type`` (``global``: of the whole kernel; ``local``: of the one hardware unit the rule is about).
    """
    rows = _rows(text)
    if not rows:
        return {}
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    message_col = next((i for name, i in col.items() if "Description" in name or "Message" in name), None)
    speedup_col = col.get("Estimated Speedup")
    out: dict[int, dict] = {}

    def cell(row: list[str], name: str) -> str:
        i = col.get(name)
        return row[i].strip() if i is not None and i < len(row) else ""

    for row in rows[1:]:
        launch = _int(cell(row, "ID"))
        entry = out.setdefault(launch, dict(kernel=cell(row, "Kernel Name"), sections={}, rules=[]))
        section = cell(row, "Section Name")
        rule = cell(row, "Rule Name")
        if rule:
            speed = number(row[speedup_col]) if speedup_col is not None and speedup_col < len(row) else None
            message = row[message_col].strip() if message_col is not None and message_col < len(row) else ""
            entry["rules"].append(dict(section=section, rule=rule, type=cell(row, "Rule Type"), message=message,
                                       speedup=speed if isinstance(speed, float) else None,
                                       speedup_type=cell(row, "Estimated Speedup Type")))
        label = cell(row, "Metric Name")
        if label:
            entry["sections"].setdefault(section, {})[label] = (number(cell(row, "Metric Value")), cell(row, "Metric Unit"))
    return out


def _int(text: str | None) -> int:
    try:
        return int(str(text).replace(",", "").strip())
    except ValueError:
        return -1


def launches_from_details(details_text: str) -> list[dict]:
    """The launches of a details page printed with metric names (``PRINT_DETAILS``), in the shape ``launches``
    gives: every metric named on the page (the sections' and the ``--metrics``) as the raw page would hold it."""
    out = []
    for launch, d in sorted(parse_details(details_text).items()):
        metrics, units = {}, {}
        for section in d["sections"].values():
            for name, (value, unit) in section.items():
                if "__" in name and value is not None:
                    metrics[name], units[name] = to_base(value, unit)
        if metrics:
            out.append(dict(id=launch, kernel=d["kernel"], metrics=metrics, units=units, launch={},
                            sections=d["sections"], rules=d["rules"]))
    return out


def launches(raw_text: str, details_text: str) -> list[dict]:
    """Raw metrics and details (sections, rules) of each profiled launch, joined on ncu's launch ID."""
    details = parse_details(details_text)
    out = []
    for row in parse_raw(raw_text):
        d = details.get(row["id"], {})
        out.append({**row, "sections": d.get("sections", {}), "rules": d.get("rules", [])})
    return out
