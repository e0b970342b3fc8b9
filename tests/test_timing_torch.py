"""The timing stage's orchestration for a task imported from PyTorch, on the CPU: a NumPy stand-in for the device
harness (buffers, events, the agreement test) drives ``TimingStage`` with PyTorch eager as the primary baseline.
Every candidate launch is compared with eager's output for the same inputs; a torch.compile that fails its first
call is left out with the reason; a candidate that disagrees with eager is ``wrong``."""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sandbox.judging import agreement  # noqa: E402
from sandbox.pytorch.importer import import_problem  # noqa: E402
from sandbox.pytorch.runtime import runtime_for  # noqa: E402
from sandbox.tasks.inputs import input_specs, output_specs  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402
from sandbox.wire import HarnessCode, Impl, RoundLimits, Time, Timed, tolerances  # noqa: E402
from sandbox.worker import draw, guards, launcher, timing  # noqa: E402
from sandbox.worker.checks import Violation  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
pytestmark = pytest.mark.timeout(300)


class _Event:
    def __init__(self):
        self.t = 0.0

    def record(self, stream=None):
        import time

        self.t = time.perf_counter()

    def synchronize(self):
        pass


def _numpy_cp():
    """NumPy under the names the timing stage uses of CuPy."""
    cuda = types.SimpleNamespace(Event=_Event, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3 + 1.0)
    return types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("_")}, cuda=cuda,
                                 __name__="numpy")


class _Host(np.ndarray):
    """A device array's stand-in: a NumPy array with CuPy's ``.get()``, which gives it back as a host array."""

    __array_priority__ = 1.0     # what NumPy builds from it (a concatenation) is one too

    def get(self):
        return np.asarray(self)


class _Buffer:
    def __init__(self, dtype, shape):
        self.raw = np.zeros(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize + 8, dtype=np.uint8)
        self.view = self.raw[: self.raw.size - 8].view(dtype).reshape(shape)

    def guards_intact(self):
        return True, True

    def data_hash(self, seed):
        return np.array([hash(self.view.tobytes()) & 0xFFFFFFFF], dtype=np.uint64).view(_Host)

    def fill(self, value):
        self.view.fill(value)

    def memset(self, byte):
        self.view.view(np.uint8).fill(byte)


class _Agreement:
    """The host agreement test in place of the device kernel; the mask is the identity here."""

    def new_keys(self):
        return None

    def mask(self, array, keys):
        pass

    def repeats(self):
        return None

    def agree(self, c, masked, keys, atol, rtol, sign_key, repeats=None):
        return agreement.agree(np, c, masked, atol, rtol, sign_key % 2**63)

    def queue(self, c, masked, keys, atol, rtol, sign_key, repeats=None):
        """The device row's layout (guards.DeviceAgreement.queue): the sums' float64 bits, then the count, the first
        and whether the pass was left out (never here: every output is compared)."""
        found = self.agree(c, masked, keys, atol, rtol, sign_key)
        sums = np.array([found.sum_t2, *found.sums], dtype=np.float64).view(np.uint64)
        tail = np.array([found.violations, found.first if found.first is not None else 2**64 - 1, 0], dtype=np.uint64)
        return np.concatenate([sums, tail]).view(_Host)

    read = staticmethod(guards.DeviceAgreement.read)

    def unmasked(self, masked, keys, index):
        return masked.reshape(-1)[index].item()


class _Hold:
    """guards.StreamHold's bookkeeping without a device: ``late`` makes the next hold end on its limit (a launch
    that waited for the device inside, or a host that came late)."""

    def __init__(self):
        self.held = self.ran_outs = 0
        self.open = self.late = False

    def hold(self):
        assert not self.open, "a hold was queued before the last one was released"
        self.held, self.open = self.held + 1, True

    def release(self):
        self.open = False

    def ran_out(self):
        out, self.late = self.late, False
        self.ran_outs += out
        return out


class _PersistingL2:
    """persisting_l2.PersistingL2's bookkeeping without a device: its resets counted."""

    def __init__(self):
        self.resets = 0

    def reset(self):
        self.resets += 1

    def record(self, resets_before=0):
        return {"carve_out_bytes": 0, "resets": self.resets - resets_before, "window": "cleared", "error": None}


