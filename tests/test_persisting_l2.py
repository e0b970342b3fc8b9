"""The persisting-L2 reset of the GPU worker (``sandbox.worker.persisting_l2``) never ends a stage: where the runtime or
the driver refuses a step, its record says which and why. On the device: tests/test_persisting_l2_gpu.py."""

from __future__ import annotations

import types

import pytest

from sandbox.worker.persisting_l2 import PersistingL2, ResetAfterCandidate

pytestmark = pytest.mark.timeout(60)


def _refusing_cp():
    def refuse(*args):
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    runtime = types.SimpleNamespace(deviceSetLimit=refuse, deviceGetLimit=refuse)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def test_a_refused_step_is_recorded_and_the_reset_goes_quiet_instead_of_ending_the_stage():
    l2 = PersistingL2(_refusing_cp(), types.SimpleNamespace(ptr=0))
    for _ in range(3):
        l2.reset()
    record = l2.record()
    assert record["carve_out_bytes"] is None and record["error"].startswith("the persisting-L2 carve-out: RuntimeError")
    assert "reading the carve-out" in record["error"] and record["resets"] <= 4


def test_the_check_resets_after_a_candidate_launch_only():
    l2 = PersistingL2(_refusing_cp(), types.SimpleNamespace(ptr=0))
    check = ResetAfterCandidate(l2, "baseline")
    launch = lambda name, kernel: types.SimpleNamespace(name=name, kernel=kernel)
    assert check.queue(launch("candidate", object())) == ([], None)
    assert check.queue(launch("baseline", object())) is None and check.queue(launch("eager", None)) is None
