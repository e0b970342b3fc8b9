"""The fake sandbox's times at sizes other than the benchmark follow its model: a build's gain holds on the work,
not on the fixed launch cost every build pays, so its speedup draws towards 1.0 as the work shrinks; the noise is
drawn afresh per size; the baseline stays at 1.0 at every size."""

from __future__ import annotations

import pytest

from sandbox.candidates.candidate import parse_candidate
from sandbox.host.fake import LAUNCH_MS, FakeSandbox, _work_ms
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(120)


def _share(task, sizes) -> float:
    work = _work_ms(task, sizes)
    return work / (work + LAUNCH_MS)


def test_a_simulated_speedup_draws_towards_one_at_small_sizes():
    task = load_task("vector_add")
    base = parse_candidate(task.baseline_path.read_text())
    cand = parse_candidate(task.baseline_path.read_text() + "\n// fake: speedup=1.2\n")
    box = FakeSandbox()
    assert abs(box.evaluate(task, cand).speedup("baseline").value - 1.2) < 0.02
    sizes = sorted(task.spec.sizes.heldout, key=lambda s: _work_ms(task, s))
    got = [box.evaluate(task, cand, sizes=s).speedup("baseline") for s in sizes]
    for s, g in zip(sizes, got):
        expected = 1 + 0.2 * _share(task, s) / _share(task, task.spec.sizes.benchmark)
        assert abs(g.value - expected) < 0.02, (s, g, expected)
    assert got[0].value < got[-1].value - 0.05 and all(g.value > 1.0 for g in got)
    assert len({(g.low, g.high) for g in got}) == len(got)   # each size its own noise
    for s in sizes:
        assert abs(box.evaluate(task, base, sizes=s).speedup("baseline").value - 1.0) < 0.02