class _Harness:
    def __init__(self, free=1 << 30):
        self.cp, self.l2_bytes, self.stream, self.agreement = _numpy_cp(), 1 << 16, None, _Agreement()
        self.hold, self.hold_error, self.free = _Hold(), "", free
        self.persisting_l2 = _PersistingL2()

    def alloc(self, dtype, shape):
        return _Buffer(dtype, shape)

    def hash_array(self, array, seed):
        return np.array([hash(np.ascontiguousarray(array).tobytes()) & 0xFFFFFFFF], dtype=np.uint64).view(_Host)

    def hash_arrays(self, arrays, seed):
        return np.concatenate([self.hash_array(a, seed) for a in arrays]).view(_Host)

    def bands_broken(self, buffers):
        return np.array([not ok for b in buffers for ok in b.guards_intact()], dtype=np.uint64).view(_Host)

    def free_bytes(self):
        return self.free

    def release_cached(self):
        pass

    def flush_l2(self):
        return 0

    def fill(self, array, value):
        array.fill(value)

    def sync(self):
        pass

    def classify(self, exc):
        return exc


class _Kernel:
    """A 'loaded candidate' computing the module's output with NumPy (``scale`` != 1 makes it wrong)."""

    def __init__(self, scale=1.0, untimed_fault=None):
        self.scale, self.untimed_fault = scale, untimed_fault   # (which untimed launch, "wrong" or "input")
        self.plan = {"scratch": []}
        self.untimed, self.in_untimed = 0, False   # in_untimed: set as the untimed launches begin

    def poison_scratch(self, scratch, every=False):
        pass

    def alloc_scratch(self):
        return {}

    def launch(self, arrays, scratch):
        v = arrays["x"]
        self.untimed += self.in_untimed
        fault = self.untimed_fault if self.untimed_fault and self.untimed_fault[0] == self.untimed else (0, "")
        arrays["out"][...] = (0.5 if fault[1] == "wrong" else self.scale) * np.clip(v / (1 + np.exp(-v)), -0.25, 3.0)
        if fault[1] == "input":
            v.reshape(-1)[0] += 1.0


@pytest.fixture(scope="module")
def swish(tmp_path_factory):
    return load_task(import_problem(KB / "1_swish_clamp.py", tmp_path_factory.mktemp("t")).folder)


def _stage(task, tmp_path, monkeypatch, kernel, free=1 << 30, compiles=False, **overrides):
    def callable_(spec, sizes):
        if spec.torch == "compile" and not compiles:
            def broken(*a, **k):
                raise RuntimeError("inductor: no C++ compiler")
            return broken
        return runtime_for(spec.task_folder).baseline(spec.torch, sizes, device="cpu")

    monkeypatch.setattr(timing, "_callable", callable_)
    monkeypatch.setattr(launcher, "_overlaps", lambda array, buffers: any(np.shares_memory(array, b.raw)
                                                                        for b in buffers.values()))
    sizes = task.spec.sizes.check[-1]
    impls = {"candidate": Impl(cubin=b""),
             **{n: Impl(torch=n, task_folder=str(task.folder)) for n in ("eager", "compile")}}
    req = Time(harness=HarnessCode("sm_90", b""), impls=impls, primary="eager", sizes=sizes, scalars={},
               input_variants=[input_specs(task, sizes, 0)], outputs=output_specs(task, sizes),
               tolerance=tolerances(task), seed=3, order_seed=4, hash_seed=5,
               limits=RoundLimits(budget_ms=1e9, min_rounds=3, max_rounds=4, target_ci=0.0, wall_cap_s=60),
               launches_to=60, full_checks=2, data_dir=str(tmp_path))
    req = dataclasses.replace(req, **overrides)
    if free < 1 << 30:
        return timing._run_stage(_Harness(free), req, {"candidate": kernel})
    return timing.TimingStage(_Harness(), req, {"candidate": kernel})


def test_every_candidate_launch_is_checked_against_eager_and_a_failing_compile_is_left_out(swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    checked = []
    check = stage.agreement.raise_if_disagrees
    stage.agreement.raise_if_disagrees = lambda found, launch, name, intact: (
        checked.append(launch.phase), check(found, launch, name, intact))
    set_outs = stage.memory.set_outs  # the stage lets go of its sets before the hand-over
    reply = stage.run()
    assert isinstance(reply, Timed) and set(reply.samples) == {"candidate", "eager"}
    assert reply.unavailable == {"compile": "RuntimeError: inductor: no C++ compiler"}
    # persisting L2 lines reset after every candidate launch, once it ran; each round's order as it ran
    assert reply.persisting_l2["resets"] == reply.launches and reply.persisting_l2["carve_out_bytes"] == 0
    assert len(reply.orders) == reply.rounds and all(sorted(o) == ["candidate", "eager"] for o in reply.orders)
    assert len(reply.samples["eager"]) == reply.rounds and reply.launches >= 12
    assert len(checked) == reply.launches and "warm-up" in checked and "timed round 0" in checked
    assert "untimed, after the timed rounds" in checked
    assert len(reply.full) == 2 and all(Path(f).is_file() for e in reply.full for f in e.files.values())
    # each round in the next rotating set, whose inputs and outputs are buffers of their own (placements)
    assert reply.set_of_round == [r % reply.sets for r in range(reply.rounds)] and reply.sets >= 3
    outs = [o["candidate"]["out"].raw for o in set_outs]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(outs) for b in outs[i + 1:])
    split = reply.split_s  # where the stage's seconds went, for bench/sandbox_bench.py
    assert {"inputs", "warm-up, queued", "launches", "output checks", "untimed launches", "clocks", "hand-over",
            "other"} == set(split)
    assert all(v >= 0 for v in split.values()) and sum(split.values()) == pytest.approx(reply.gpu_s, abs=0.01)


