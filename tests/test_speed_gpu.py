"""What makes the search and a full evaluation fast, on a real GPU: outputs reach the reference worker by CUDA
IPC handle, and an optimize run without a model screens its configurations and evaluates finalists in full.
Run with ``-s`` to see the cost split."""

from __future__ import annotations

import json

import pytest

import agent
from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

pytestmark = pytest.mark.gpu


@pytest.mark.timeout(600)
def test_a_full_evaluation_hands_large_outputs_over_by_ipc_and_splits_its_cost():
    task = load_task("softmax")
    with GPUSandbox(SandboxConfig()) as sb:
        assert sb.referee.ipc, sb.referee.ipc_error
        sb.evaluate(task, load_candidate(task.baseline_path))           # warm: baseline checked, ceilings measured
        cand = load_candidate(task.baseline_path).with_knobs({"BLOCK": 512})
        result = sb.evaluate(task, cand)
    c = result.cost
    print(f"\nsoftmax BLOCK=512 at its benchmark size: wall {c.wall_s:.2f} s = compile {c.compile_s:.2f} + check "
          f"launches {c.check_gpu_s:.2f} + reference {c.reference_s:.2f} + timing {c.time_gpu_s:.2f} + the rest")
    assert result.status is Status.ok, result.summary()
    assert c.reference_s > 0 and len([ch for ch in result.checks if ch.label.endswith("full")]) == 3
    assert all(ch.passed for ch in result.checks)


@pytest.mark.timeout(900)
def test_optimize_without_a_model_screens_then_evaluates_finalists_in_full(tmp_path):
    run = agent.optimize("softmax", sandbox="gpu", traces=tmp_path / "t", sanitize=False,
                         config={"tune": {"max_evaluations": 16}})
    s = run.summary
    print(json.dumps({"totals": s.totals.model_dump(), "tuning": s.claim.tuning.text, "ledger": s.claim.ledger.text,
                      "stops": s.to_json()["stops"]}, indent=1, default=str))
    [tuning] = s.claim.searches
    assert tuning.screened == s.totals.screened >= 8 and s.totals.screen_gpu_s > 0
    assert len(run.entries) == 1 + tuning.evaluated_in_full <= 7
    for e in run.entries[1:]:
        assert "finalist" in e.note and e.result.status.value in {x.value for x in Status}
        assert e.result.status is not Status.ok or e.result.timing.candidate_launches >= 64   # the full protocol
    assert s.totals.screen_gpu_s / s.totals.screened < 2.0   # screening costs a fraction of an evaluation
