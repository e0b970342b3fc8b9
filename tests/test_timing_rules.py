"""The timing stage's rules that need no GPU: the round cap a candidate cannot move, and the reservoir
that picks the launches compared with the reference uniformly, after the fact."""

from __future__ import annotations

import random
from collections import Counter

from sandbox.worker.timing import Reservoir, round_cap


def test_the_round_cap_depends_on_the_budget_and_the_baseline_only():
    assert round_cap(250.0, 1.0, 10, 60) == 60      # fast baseline: the configured maximum
    assert round_cap(250.0, 10.0, 10, 60) == 25     # the budget over the baseline's warm-up time
    assert round_cap(250.0, 100.0, 10, 60) == 10    # slow baseline: the configured minimum
    assert round_cap(250.0, 0.0, 10, 60) == 60


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