def test_a_candidate_that_disagrees_with_eager_is_wrong(swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel(scale=1.01))
    with pytest.raises(timing.Disagreement, match="disagrees with the baseline's"):
        stage.run()


def test_an_untimed_launch_that_errs_or_writes_its_input_ends_the_stage_named_by_its_launch(swish, tmp_path, monkeypatch):
    # untimed launches' checks are read from the device a batch at a time; the first bad launch is still the one named
    for k, fault, error, message in ((5, "wrong", timing.Disagreement, "disagrees with the baseline's"),
                                     (timing.UNTIMED_BATCH, "wrong", timing.Disagreement, ": got "),  # its output intact
                                     (3, "input", Violation, "input 'x' was modified")):
        kernel = _Kernel(untimed_fault=(k, fault))
        stage = _stage(swish, tmp_path, monkeypatch, kernel, launches_to=200)
        first, real = [], stage._untimed
        stage._untimed = lambda inputs: (first.append(stage.launches["candidate"] + 1),
                                         setattr(kernel, "in_untimed", True), real(inputs))
        with pytest.raises(error, match=message) as caught:
            stage.run()
        if error is timing.Disagreement:
            assert f"launch {first[0] + k - 1} of the candidate in the timing stage (untimed" in str(caught.value)
        # the batch ran on to its end before its checks were read
        assert kernel.untimed == timing.UNTIMED_BATCH * math.ceil(k / timing.UNTIMED_BATCH)


