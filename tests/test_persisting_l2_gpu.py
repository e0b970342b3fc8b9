"""On a real device, nothing a launch leaves in the L2 outlasts it: the GPU worker sets the persisting-L2 carve-out
to none and clears the stream's access-policy window as it starts (``sandbox.worker.persisting_l2``), and resets
persisting lines after every candidate launch of the timing stage; the result says so, and its carry-over statistic
(the baseline right after the candidate against after anything else) does not flag the baseline timed against
itself."""

from __future__ import annotations

import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

pytestmark = pytest.mark.gpu
MAX_PERSISTING_L2 = 108   # cudaDevAttrMaxPersistingL2CacheSize


def _window_bytes(driver, stream) -> int:
    err, value = driver.cuStreamGetAttribute(stream, driver.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(value.accessPolicyWindow.num_bytes)


@pytest.mark.timeout(120)
def test_a_carve_out_and_an_access_policy_window_left_before_are_put_back():
    import cupy as cp
    from cuda.bindings import driver

    from sandbox.worker.persisting_l2 import PERSISTING_L2_LIMIT, PersistingL2

    most = int(cp.cuda.runtime.deviceGetAttribute(MAX_PERSISTING_L2, cp.cuda.Device().id))
    if most == 0:
        pytest.skip("this device has no persisting L2")
    cp.cuda.runtime.deviceSetLimit(PERSISTING_L2_LIMIT, min(most, 1 << 20))
    assert cp.cuda.runtime.deviceGetLimit(PERSISTING_L2_LIMIT) > 0
    stream = cp.cuda.Stream(non_blocking=True)
    buf = cp.zeros(1 << 18, dtype=cp.float32)
    value = driver.CUstreamAttrValue()
    window = value.accessPolicyWindow
    window.base_ptr, window.num_bytes, window.hitRatio = buf.data.ptr, buf.nbytes, 1.0
    window.hitProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
    window.missProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
    handle = driver.CUstream(int(stream.ptr))
    err, = driver.cuStreamSetAttribute(handle, driver.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, value)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    with stream:
        buf += 1.0   # lines read and written through the window: persisting ones
    stream.synchronize()
    assert _window_bytes(driver, handle) == buf.nbytes

    l2 = PersistingL2(cp, stream)
    record = l2.record()
    print("\n", record)
    assert record == {"carve_out_bytes": 0, "resets": 1, "window": "cleared", "error": None}
    assert _window_bytes(driver, handle) == 0
    l2.reset()
    assert l2.record()["resets"] == 2


@pytest.mark.timeout(600)
def test_a_timed_result_says_the_l2_was_put_back_after_every_candidate_launch_and_shows_no_carry_over():
    # rounds that never settle: 40 of them, about ten opened by the baseline after each kind of launch
    config = SandboxConfig(check_timeout_s=45, time_timeout_s=180, timing_budget_s=0.2, max_rounds=40, target_ci=0.0,
                           vendor=False)
    task = load_task("vector_add")
    with GPUSandbox(config) as sb:
        result = sb.evaluate(task, load_candidate(task.baseline_path))
    assert result.status is Status.ok, result.summary() + "\n" + result.detail
    l2, timing = result.env.persisting_l2, result.timing
    print("\n", l2, "\n", timing.carry_over)
    assert l2 is not None and l2.carve_out_bytes == 0 and l2.error is None, l2
    assert l2.resets == timing.candidate_launches   # one after every launch of the candidate, each once it ran
    c = timing.carry_over
    assert timing.rounds == 40 and c is not None and 3 <= c.after_candidate and 3 <= c.after_other, c
    assert not c.flagged and "carry-over" not in result.summary(), c   # the baseline after itself is itself
