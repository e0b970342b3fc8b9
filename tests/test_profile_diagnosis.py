"""The diagnosis from resources and timing alone, from counters, and against a parent's profile."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from sandbox import load_task
from sandbox.host.profiler import kernels_from
from sandbox.judging.result import CompileInfo, ImplTiming, Interval, KernelResources, Result, Status, Timing
from sandbox.profile import ncu
from sandbox.profile.diagnosis import diagnose

pytestmark = pytest.mark.timeout(60)
FIXTURES = Path(__file__).parent / "fixtures" / "ncu"


def result(spills: int = 0, stack: int = 0, median_ms: float | None = None) -> Result:
    kernels = {"k": KernelResources(name="k", registers=255 if spills else 32, spill_stores=spills, spill_loads=spills,
                                    stack_frame=stack, static_shared=4096)}
    info = CompileInfo(ok=True, arch="sm_90", nvrtc_version="13.0", options=[], kernels=kernels)
    timing = None
    if median_ms is not None:
        impl = ImplTiming(samples_ms=[median_ms], median_ms=median_ms, ci_ms=Interval(value=median_ms, low=median_ms,
                                                                                     high=median_ms), pct_of_roofline=25.0)
        timing = Timing(sizes={"n": 1024}, rounds=10, l2_flush_bytes=1, rotating_sets=2, impls={"candidate": impl},
                        roofline_ms=median_ms / 4, bound="memory")
    return Result(status=Status.ok, task="t", task_fingerprint="f", candidate="c", candidate_key="key", compile=info,
                  timing=timing)


@pytest.fixture(scope="module")
def copy_profile() -> dict:
    rows = ncu.launches((FIXTURES / "ncu_raw.csv").read_text(), (FIXTURES / "ncu_details.csv").read_text())
    first = kernels_from(rows, {"launches": [{"kernel": "k"}]})[0]
    return {"status": "ok", "kernels": [dict(first, share_pct=100.0)], "timing": {"median_ms": 0.2}}


def test_unprofiled_candidate_still_gets_resources_and_says_why_there_are_no_counters():
    d = diagnose(result=result(), profile={"status": "unavailable", "reason": "ncu not found"})
    assert d.text.splitlines()[0] == "counters: none (ncu not found); diagnosis from timing and resources only"
    assert "resources: k 32 registers, no spills, 4096 B static smem" in d.text
    assert d.data["profiled"] is False and d.data["resources"][0]["registers"] == 32


def test_spills_are_the_first_issue_even_without_counters():
    d = diagnose(result=result(spills=128))
    assert d.data["issues"][0]["topic"] == "spills"
    assert "128 B stored / 128 B loaded per thread" in d.text
    assert "spills 128/128 B st/ld" in d.text


def test_a_stack_frame_without_spills_is_reported_as_local_memory():
    d = diagnose(result=result(stack=64))
    assert "a 64 B stack frame per thread" in d.data["issues"][0]["text"]


def test_measured_roofline_appears_with_its_numbers():
    d = diagnose(result=result(median_ms=2.0))
    line = next(x for x in d.text.splitlines() if x.startswith("roofline:"))
    assert "25.0% of the task's roofline at n=1024" in line and "floor 0.5 ms" in line
    assert d.data["roofline"]["pct"] == 25.0


def test_changes_against_parent_list_counter_deltas(copy_profile):
    parent = copy.deepcopy(copy_profile)
    parent["timing"] = {"median_ms": 0.4}
    s = parent["kernels"][0]["summary"]
    s["dram_pct"], s["registers"], s["ld_bytes_per_sector"] = 30.0, 40.0, 8.0
    d = diagnose(result=result(), profile=copy_profile, parent_profile=parent)
    vs = next(x for x in d.text.splitlines() if x.startswith("vs parent:"))
    assert "measured time 0.4 -> 0.2 ms (-50%)" in vs
    assert "DRAM throughput 30% -> 54%" in vs and "registers/thread 40 -> 16" in vs
    assert "bytes used per global load sector 8 -> 32" in vs
    assert "SM throughput" not in vs, "unchanged counters are not listed"


def test_no_changes_without_a_profiled_parent(copy_profile):
    d = diagnose(profile=copy_profile, parent_profile={"status": "unavailable", "kernels": []})
    assert d.data["changes"] == [] and "vs parent" not in d.text


def test_renamed_kernels_are_matched_by_position_and_the_rename_is_said(copy_profile):
    parent = copy.deepcopy(copy_profile)
    parent["kernels"][0]["kernel"] = "old_k"
    parent["kernels"][0]["summary"]["dram_pct"] = 20.0
    d = diagnose(profile=copy_profile, parent_profile=parent)
    assert "kernels old_k -> k" in d.data["changes"]
    assert "DRAM throughput 20% -> 54%" in d.data["changes"]


def test_dram_traffic_beyond_the_tasks_minimum_is_an_issue():
    rows = ncu.launches((FIXTURES / "ncu_raw.csv").read_text(), (FIXTURES / "ncu_details.csv").read_text())
    strided = kernels_from(rows, {"launches": [{"kernel": "a"}, {"kernel": "b"}, {"kernel": "c"}]})[1]
    task = load_task("vector_add")
    sizes = {"n": 1 << 26}  # 12 bytes per element: 805 MB minimum; the strided kernel moved 8.6 GB
    d = diagnose(task, profile={"status": "ok", "kernels": [dict(strided, share_pct=100.0)], "sizes": sizes})
    traffic = [i for i in d.data["issues"] if i["topic"] == "traffic"]
    assert traffic and "10.7x the task's minimum" in traffic[0]["text"]


def test_diagnosis_does_not_modify_the_profile(copy_profile):
    before = copy.deepcopy(copy_profile)
    diagnose(result=result(), profile=copy_profile)
    assert copy_profile == before


@pytest.mark.parametrize("ns, shown", [(930_500.0, "930.5 us under ncu"), (17_270_000.0, "17.27 ms under ncu")])
def test_kernel_time_under_ncu_is_shown_in_microseconds_or_milliseconds(ns, shown):
    from sandbox.profile.diagnosis import kernel_lines

    line = kernel_lines({"kernel": "k", "summary": {"duration_ns": ns}}, many=False)[0]
    assert line == f"k: {shown}"
