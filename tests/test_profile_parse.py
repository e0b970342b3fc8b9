"""Parsing Nsight Compute's CSV pages, captured on an H200 (ncu 2025.3.1) for three kernels in one
process: a copy (memory-bound), a strided access (uncoalesced) and a naive SGEMM (L1-bound)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.profile import ncu
from sandbox.profile.counters import summarize, top_stalls
from sandbox.profile.diagnosis import diagnose, kernel_bound
from sandbox.host.profiler import kernels_from

pytestmark = pytest.mark.timeout(60)
FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
PLAN = {"launches": [{"kernel": "copy"}, {"kernel": "strided"}, {"kernel": "sgemm"}]}


@pytest.fixture(scope="module")
def pages() -> tuple[str, str]:
    return (FIXTURES / "ncu_raw.csv").read_text(), (FIXTURES / "ncu_details.csv").read_text()


@pytest.fixture(scope="module")
def kernels(pages) -> list[dict]:
    return kernels_from(ncu.launches(*pages), PLAN)


def alone(kernel: dict) -> dict:
    return {"status": "ok", "kernels": [dict(kernel, share_pct=100.0)]}


def test_raw_page_gives_one_row_per_profiled_launch_in_order_despite_program_output(pages):
    rows = ncu.parse_raw(pages[0])
    assert [r["id"] for r in rows] == [0, 1, 2]
    assert [r["kernel"] for r in rows] == ["copy_kernel", "strided_kernel", "naive_sgemm"]
    assert all(len(r["metrics"]) > 500 for r in rows)


def test_raw_numbers_lose_thousands_separators_and_keep_base_units(pages):
    copy = ncu.parse_raw(pages[0])[0]
    assert copy["metrics"]["launch__grid_size"] == 262144.0
    assert copy["metrics"]["dram__bytes_read.sum"] == 268444928.0
    assert copy["units"]["dram__bytes_read.sum"] == "byte"
    assert copy["units"]["gpu__time_duration.sum"] == "ns"
    assert copy["launch"]["Block Size"] == "(256, 1, 1)"


def test_non_numeric_cells_stay_text_and_empty_ones_vanish(pages):
    metrics = ncu.parse_raw(pages[0])[0]["metrics"]
    assert metrics["launch__func_cache_config"] == "CachePreferNone"
    assert metrics["sass__inst_executed_register_spilling_mem_local"] == "no data"
    assert all(v is not None for v in metrics.values())


@pytest.mark.parametrize("text, value", [("1,980,000", 1980000.0), ("71.23", 71.23), ("-4", -4.0), ("1.5e+03", 1500.0),
                                         ("n/a", None), ("", None), ("12,3", "12,3"), ("(256, 1, 1)", "(256, 1, 1)")])
def test_cell_numbers(text, value):
    assert ncu.number(text) == value


def test_details_page_gives_section_metrics_and_rules_per_launch(pages):
    details = ncu.parse_details(pages[1])
    assert sorted(details) == [0, 1, 2]
    sol = details[0]["sections"]["GPU Speed Of Light Throughput"]
    assert sol["Duration"] == (197856.0, "ns")
    rules = {(r["rule"], r["type"]) for r in details[1]["rules"]}
    assert ("MemoryCacheAccessPattern", "OPT") in rules and ("SOLBottleneck", "OPT") in rules


def test_rules_carry_estimated_speedup_its_kind_and_the_message(pages):
    strided = ncu.parse_details(pages[1])[1]["rules"]
    access = [r for r in strided if r["rule"] == "MemoryCacheAccessPattern"]
    assert access and all(r["speedup"] == 58.24 and r["speedup_type"] == "global" for r in access)
    assert "4.0 of the 32 bytes" in access[0]["message"]
    pipes = next(r for r in strided if r["rule"] == "HighPipeUtilization" and r["type"] == "OPT")
    assert pipes["speedup_type"] == "local"
    info = [r for r in strided if r["type"] == "INF"]
    assert all(r["speedup"] is None for r in info)


def test_summary_reads_sector_use_stalls_and_occupancy(kernels):
    copy, strided, sgemm = (k["summary"] for k in kernels)
    assert copy["ld_bytes_per_sector"] == 32.0 and strided["ld_bytes_per_sector"] == 4.0
    assert sgemm["ld_bytes_per_sector"] == 18.0
    assert strided["ld_sectors_per_request"] == 32.0 and copy["ld_sectors_per_request"] == 4.0
    assert copy["dram_bytes"] == 268444928.0 + 249240832.0
    assert copy["occupancy_theoretical_pct"] == 100.0 and copy["occupancy_achieved_pct"] == 71.07
    assert copy["occupancy_limiter"] == "warps"
    reason, _, share = top_stalls(copy, 1)[0]
    assert reason == "long_scoreboard" and share > 50.0
    assert "selected" not in [r for r, _, _ in top_stalls(sgemm, 10)]


def test_shares_follow_ncu_durations_and_names_come_from_the_plan(kernels):
    assert [k["kernel"] for k in kernels] == ["copy", "strided", "sgemm"]
    assert [k["ncu_name"] for k in kernels] == ["copy_kernel", "strided_kernel", "naive_sgemm"]
    assert sum(k["share_pct"] for k in kernels) == pytest.approx(100.0)
    assert max(kernels, key=lambda k: k["share_pct"])["kernel"] == "strided"


def test_copy_is_diagnosed_memory_bound_and_latency_limited(kernels):
    bound, numbers, limited = kernel_bound(kernels[0]["summary"])
    assert (bound, limited) == ("memory", True)
    assert "DRAM 54%" in numbers
    text = diagnose(profile=alone(kernels[0])).text
    assert text.startswith("bound: memory-bound")
    assert "long_scoreboard" in text.split("top issues:")[1]


def test_strided_access_leads_with_poor_sector_use(kernels):
    d = diagnose(profile=alone(kernels[1]))
    assert d.data["bound"] == "memory"
    first = d.data["issues"][0]
    assert first["topic"] == "coalescing" and "4.0 of 32 bytes" in first["text"]
    assert first["ncu_gain_pct"] == 58.24
    assert "1. uncoalesced global memory access in strided" in d.text


def test_naive_sgemm_is_not_called_memory_bound(kernels):
    d = diagnose(profile=alone(kernels[2]))
    assert d.data["bound"] == "cache"
    assert "memory-bound" not in d.text.splitlines()[0]
    assert "tiling" in d.data["issues"][0]["text"]


def test_local_estimates_are_not_quoted_as_speedups(kernels):
    d = diagnose(profile=alone(kernels[0]))
    assert "HighPipeUtilization" not in d.text, "idle compute pipes restate a memory bound"
    assert all(i["ncu_gain_pct"] in (None, 45.62, 28.97) for i in d.data["issues"])


def test_multi_kernel_plan_names_its_dominant_kernel_and_ranks_issues_by_share(kernels):
    d = diagnose(profile={"status": "ok", "kernels": kernels})
    assert "dominated by strided, 84% of profiled time" in d.text.splitlines()[0]
    assert [k["kernel"] for k in d.data["kernels"]] == ["copy", "strided", "sgemm"]
    assert d.data["issues"][0]["kernel"] == "strided"
    assert len(d.data["issues"]) == 3


def test_ncu_messages_permission_and_unknown_metric_lines():
    output = ("==PROF== Connected to process 470\n"
              "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0.\n==PROF== Disconnected from process 470\n")
    assert ncu.no_permission(output).startswith("==ERROR== ERR_NVGPUCTRPERM")
    assert ncu.messages(output) == [output.splitlines()[1]]
    assert ncu.no_permission("==PROF== Connected to process 1\n") is None
    assert ncu.unknown_metric("==ERROR== Failed to find metric not_a_metric__at_all.sum\n")
    assert ncu.unknown_metric(output) is None


def test_kernel_filter_is_anchored_and_escaped():
    assert ncu.kernel_filter(["b", "a", "b"]) == "regex:^(a|b)$"
    assert ncu.kernel_filter(["_Z1kILi16EEvPf"]) == "regex:^(_Z1kILi16EEvPf)$"
    assert ncu.kernel_filter(["a.b"]) == r"regex:^(a\.b)$"


def test_profile_command_uses_real_clocks_fixed_sections_and_the_plan_window(tmp_path):
    cmd = ncu.profile_command("ncu", ["k1", "k2"], 6, 2, tmp_path / "r", ["python", "-m", "x"])
    joined = " ".join(cmd)
    assert "--clock-control none" in joined and "--kernel-name-base mangled" in joined
    assert "--launch-skip 6 --launch-count 2" in joined
    assert all(f"--section {s}" in joined for s in ncu.SECTIONS)
    assert cmd[-3:] == ["python", "-m", "x"]
    assert "--metrics" not in ncu.profile_command("ncu", ["k"], 0, 1, tmp_path / "r", ["p"], metrics=False)


def test_every_metric_the_summary_reads_is_named_in_the_profiling_run():
    """The summary depends on no section for its numbers: each field's metric, every stall reason and occupancy limit
    is asked for by name (``--metrics``), so a section left out for its replay passes takes no field with it."""
    from sandbox.profile import counters

    named = set(ncu.METRICS + ncu.SUMMARY_METRICS)
    assert all(names[0] in named for names in counters.FIELDS.values()), \
        sorted(f for f, names in counters.FIELDS.items() if names[0] not in named)
    stalls = [m for m in named if counters._STALL.match(m)]
    limits = {m.removeprefix("launch__occupancy_limit_") for m in named if counters._LIMIT.match(m)}
    assert len(stalls) >= 19 and {"registers", "shared_mem", "warps", "blocks", "barriers"} <= limits
    assert "MemoryWorkloadAnalysis" not in ncu.SECTIONS and "MemoryWorkloadAnalysis_Tables" not in ncu.SECTIONS


def test_capture_script_builds_its_command_lines_from_the_sandbox_module():
    script = (FIXTURES / "capture.sh").read_text()
    assert "ncu.profile_command(" in script and "ncu.import_command(" in script
