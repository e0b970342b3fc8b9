"""A result's environment and profile are typed records: every trace written before they were typed loads into
them and dumps the same JSON, unknown keys are kept, and no code in agent/ or sandbox/ reads them by string key."""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sandbox.host.ceilings import cached_ceilings
from sandbox.host.timing import carry_over, timing_env, timing_record
from sandbox.judging.environment import Ceilings, Environment
from sandbox.judging.result import Profile, Result, Status
from sandbox.tasks.task import load_task
from sandbox.wire import Clocks, Timed

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import TARBALLS, extract  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)

# The environment of a timed result on a cluster GPU as the GPU sandbox wrote it before the records were typed:
# the worker's device info (sandbox.plumbing.envinfo.device_info), what the timing stage added (sandbox.host.timing), and
# the actor's measured_on (sandbox.cluster.actor.where_measured).
CLUSTER_ENV = {
    "gpu": "NVIDIA H200", "uuid": "5f0e", "pci_bus_id": "0000:19:00.0", "compute_capability": "9.0", "arch": "sm_90",
    "sms": 132, "l2_bytes": 62914560, "memory_bytes": 150754820096, "shared_per_block_optin": 232448,
    "shared_per_sm": 233472, "max_clock_mhz": 1980, "driver": "580.159.04", "cuda_driver_api": "13.0",
    "cuda_runtime": "13.0", "python": "3.12.3", "kernelwright": "checkout", "nvrtc": "13.0", "cupy": "13.6.0",
    "cuda_bindings": "13.0.3", "host": "gpu-7", "platform": "linux",
    "clocks_at_start": {"sm_clock_mhz": 345, "mem_clock_mhz": 3201, "temperature_c": 31, "power_w": 74.2},
    "clocks_start": {"sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "temperature_c": 36, "power_w": 165.5},
    "clocks_end": {"sm_clock_mhz": 1965, "mem_clock_mhz": 3201, "temperature_c": 41, "power_w": 402.0},
    "clocks_timed": {"sm_clock_mhz": {"median": 1980, "min": 1965, "max": 1980, "samples": 36},
                     "power_w": {"median": 390.5, "min": 300.1, "max": 410.0, "samples": 36}},
    "ceilings": {"copy_bytes_per_s": 4.19e12, "read_bytes_per_s": 4.4e12, "fp32_flops": 5.1e13,
                 "fp16_tensor_flops": 6.9e14, "method": "D2D memcpy of 1 GiB", "gpu": "NVIDIA H200",
                 "driver": "580.159.04", "measured_at": "2026-11-29T14:46:18"},
    "launch_hold": {"held": 30, "ran_out": 0, "unheld": ["compile"]},
    "timing_split_s": {"rounds": 0.81, "other": 0.02},
    "sm_clock_mhz": 1980, "power_w": 390.5,
    "measured_on": {"id": "gpu-7/5f0e", "host": "gpu-7", "node": "a1b2", "gpu": "NVIDIA H200", "uuid": "5f0e",
                    "pci_bus_id": "0000:19:00.0", "ray_gpus": ["3"]},
}


def _result(**kw) -> Result:
    return Result(**{"status": Status.ok, "task": "t", "task_fingerprint": "f", "candidate": "c", "candidate_key": "k", **kw})


def test_every_stored_result_loads_typed_and_dumps_the_env_and_profile_it_was_written_with(tmp_path):
    profiled = 0
    for i, tarball in enumerate(TARBALLS):
        for path in sorted(extract(tarball, tmp_path / str(i)).glob("candidates/*/result.json")):
            written = json.loads(path.read_text())
            result = Result.from_json(path.read_text())
            again = json.loads(result.to_json())
            assert (again["env"], again["profile"]) == (written["env"], written["profile"]), path
            assert result.env.simulated is bool(written["env"].get("simulated"))
            if "ceilings" in written["env"]:
                assert isinstance(result.env.ceilings, Ceilings) and result.env.ceilings.copy_bytes_per_s > 0
            if result.profile is not None:
                profiled += 1
                assert result.profile.kernels and isinstance(result.profile.diagnosis, str)
                assert result.profile.kernels[0].kernel == written["profile"]["kernels"][0]["kernel"]
    assert profiled > 0, "the stored runs hold profiled results"


def test_an_h200_result_reads_its_device_clocks_and_ceilings_by_attribute(tmp_path):
    run = extract(ROOT / "tests" / "fixtures" / "traces" / "h200-softmax.tar.gz", tmp_path)
    env = Result.from_json((run / "candidates" / "c0003" / "result.json").read_text()).env
    assert (env.gpu, env.arch, env.sms) == ("NVIDIA H200", "sm_90", 132)
    assert env.clocks_start.sm_clock_mhz > 0 and env.clocks_timed is None
    assert env.describe_reading("sm_clock_mhz").endswith("(read when the GPU worker started, not during timing)")
    assert env.ceilings.memory_bandwidth() == env.ceilings.copy_bytes_per_s and env.measured_by() is None


def test_a_cluster_results_environment_is_typed_through_and_round_trips():
    result = Result.model_validate(json.loads(_result().to_json()) | {"env": CLUSTER_ENV})
    env = result.env
    assert env.clocks_at_start.sm_clock_mhz == 345 and env.clocks_end.power_w == 402.0
    assert env.clocks_timed.sm_clock_mhz.samples == 36 and env.clocks_timed.mem_clock_mhz is None
    assert env.describe_reading("sm_clock_mhz") == "1980 (median of 36 readings during the timed rounds, 1965 to 1980)"
    assert env.ceilings.memory_bandwidth() == 4.4e12 and env.ceilings.peak_flops("fp16_tensor") == 6.9e14
    assert (env.launch_hold.held, env.launch_hold.error, env.timing_split_s["rounds"]) == (30, None, 0.81)
    assert env.measured_by() == "gpu-7/5f0e" and env.measured_on.ray_gpus == ["3"]
    assert json.loads(result.to_json())["env"] == CLUSTER_ENV
    assert Result.from_json(result.to_json()) == result


def test_a_record_dumps_only_the_keys_it_was_given_and_keeps_those_it_does_not_name():
    assert json.loads(_result().to_json())["env"] == {} and json.loads(_result().to_json())["profile"] is None
    compile_only = Environment.model_validate({"gpu": None, "arch": "sm_90"})
    assert compile_only.model_dump() == {"gpu": None, "arch": "sm_90"} and compile_only.simulated is False
    newer = Environment.model_validate({"arch": "sm_100", "nvlink": {"links": 18}})
    assert newer.model_extra == {"nvlink": {"links": 18}}
    assert newer.model_dump() == {"arch": "sm_100", "nvlink": {"links": 18}}
    newer.simulated = True
    assert newer.model_dump()["simulated"] is True


def test_a_profile_written_when_diagnosis_held_the_data_loads_with_the_text_there():
    old = {"status": "ok", "reason": "", "notice": "", "kernels": [], "seconds": 1.5,
           "diagnosis": {"bound": "memory"}, "diagnosis_text": "bound: memory-bound"}
    profile = Profile.model_validate(old)
    assert (profile.diagnosis, profile.diagnosis_data) == ("bound: memory-bound", {"bound": "memory"})
    assert "diagnosis_text" not in profile.model_dump()
    unavailable = Profile(status="unavailable", reason="ncu not found")
    assert not unavailable.ok and unavailable.note() == "not profiled (unavailable: ncu not found)"


def _timed(clocks_timed: dict) -> Timed:
    """A timing stage's reply as the GPU worker sends it (``sandbox.worker.timing``), two rounds of two."""
    samples = {"candidate": [0.5, 0.52], "baseline": [1.0, 1.02]}
    return Timed(rounds=2, round_cap=50, sets=1, set_of_round=[0, 0], flush_bytes=1 << 27, samples=samples,
                 walls={k: [v[0] + 0.01, v[1] + 0.01] for k, v in samples.items()}, full=[], launches=2,
                 clocks=Clocks(start=CLUSTER_ENV["clocks_start"], end=CLUSTER_ENV["clocks_end"], timed=clocks_timed),
                 gpu_s=0.01, unavailable={}, launch_hold=CLUSTER_ENV["launch_hold"],
                 split_s=CLUSTER_ENV["timing_split_s"], memory={})


@pytest.mark.parametrize("clocks_timed", [CLUSTER_ENV["clocks_timed"], {}], ids=["nvml", "no-nvml"])
def test_the_timing_stage_adds_to_the_environment_the_keys_it_always_wrote(clocks_timed):
    reply = _timed(clocks_timed)
    ceilings = Ceilings.model_validate(CLUSTER_ENV["ceilings"])
    device = {k: v for k, v in CLUSTER_ENV.items() if k in Environment.model_fields and "clock" not in k
              and k not in ("ceilings", "launch_hold", "timing_split_s", "measured_on", "power_w")}
    env = Environment.model_validate({**device, **timing_env(reply, ceilings)})
    written = {**device, "clocks_start": reply.clocks.start, "clocks_end": reply.clocks.end,
               "clocks_timed": clocks_timed, "ceilings": CLUSTER_ENV["ceilings"], "launch_hold": reply.launch_hold,
               "timing_split_s": reply.split_s, **{k: v["median"] for k, v in clocks_timed.items()}}
    assert env.model_dump() == written
    assert env.sm_clock_mhz == (1980 if clocks_timed else None) and env.launch_hold.unheld == ["compile"]
    timing = timing_record(load_task("vector_add"), {"n": 1 << 24}, reply, ceilings, "off")
    assert timing.roofline_ms == pytest.approx(12 * (1 << 24) / 4.4e12 * 1e3) and timing.bound == "memory"


def test_the_baselines_time_right_after_the_candidate_against_after_anything_else_is_flagged_when_slower():
    rng = np.random.default_rng(3)
    orders = [list(rng.permutation(["candidate", "baseline"])) for _ in range(60)]
    opened = [r > 0 and o[0] == "baseline" for r, o in enumerate(orders)]
    after = [r > 0 and orders[r - 1][-1] == "candidate" for r in range(60)]
    noise = list(1.0 + 0.002 * rng.standard_normal(60))
    for slower, flagged in ((1.10, True), (1.0, False)):
        samples = {"candidate": noise, "baseline": [n * (slower if a else 1.0) for n, a in zip(noise, after)]}
        reply = dataclasses.replace(_timed({}), rounds=60, set_of_round=[0] * 60, samples=samples, orders=orders,
                                    walls=samples)
        c = carry_over(reply, "baseline")
        # only the rounds the baseline opened (round 0 has nothing before it), by what ended the round before
        assert c.after_candidate == sum(o and a for o, a in zip(opened, after))
        assert c.after_candidate + c.after_other == sum(opened)
        assert c.flagged is flagged and (c.low > 1.05 if flagged else c.low < 1.0 < c.high)
        text = _result(timing=timing_record(load_task("vector_add"), {"n": 1 << 24}, reply,
                                            Ceilings.model_validate(CLUSTER_ENV["ceilings"]), "off")).summary()
        assert ("carry-over: baseline 1.0" in text or "carry-over: baseline 1.1" in text) is flagged
    assert carry_over(_timed({}), "baseline") is None   # the rounds' order not sent


def test_ceilings_are_measured_once_per_gpu_and_read_back_typed(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    measured = []

    def measure() -> dict:
        measured.append(1)
        return {"copy_bytes_per_s": 4.19e12, "fp32_flops": 5.1e13, "method": "stand-in"}

    device = {"gpu": "NVIDIA H200", "uuid": "5f0e", "driver": "580.159.04"}
    first, again = cached_ceilings(device, measure), cached_ceilings(device, measure)
    assert measured == [1] and first == again and again.gpu == "NVIDIA H200" and again.measured_at
    assert again.memory_bandwidth() == 4.19e12 and again.peak_flops("fp16_tensor") is None


# ---- no string-keyed reads ------------------------------------------------------------------

RECORDS = ("env", "profile")


def _record(node: ast.expr, aliases: set[str]) -> bool:
    """``<x>.env`` or ``<x>.profile`` (an attribute read, not a call), or a name bound to one."""
    if isinstance(node, ast.Attribute):
        return node.attr in RECORDS
    return isinstance(node, ast.Name) and node.id in aliases


def _copied(node: ast.expr) -> ast.expr:
    """What ``dict(x)``, ``x or {}`` or ``x if c else {}`` copies: ``x``."""
    if isinstance(node, ast.IfExp):
        node = node.body
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and node.args:
        return node.args[0]
    return node.values[0] if isinstance(node, ast.BoolOp) else node


def _key(node: ast.expr) -> str:
    return repr(node.value) if isinstance(node, ast.Constant) else ast.unparse(node)


def record_reads(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` reads a result's ``env`` or ``profile`` by key (``r.env["gpu"]``,
    ``result.profile.get("status")``, or through a name bound to one or to its copy:
    ``env = dict(r.env) if r else {}; env.get(key)``)."""
    tree = ast.parse(path.read_text(), str(path))
    aliases = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _record(_copied(node.value), set())
               for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Subscript) and _record(node.value, aliases):
            what = f"[{_key(node.slice)}]"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _record(node.func.value, aliases) and node.args):
            what = f".get({_key(node.args[0])})"
        if what:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {what}")
    return found


def test_no_code_reads_a_results_env_or_profile_by_string_key():
    modules = sorted(p for top in ("agent", "sandbox") for p in (ROOT / top).rglob("*.py"))
    found = [hit for module in modules for hit in record_reads(module)]
    assert not found, "read Result.env and Result.profile by attribute:\n" + "\n".join(found)


def test_the_rule_sees_reads_by_key(tmp_path):
    old = tmp_path / "old.py"
    old.write_text('if result.env.get("simulated"):\n    gpu = r.env["gpu"]\nenv = r.env\nprint(env["driver"])\n'
                   'text = result.profile["diagnosis"]\nsizes = task.env(sizes)["n"]\n'
                   'copy = dict(r.env)\nprof = r.profile or {}\nrow = [copy.get(key), prof[key]]\n')
    found = record_reads(old, tmp_path)
    assert sorted(f.split(":", 1)[1] for f in found) == ["1: .get('simulated')", "2: ['gpu']", "4: ['driver']",
                                                         "5: ['diagnosis']", "9: .get(key)", "9: [key]"]