def test_the_candidate_never_sees_eagers_outputs(swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    wiped = []
    real = launcher._overlaps  # the NumPy stand-in set by _stage
    monkeypatch.setattr(launcher, "_overlaps", lambda array, buffers: wiped.append(array) or real(array, buffers))
    stage.run()
    assert wiped and all(not a.any() for a in wiped)


def test_every_launch_is_held_until_one_waits_inside_and_a_stage_whose_holds_keep_running_out_gives_up(
        swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    untimed, real_untimed = [], stage._untimed
    stage._untimed = lambda inputs: (untimed.append(-stage.launches["candidate"]), real_untimed(inputs),
                                     untimed.append(stage.launches["candidate"]))
    queued, real_queued = [], stage._warm_up_queued   # a kernel's warm-up is queued: no hold either
    stage._warm_up_queued = lambda name, inputs, ms: (queued.append(-stage.launches[name]),
                                                      real_queued(name, inputs, ms),
                                                      queued.append(stage.launches[name]))[1]
    reply = stage.run()
    launches = reply.launches + sum(len(v) for v in reply.samples.values()) - len(reply.samples["candidate"])
    assert sum(untimed) > 0 and sum(queued) >= 3    # untimed launches time nothing: no hold
    assert reply.launch_hold["held"] >= launches - sum(untimed) - sum(queued) and reply.launch_hold["unheld"] == []

    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    hold, eager = stage.h.hold, stage.callables["eager"]
    stage.callables["eager"] = lambda *a, **k: (setattr(hold, "late", hold.open), eager(*a, **k))[1]
    reply = stage.run()
    assert reply.launch_hold["unheld"] == ["eager"] and reply.launch_hold["ran_out"] == 1  # once, then unheld

    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    kernel, hold = stage.loaded["candidate"], stage.h.hold
    real = kernel.launch
    kernel.launch = lambda arrays, scratch: (setattr(hold, "late", True), real(arrays, scratch))[1]
    reply = stage.run()
    rec = reply.launch_hold
    assert rec["ran_out"] == timing.GIVE_UP_HOLDS and "given up" in rec["error"]
    assert isinstance(reply, Timed) and reply.launches >= 12      # timed on, the old way


def test_without_a_hold_every_launch_is_timed_after_a_synchronisation_and_the_result_says_why(
        swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    stage.h.hold, stage.h.hold_error = None, "cudaErrorNotSupported"
    stage.launcher.hold = None
    reply = stage.run()
    assert reply.launch_hold == {"held": 0, "ran_out": 0, "unheld": ["candidate", "eager"],
                                    "error": "cudaErrorNotSupported"}


def test_a_size_the_device_cannot_hold_is_too_large_with_the_bytes_not_an_allocation_failure(swish, tmp_path, monkeypatch):
    reply = _stage(swish, tmp_path, monkeypatch, _Kernel(), free=100 << 20)
    assert reply.status == "too_large" and reply.impl == "all"
    assert reply.error.startswith("the timing stage does not fit in device memory at this size: it needs at least ")
    assert "of the 0.10 GiB free can be used" in reply.error


def test_an_implementation_the_memory_left_after_one_set_cannot_hold_is_left_out_with_the_reason(
        swish, tmp_path, monkeypatch):
    from contextlib import contextmanager

    taken = iter([200 << 20, 400 << 20])  # what eager's and torch.compile's first calls allocate, in that order

    @contextmanager
    def peak(out):
        yield
        out.append(next(taken))

    monkeypatch.setattr(timing, "torch_peak", peak)
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel(), compiles=True)   # 1 GiB free: 512 MiB usable
    reply = stage.run()
    assert isinstance(reply, Timed) and set(reply.samples) == {"candidate", "eager"}
    assert reply.unavailable["compile"].startswith("left out: the device memory does not hold it beside one "
                                                      "rotating set (0.39 GiB of its own; 0.50 GiB usable")
    assert reply.memory["left_out"] == ["compile"] and reply.sets == reply.memory["wanted_sets"] >= 3


def test_eager_timed_with_tf32_runs_in_that_mode_and_the_candidate_is_checked_against_eager_without_it(
        swish, tmp_path, monkeypatch):
    modes = []
    real = torch.func.functional_call

    def functional_call(*a, **k):  # inside the baseline's call: what TF32 does to a convolution, an error beyond tolerance
        on = bool(torch.backends.cudnn.allow_tf32)
        modes.append(on)
        return real(*a, **k) * (1.01 if on else 1.0)

    monkeypatch.setattr(torch.func, "functional_call", functional_call)
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    monkeypatch.setattr(timing, "_callable", lambda spec, sizes: runtime_for(spec.task_folder).baseline(
        spec.torch, sizes, device="cpu", tf32_mode=spec.tf32))
    impls = {"candidate": Impl(cubin=b""), "eager": Impl(torch="eager", task_folder=str(swish.folder), tf32="on")}
    stage.__init__(stage.h, dataclasses.replace(stage.req, impls=impls), stage.loaded)
    reply = stage.run()
    assert isinstance(reply, Timed) and set(reply.samples) == {"candidate", "eager"}
    timed = len(reply.samples["eager"])
    # each eager call in TF32 but the first (untimed) is followed by one without it, whose outputs the candidate meets
    assert modes.count(True) > timed and modes.count(False) == modes.count(True) - 1
    assert modes[:3] == [True, True, False]
    assert not torch.backends.cudnn.allow_tf32  # the process's setting is back to off


def test_one_launch_of_each_kind_is_compared_with_the_reference(swish, tmp_path, monkeypatch):
    reply = _stage(swish, tmp_path, monkeypatch, _Kernel(), full_checks=3, launches_to=400).run()
    kinds = [draw.launch_kind(e.phase) for e in reply.full]
    assert sorted(kinds) == sorted(draw.KINDS), [e.phase for e in reply.full]


class _StrayKernel(_Kernel):
    """Honest outputs, and a NaN written into another rotating set's input once the stage has moved on."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def launch(self, arrays, scratch):
        super().launch(arrays, scratch)
        x = arrays["x"]
        if self.seen and not np.shares_memory(self.seen[-1], x) and len(self.seen) > 3:
            self.seen[-1].reshape(-1)[0] = np.nan
        self.seen.append(x)


def test_a_write_into_another_rotating_sets_input_is_rejected_naming_the_buffer(swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _StrayKernel())
    with pytest.raises(Violation, match=r"input 'x' of rotating set 0 was overwritten .*outside its own buffers"):
        stage.run()


def test_a_write_into_an_idle_buffer_during_the_warm_up_is_rejected_naming_the_buffer(swish, tmp_path, monkeypatch):
    kernel = _Kernel()
    stage = _stage(swish, tmp_path, monkeypatch, kernel)
    real = kernel.launch

    def launch(arrays, scratch):
        real(arrays, scratch)
        stage.memory.set_outs[1]["eager"]["out"].view.reshape(-1)[0] += 1.0   # the baseline's output of the next set

    kernel.launch = launch
    with pytest.raises(Violation, match=r"the eager's output 'out' of rotating set 1 was overwritten: .*during the "
                                        r"warm-up"):
        stage.run()


def test_a_kept_output_changed_before_the_hand_over_is_rejected(swish, tmp_path, monkeypatch):
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel(), full_checks=3, launches_to=400)
    save = stage.kept.save

    def tampered(data_dir, ipc):
        slot = next(iter(stage.kept.kept.values()))
        slot.out["out"].reshape(-1)[0] += 1.0
        return save(data_dir, ipc)

    stage.kept.save = tampered
    with pytest.raises(Violation, match=r"the copy of output 'out' of launch \d+ kept for the reference was overwritten"):
        stage.run()


def test_a_baseline_timed_by_the_worker_just_before_gets_the_minimum_warm_up_and_the_candidate_the_whole(
        swish, tmp_path, monkeypatch):
    recent = timing.Recent()
    runs = []
    for _ in range(2):
        stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
        stage.recent = recent
        runs.append(stage.run().warm_up)
    first, second = runs
    assert set(first) == {"eager", "candidate"}            # torch.compile is left out here (no compiler)
    assert first["eager"] > timing.WARM_UP_MIN and second["eager"] == timing.WARM_UP_MIN
    assert min(first["candidate"], second["candidate"]) > timing.WARM_UP_MIN   # the candidate's: never cut

    for key in recent.ended:                                 # that stage ended longer ago than WARM_AGAIN_S
        recent.ended[key] -= timing.WARM_AGAIN_S
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel())
    stage.recent = recent
    assert stage.run().warm_up["eager"] > timing.WARM_UP_MIN


def test_what_a_stage_remembers_names_the_code_and_the_sizes():
    key = timing.Recent.key
    kernel = Impl(cubin=b"\x7fELF one", plan={"launches": [{"grid": [4, 1, 1]}]})
    assert key("baseline", kernel, {"n": 4}, {}) == key("baseline", dataclasses.replace(kernel), {"n": 4}, {})
    for changed in (("vendor", kernel, {"n": 4}, {}), ("baseline", dataclasses.replace(kernel, cubin=b"\x7fELF two"),
                                                        {"n": 4}, {}),
                    ("baseline", dataclasses.replace(kernel, plan={"launches": [{"grid": [8, 1, 1]}]}), {"n": 4}, {}),
                    ("baseline", kernel, {"n": 5}, {}), ("baseline", kernel, {"n": 4}, {"alpha": 2.0})):
        assert key(*changed) != key("baseline", kernel, {"n": 4}, {})
    recent = timing.Recent()
    assert not recent.warm("k", 100.0)
    recent.finished(["k"], 100.0)
    assert recent.warm("k", 100.0 + timing.WARM_AGAIN_S / 2) and not recent.warm("k", 100.0 + timing.WARM_AGAIN_S)


def test_a_kernel_baseline_is_warmed_up_queued_and_every_candidate_launch_is_compared_with_its_output(
        swish, tmp_path, monkeypatch):
    impls = {"candidate": Impl(cubin=b""), "baseline": Impl(cubin=b"")}
    stage = _stage(swish, tmp_path, monkeypatch, _Kernel(), impls=impls, primary="baseline")
    stage.__init__(stage.h, stage.req, {"candidate": _Kernel(), "baseline": _Kernel()})
    checked = []
    check = stage.agreement.raise_if_disagrees
    stage.agreement.raise_if_disagrees = lambda found, launch, name, intact: (
        checked.append((launch.number, launch.phase, intact)), check(found, launch, name, intact))
    reply = stage.run()
    assert isinstance(reply, Timed) and set(reply.samples) == {"candidate", "baseline"}
    assert sorted(n for n, _, _ in checked) == list(range(1, reply.launches + 1))
    assert all(intact for _, phase, intact in checked if phase.startswith("timed"))   # checked alone
    assert reply.warm_up["baseline"] >= timing.WARM_UP_MIN and len(reply.full) == 2

    stage = _stage(swish, tmp_path, monkeypatch, _Kernel(), impls=impls, primary="baseline")
    stage.__init__(stage.h, stage.req, {"candidate": _Kernel(scale=1.01), "baseline": _Kernel()})
    with pytest.raises(timing.Disagreement, match=r"launch 1 of the candidate in the timing stage \(warm-up\)"):
        stage.run()
