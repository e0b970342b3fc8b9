"""The timing stage's rules that need no GPU: the round cap a candidate cannot move, the reservoir that picks
the launches compared with the reference uniformly, after the fact, one draw per kind of launch with the timed
rounds always among them, and the fence that names a buffer written outside a launch's own."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from sandbox.worker.guards import Fence
from sandbox.worker.draw import KINDS, PhaseDraw, Reservoir, draw_slots, launch_kind, miss_probability
from sandbox.worker.timing import WARM_UP_MAX, round_cap, warm_up_batch, warming


def test_the_round_cap_depends_on_the_budget_and_the_baseline_only():
    assert round_cap(250.0, 1.0, 10, 60) == 60      # fast baseline: the configured maximum
    assert round_cap(250.0, 10.0, 10, 60) == 25     # the budget over the baseline's warm-up time
    assert round_cap(250.0, 100.0, 10, 60) == 10    # slow baseline: the configured minimum
    assert round_cap(250.0, 0.0, 10, 60) == 60


def test_a_queued_warm_up_asks_for_what_the_per_launch_rule_would_launch_a_batch_at_a_time():
    assert warming([]) and warm_up_batch([]) == 3                  # the minimum first, whatever the kernel's time
    assert warm_up_batch([0.13] * 3) == 16                           # 20 ms of a 0.13 ms kernel: batches of 16
    assert warm_up_batch([5.0] * 3) == 1                             # 5 ms left of a 5 ms kernel: one more launch
    assert warm_up_batch([0.01] * (WARM_UP_MAX - 5)) == 5            # never past the most launches
    assert not warming([7.0] * 3) and warming([0.1] * 3)             # 21 ms done; 0.3 ms is not enough
    assert not warming([0.01] * WARM_UP_MAX)                         # the most launches, even short of 20 ms
    # every batch it asks for is one the per-launch rule would still launch, up to the batch's last launch
    for per in (0.013, 0.13, 1.3, 6.0, 25.0):
        times = []
        while warming(times):
            n = warm_up_batch(times)
            assert n >= 1 and warming(times + [per] * (n - 1))
            times += [per] * n
        assert len(times) == next(k for k in range(1, WARM_UP_MAX + 1) if not warming([per] * k))


def test_the_reservoir_keeps_a_uniform_sample_of_a_stream_of_any_length():
    rng = random.Random(5)
    counts = Counter()
    runs, length, k = 20000, 50, 3
    for _ in range(runs):
        res, held = Reservoir(k, rng), [None] * k
        for item in range(length):
            slot = res.offer()
            if slot is not None:
                held[slot] = item
        assert None not in held and len(set(held)) == k
        counts.update(held)
    expected = runs * k / length
    assert set(counts) == set(range(length))
    assert all(abs(c - expected) < 0.12 * expected for c in counts.values()), counts  # ~1200 each, sd ~34


def test_a_reservoir_of_zero_keeps_nothing_and_a_short_stream_keeps_everything():
    none = Reservoir(0, random.Random(1))
    assert [none.offer() for _ in range(10)] == [None] * 10
    short = Reservoir(5, random.Random(1))
    assert [short.offer() for _ in range(3)] == [0, 1, 2]


def test_the_full_comparisons_cover_every_kind_of_launch_and_the_timed_rounds_always():
    assert draw_slots(0) == {"warm-up": 0, "timed": 0, "untimed": 0}
    assert draw_slots(1) == {"warm-up": 0, "timed": 1, "untimed": 0}
    assert draw_slots(3) == {"warm-up": 1, "timed": 1, "untimed": 1}
    assert draw_slots(5) == {"warm-up": 1, "timed": 3, "untimed": 1}
    assert [launch_kind(p) for p in ("warm-up", "timed round 7", "untimed, after the timed rounds")] == list(KINDS)
    phases = ["warm-up"] * 30 + [f"timed round {r}" for r in range(12)] + ["untimed, after the timed rounds"] * 40
    rng = random.Random(3)
    for _ in range(500):
        draw, kept = PhaseDraw(3, rng), {}
        for i, phase in enumerate(phases):
            slot = draw.offer(phase)
            if slot is not None:
                kept[slot] = phase
        assert sorted(launch_kind(p) for p in kept.values()) == sorted(KINDS)


def test_an_error_in_part_of_the_timed_rounds_is_missed_as_often_as_the_formula_says():
    assert miss_probability(12, 12, 1) == 0.0                     # wrong in every timed round: always caught
    assert miss_probability(12, 3, 1) == 0.75 and miss_probability(12, 0, 1) == 1.0
    assert abs(miss_probability(100, 20, 3) - 0.5081) < 1e-4      # three draws among all launches, as before
    rounds, erring, runs = 12, 3, 20000
    rng, missed = random.Random(11), 0
    for _ in range(runs):
        draw, kept = PhaseDraw(3, rng), set()
        for r in range(rounds):
            if draw.offer(f"timed round {r}") is not None:
                kept = {r}
        missed += not kept & set(range(4, 4 + erring))
    assert abs(missed / runs - miss_probability(rounds, erring, 1)) < 0.02


class _HostHashes:
    """What a Fence reads of a Harness, on the host: a hash of an array's bytes and NumPy for CuPy."""

    cp = np

    def hash_array(self, array, seed):
        return np.array([hash((seed, np.ascontiguousarray(array).tobytes())) % 2**63], dtype=np.uint64)

    def hash_arrays(self, arrays, seed):
        return np.concatenate([self.hash_array(a, seed) for a in arrays])


def test_a_fence_names_each_buffer_written_while_it_stood_and_only_those():
    buffers = {f"input 'a' of rotating set {i}": np.arange(100, dtype=np.float32) for i in range(3)}
    fence = Fence(_HostHashes(), 7)
    fence.raise_(buffers)
    assert fence.broken() == []
    buffers["input 'a' of rotating set 2"][0] = np.nan
    assert fence.broken("a launch wrote outside its own buffers") == [
        "input 'a' of rotating set 2 was overwritten: a launch wrote outside its own buffers"]
