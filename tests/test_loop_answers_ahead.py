"""The loop takes every answer already in before it waits on the GPU: with several requests open, the candidates of
the answers that came in meanwhile join the pipeline at once, so their compiles run beside the evaluations ahead of
them. Requests are sent and candidates recorded in the same order as when answers were taken one at a time."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

import agent
from agent.protocols import Proposal
from sandbox import FakeSandbox, load_candidate, load_task

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))


class SlowFirst:
    """A model stand-in: the first request's answer takes ``first_s``, the others come at once; each is the next of
    ``candidates``."""

    name = "slow-first"

    def __init__(self, candidates, first_s: float):
        self.candidates, self.first_s, self.lock, self.asked = list(candidates), first_s, threading.Lock(), 0

    def propose(self, request):
        with self.lock:
            self.asked += 1
            first = self.asked == 1
            cand = self.candidates.pop(0) if self.candidates else None
        if first:
            time.sleep(self.first_s)
        if cand is None:
            return []
        return [Proposal(cand, [request.baseline.id] if request.baseline else [], "model", note=cand.label)]

    def observe(self, entry):
        pass


def _candidates(n: int):
    """``n`` distinct builds of vector_add, none of them the baseline."""
    base = load_candidate(load_task("vector_add").baseline_path)
    honest = load_candidate(ROOT / "tests" / "cheats" / "honest_vectorized.cu")
    pool = [base.with_knobs({"BLOCK": b}) for b in (128, 512, 1024)]
    pool += [honest.with_knobs({"BLOCK": b}) for b in honest.knobs["BLOCK"]]
    return [dataclasses.replace(c, label=f"answer{i}") for i, c in enumerate(pool[:n])]


def test_answers_already_in_have_their_compiles_started_before_the_first_of_them_is_evaluated(tmp_path, monkeypatch):
    log: list[tuple[str, str]] = []
    submit, evaluate = FakeSandbox.submit_compile, FakeSandbox.evaluate

    def logged_submit(self, task, candidate, tag=None):
        log.append(("compile", candidate.label))
        return submit(self, task, candidate, tag)

    def logged_evaluate(self, task, candidate, *args, **kwargs):
        log.append(("evaluate", candidate.label))
        return evaluate(self, task, candidate, *args, **kwargs)

    monkeypatch.setattr(FakeSandbox, "submit_compile", logged_submit)
    monkeypatch.setattr(FakeSandbox, "evaluate", logged_evaluate)
    answers = _candidates(5)
    run = agent.optimize("vector_add", proposer=SlowFirst(answers, first_s=0.5), sandbox="fake", tune=False,
                         traces=tmp_path / "traces", progress=False,
                         config={"budget": {"iterations": len(answers)}, "parallel": 4,
                                 "sanitize": {"enabled": False}})
    model = [e for e in run.entries if e.origin == "model"]
    assert [e.note for e in model] == [c.label for c in answers]      # every answer recorded, in request order
    first_eval = log.index(("evaluate", model[0].id))
    compiled_before = [label for op, label in log[:first_eval] if op == "compile"]
    # the first answer came last, after the three others: all four were in when the loop took the first, so all four
    # compiles were under way before its evaluation (one at a time, only its own would have been)
    assert [e.id for e in model[:4]] == compiled_before[-4:], log[:first_eval + 1]
