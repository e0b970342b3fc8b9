"""The timing stage's memory plan (sandbox.worker.memory_plan), with made-up free memory: it keeps three or more
rotating sets where the device holds them, gives up the device copies of kept outputs and then sets before it
leaves any implementation out, never leaves out the baseline the candidate is checked against, and where nothing
fits says so with the bytes needed and available."""

from __future__ import annotations

import pytest

from sandbox.worker.memory_plan import GUARD_BYTES, Needs, is_out_of_memory, margin, plan_memory

pytestmark = pytest.mark.timeout(30)

GIB = 1 << 30
L2 = 60 << 20


def _rmsnorm(**kw) -> Needs:
    """KernelBench level1/36_RMSNorm_ at its own shape: 7.5 GiB in, 7.5 GiB out, eager as the baseline."""
    args = dict(input_bytes=int(7.5 * GIB), output_bytes=int(7.5 * GIB), input_buffers=1, output_buffers=1, writers=2,
                l2_bytes=L2, kept=3, flush_bytes=2 * L2, generation_bytes=15 * GIB,
                libraries={"eager": 15 * GIB, "compile": int(7.5 * GIB)}, optional=("compile", "vendor"))
    return Needs(**{**args, **kw})


def test_three_or_more_sets_where_memory_holds_them_enough_for_twice_the_l2_with_small_buffers():
    small = Needs(input_bytes=1 << 20, output_bytes=1 << 20, input_buffers=1, output_buffers=1, writers=2, l2_bytes=L2)
    assert plan_memory(small, 100 * GIB).sets == 64                       # capped
    assert plan_memory(Needs(**{**small.__dict__, "input_bytes": 8 << 20}), 100 * GIB).sets == 15
    big = Needs(input_bytes=GIB, output_bytes=GIB, input_buffers=1, output_buffers=1, writers=2, l2_bytes=L2)
    plan = plan_memory(big, 100 * GIB)
    assert plan.fits and plan.sets == 3 and not plan.kept_on_host and not plan.left_out
    assert plan.need_bytes == 3 * big.set_bytes and big.set_bytes == 3 * GIB + 3 * GUARD_BYTES


def test_kept_outputs_go_to_host_memory_before_a_set_is_given_up():
    needs = _rmsnorm()
    # 3 sets 67.5 + generation 15 + libraries 22.5 + kept 22.5 = 127.5 GiB > 130 - 6.5; without the kept copies it fits
    plan = plan_memory(needs, 130 * GIB)
    assert plan.fits and plan.sets == 3 and plan.kept_on_host and not plan.left_out
    assert plan.need_bytes <= plan.budget_bytes == 130 * GIB - margin(130 * GIB)


def test_fewer_sets_before_any_implementation_is_left_out():
    plan = plan_memory(_rmsnorm(), 100 * GIB)
    assert plan.fits and plan.sets == 2 and plan.kept_on_host and plan.left_out == {}
    plan = plan_memory(_rmsnorm(), 70 * GIB)
    assert plan.fits and plan.sets == 1 and plan.left_out == {}


def test_an_optional_implementation_is_left_out_only_where_one_set_cannot_hold_it_and_the_reason_is_given():
    # one set 22.5, generation 15, libraries 22.5, flush 0.1: 60.1 GiB; without torch.compile 52.6 GiB
    plan = plan_memory(_rmsnorm(), 58 * GIB)
    assert plan.fits and plan.sets == 1 and list(plan.left_out) == ["compile"]
    assert "7.50 GiB of its own" in plan.left_out["compile"] and "58.00 GiB free" in plan.left_out["compile"]


def test_the_baseline_the_candidate_is_checked_against_is_never_left_out():
    plan = plan_memory(_rmsnorm(), 45 * GIB)   # even without compile, eager's 15 GiB does not fit beside one set
    assert not plan.fits and list(plan.left_out) == ["compile"]
    assert plan.need_bytes > plan.budget_bytes


def test_a_size_that_cannot_fit_names_the_bytes_needed_and_available():
    plan = plan_memory(_rmsnorm(), 30 * GIB)
    assert not plan.fits and plan.sets == 0
    assert plan.message.startswith("the timing stage does not fit in device memory at this size: it needs at least "
                                   "52.62 GiB")
    assert "one rotating set 22.50 GiB (inputs 7.50 GiB, outputs 7.50 GiB for each of 2 implementations)" in plan.message
    assert "working memory of eager 15.00 GiB" in plan.message and "of the 30.00 GiB free can be used" in plan.message


def test_the_margin_is_a_share_of_free_memory_with_a_floor():
    assert margin(100 * GIB) == 5 * GIB and margin(GIB) == 512 << 20
    tiny = Needs(input_bytes=1024, output_bytes=1024, input_buffers=1, output_buffers=1, writers=2, l2_bytes=L2)
    assert not plan_memory(tiny, 256 << 20).fits        # below the floor nothing is planned


def test_allocation_failures_are_recognised_from_cupy_the_runtime_and_pytorch():
    class OutOfMemoryError(Exception):
        pass

    class CUDARuntimeError(Exception):
        pass

    assert is_out_of_memory(OutOfMemoryError("Out of memory allocating 8,053,063,680 bytes"))
    assert is_out_of_memory(CUDARuntimeError("cudaErrorMemoryAllocation: out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 7.50 GiB"))
    assert not is_out_of_memory(CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered"))


class _Pool:
    def __init__(self, unused):
        self.unused, self.freed = unused, False

    def free_bytes(self):
        return self.unused

    def free_all_blocks(self):
        self.freed, self.unused = True, 0


def _cupy(pool, device_free):
    import types

    runtime = types.SimpleNamespace(memGetInfo=lambda: (device_free, 10 * device_free))
    return types.SimpleNamespace(get_default_memory_pool=lambda: pool, cuda=types.SimpleNamespace(runtime=runtime))


def test_the_cache_is_handed_back_only_when_it_is_large_beside_what_the_device_has_free():
    from sandbox.worker.memory_plan import HELD_SHARE, release_cached

    small = _Pool(unused=int(HELD_SHARE * 100e9) - 1)
    release_cached(_cupy(small, device_free=int(100e9)))
    assert not small.freed            # the next stage reuses it: no new allocations from the device
    large = _Pool(unused=int(HELD_SHARE * 100e9) + 1)
    release_cached(_cupy(large, device_free=int(100e9)))
    assert large.freed                # the other worker on the device may need it
