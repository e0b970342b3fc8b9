"""The tuner on a real GPU: a tuning run improves on the default configuration with an interval
clearing 1.0, or says honestly that it found no significant gain. Run with ``pytest -m gpu -s``
to see the verdicts, the ledger and the held-out table."""

from __future__ import annotations

import pytest

from agent.claims.best import BestStore, Envelope
from agent.claims.heldout import format_heldout, heldout_table
from agent.claims.ledger import Ledger
from agent.tune.proposer import TunerProposer, objective, tune
from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

pytestmark = pytest.mark.gpu

KNOWN = {s.value for s in Status}


def _report(outcome, ledger: Ledger) -> None:
    print(f"\n{outcome.verdict()}")
    print(outcome.summary)
    print(ledger.summary())


@pytest.mark.timeout(900)
def test_tuning_sgemm_improves_on_the_default_configuration_or_says_it_did_not():
    task = load_task("sgemm")
    ledger = Ledger()
    with GPUSandbox(SandboxConfig()) as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=12, seed=0, sandbox=sb), ledger=ledger)
    ledger.record_winner(outcome.best.result)
    ledger.stop()
    _report(outcome, ledger)
    assert outcome.start.origin == "baseline" and outcome.start.result.ok
    # 12 configurations screened; only finalists (3, or more where one fails in full) are evaluated in full
    assert outcome.summary["evaluations"] == outcome.summary["screened"] == 12
    assert 1 <= len(outcome.entries) == 1 + outcome.summary["evaluated_in_full"] <= 7
    assert {e.result.status.value for e in outcome.entries} <= KNOWN
    assert all("finalist" in e.note for e in outcome.entries[1:])
    assert ledger.screened == outcome.summary["screened"] and ledger.screen_gpu_s > 0
    s = outcome.best.result.speedup("baseline")
    assert s is not None and s.low <= s.value <= s.high
    assert outcome.significant == (outcome.best is not outcome.start and s.low > 1.0)
    assert objective(outcome.best.result) <= objective(outcome.start.result)
    assert ledger.gpu_s > ledger.screen_gpu_s and ledger.evaluations == len(outcome.entries)
    if outcome.significant:
        assert outcome.verdict().startswith("improved") and 0 < ledger.break_even_calls() < float("inf")
    else:
        assert outcome.verdict().startswith("no significant gain")


@pytest.mark.timeout(900)
def test_softmax_winner_is_rechecked_at_heldout_sizes_and_stored(tmp_path):
    task = load_task("softmax")
    ledger = Ledger()
    with GPUSandbox(SandboxConfig(vendor=True)) as sb:
        outcome = tune(sb, task, proposer=TunerProposer(max_evaluations=6, flags=False, sandbox=sb), ledger=ledger)
        rows = heldout_table(sb, task, load_candidate(task.baseline_path), outcome.best.candidate)
    ledger.record_winner(outcome.best.result)
    ledger.stop()
    _report(outcome, ledger)
    print(format_heldout(rows))
    assert [r.sizes for r in rows] == task.spec.sizes.heldout
    assert all(r.status == "ok" and r.speedup is not None for r in rows)
    assert all(r.flagged == (r.speedup.high < 1.0) for r in rows)
    store = BestStore(tmp_path / "best")
    if outcome.best.result.ok:
        assert store.offer(task, outcome.best.candidate, outcome.best.result)
        record = store.get(task, Envelope.from_env(outcome.best.result.env))
        assert record is not None and record.knobs == outcome.best.candidate.defines()
        print(record.describe())
