"""The claim's winner is the best entry that passes every held-out size: a leader wrong at one is set aside and
named beside the winner, and the summary, best.cu, the report and the stored run agree on the winner. The held-out
sizes never reach a prompt. CPU: a local scripted model server, real compiles and the FakeSandbox, whose
held-out failures are scripted by ``// fake: heldout_wrong``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agent
from agent.proposers import prompts
from agent.protocols import Entry, ProposalRequest
from agent.report.views import summary_view
from agent.trace.reader import read
from sandbox.candidates.candidate import load_candidate
from sandbox.host.builder import new_result
from sandbox.judging.result import Status
from test_agent_prompts import DEVICE
from test_agent_sanitize import _isolated, _sanitize_events, serve  # noqa: F401 -- the same scripted-server fixtures
from sandbox.tasks.task import describe_sizes, load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def _run(url, tmp_path, answers: int):
    return agent.optimize("vector_add", model="scripted", base_url=url, iterations=answers, sandbox="fake", tune=False,
                          traces=tmp_path / "traces")


def test_a_leader_wrong_at_a_heldout_size_gives_way_to_the_next_best_and_is_named_beside_it(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.6, heldout_wrong", variant=2)])
    run = _run(url, tmp_path, 2)
    assert run.best.id == "c0001" and run.summary.best.id == "c0001"
    flagged = run.summary.claim.set_aside
    assert [f.id for f in flagged] == ["c0002"] and flagged[0].speedup.value > 1.5
    # set aside at the first held-out size it failed: the two after it were not evaluated
    assert flagged[0].note.startswith("REGRESSES at 1 of 3 held-out sizes (2 not checked: it was set aside before "
                                         "them): wrong at n=1000003")
    assert [r.sizes for r in flagged[0].rows] == [{"n": 1000003}]
    assert len(run.summary.claim.rows) == 3   # the winner's own rows: every held-out size
    assert all(r.status == "ok" and not r.flagged for r in run.summary.claim.rows)   # the winner's own rows
    assert "2244)" in (run.path / "best.cu").read_text()                                   # c0001's grid cap
    assert any(n.startswith("set aside: c0002 led at 1.6") for n in run.summary.notes)
    reread = agent.load_run(run.path)
    assert reread.best.id == "c0001"
    view = summary_view(read(run.path))
    assert view["best"]["id"] == "c0001" and view["best"]["set_aside"].startswith("set aside: c0002 led at")


def test_a_leader_set_aside_at_a_heldout_size_is_never_sanitized(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.6, heldout_wrong", variant=2)])
    run = _run(url, tmp_path, 2)
    assert run.best.id == "c0001" and [f.id for f in run.summary.claim.set_aside] == ["c0002"]
    assert [e["candidate_id"] for e in _sanitize_events(run)] == ["c0001"]   # the held-out check came first
    assert run.summary.claim.sanitizer.winner == "c0001" and run.summary.claim.sanitizer.status == "clean"


def test_a_leader_the_sanitizer_rejects_gives_way_to_the_next_which_is_checked_at_the_heldout_sizes(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3, heldout_wrong", variant=1), answer(fake="speedup=1.5", variant=2),
                 answer(fake="speedup=1.7, race", variant=3)])
    run = _run(url, tmp_path, 3)
    # c0003 passed the held-out sizes and then failed the sanitizer; c0002, next, passed both; c0001 was never reached
    assert run.best.id == "c0002" and not run.summary.claim.set_aside
    assert [e["candidate_id"] for e in _sanitize_events(run)] == ["c0003", "c0002"]
    assert run.summary.claim.sanitizer.rejected == ["c0003"] and run.summary.claim.sanitizer.winner == "c0002"
    assert all(r.status == "ok" and not r.flagged for r in run.summary.claim.rows)


def test_a_leader_the_sanitizer_rejects_gives_way_to_one_that_fails_a_heldout_size_in_its_turn(serve, tmp_path):
    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.5, heldout_wrong", variant=2),
                 answer(fake="speedup=1.7, race", variant=3)])
    run = _run(url, tmp_path, 3)
    assert run.best.id == "c0001" and [f.id for f in run.summary.claim.set_aside] == ["c0002"]
    # c0002 was sanitized when c0003 was rejected (the sanitizer goes on to the next best), then set aside
    assert [e["candidate_id"] for e in _sanitize_events(run)] == ["c0003", "c0002", "c0001"]
    assert run.summary.claim.sanitizer.winner == "c0001"


def test_when_every_leader_tried_fails_a_heldout_size_no_winner_is_claimed(serve, tmp_path):
    url = serve([answer(fake=f"speedup={1.3 + 0.2 * v}, heldout_wrong", variant=v) for v in (1, 2, 3)]
                + [answer(fake="speedup=1.1", variant=4)])
    run = _run(url, tmp_path, 4)
    assert run.best is None and run.summary.best is None
    assert [f.id for f in run.summary.claim.set_aside] == ["c0003", "c0002", "c0001"]
    assert any("no winner claimed; the 3 leaders re-checked all failed a held-out size, and 1 other" in n
               for n in run.summary.notes)


def test_the_heldout_sizes_never_reach_a_prompt_only_that_there_are_some():
    task = load_task("vector_add")
    cand = load_candidate(task.baseline_path)
    base = Entry("c0000", cand, new_result(task, cand, Status.ok), [], "baseline", 0, "start")
    request = ProposalRequest(task, [base], base, base, [], DEVICE, 2, {"sandbox": "gpu"})
    text = "\n".join(m["content"] for m in prompts.messages(request))
    assert task.spec.sizes.heldout
    for sizes in task.spec.sizes.heldout:
        assert describe_sizes(sizes) not in text
        assert all(str(v) not in text for v in sizes.values())
    assert f"at {len(task.spec.sizes.heldout)} further sizes that are not shown here" in text


def test_a_slower_held_out_size_disqualifies_only_a_leader_that_claimed_to_be_faster():
    from agent.claims.heldout import disqualifies
    from agent.trace.records import HeldoutRow
    from sandbox.judging.result import Interval

    slower = HeldoutRow(sizes={"n": 7}, status="ok", flagged=True, reason="slower than the baseline (interval below 1.0)")
    wrong = HeldoutRow(sizes={"n": 7}, status="wrong", flagged=True, reason="the winner is wrong at this size")
    clean = HeldoutRow(sizes={"n": 9}, status="ok")
    assert disqualifies([clean, slower], Interval(value=1.4, low=1.3, high=1.5))
    assert not disqualifies([clean, slower], Interval(value=0.2, low=0.19, high=0.21))
    assert not disqualifies([clean, slower], None)
    assert disqualifies([wrong], Interval(value=0.2, low=0.19, high=0.21))
    assert not disqualifies([clean], Interval(value=1.4, low=1.3, high=1.5))


def test_the_sanitizers_runs_start_before_the_heldout_check_only_when_a_leader_will_be_sanitized(serve, tmp_path,
                                                                                                  monkeypatch):
    from sandbox import FakeSandbox

    log = []
    monkeypatch.setattr(FakeSandbox, "warm_sanitizer", lambda sb, tools: log.append(("warm", tools)))
    evaluate, sanitize = FakeSandbox.evaluate, FakeSandbox.sanitize
    monkeypatch.setattr(FakeSandbox, "evaluate", lambda sb, task, cand, sizes=None, *a, **kw: (
        log.append(("held-out" if sizes else "evaluate", cand.label)), evaluate(sb, task, cand, sizes, *a, **kw))[1])
    monkeypatch.setattr(FakeSandbox, "sanitize", lambda sb, task, cand, **kw: (
        log.append(("sanitize", cand.label)), sanitize(sb, task, cand, **kw))[1])
    run = _run(serve([answer(fake="speedup=1.3", variant=1)]), tmp_path / "a", 1)
    assert run.best.id == "c0001"
    after = log[next(i for i, e in enumerate(log) if e[0] == "warm"):]
    assert after[0] == ("warm", ("memcheck", "racecheck")) and after[1][0] == "held-out" and after[-1][0] == "sanitize"
    assert all(e[0] != "evaluate" for e in after)   # after the last candidate's evaluation
    log.clear()
    agent.optimize("vector_add", model="scripted", base_url=serve([answer(fake="speedup=1.3", variant=1)]),
                   iterations=1, sandbox="fake", tune=False, traces=tmp_path / "b", sanitize=False)
    assert not any(e[0] == "warm" for e in log)   # nothing will be sanitized
    log.clear()
    agent.optimize("vector_add", model="scripted", base_url=serve([answer(fake="speedup=0.8", variant=1)]),
                   iterations=1, sandbox="fake", tune=False, traces=tmp_path / "c")
    assert not any(e[0] in ("warm", "held-out", "sanitize") for e in log)   # no leader: no claim to check


def test_the_heldout_check_comes_before_tuning_so_a_leader_set_aside_is_not_tuned_and_is_reported_set_aside(
        serve, tmp_path):
    from agent.cli.app import console
    from agent.cli.optimize import print_summary
    from agent.report.html import render_report
    from agent.trace.events import ScreenEvent, read_events

    url = serve([answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.6, heldout_wrong", variant=2)])
    run = agent.optimize("vector_add", model="scripted", base_url=url, iterations=2, sandbox="fake", sanitize=False,
                         traces=tmp_path / "traces", config={"tune": {"max_evaluations": 4}})
    tuned = [e for e in run.entries if e.origin == "tuner"]
    screens = [e for e in read_events(run.path) if isinstance(e, ScreenEvent)]
    assert tuned and screens and {p for e in tuned for p in e.parent_ids} == {"c0001"}   # tuned from the leader that passed
    assert {p for e in screens for p in e.parents} == {"c0001"}
    assert [f.id for f in run.summary.claim.set_aside] == ["c0002"]   # no tuned copy of it took up a re-check
    assert run.best is not None and run.best.id in {"c0001"} | {e.id for e in tuned}
    assert run.summary.claim.rows is not None and all(r.status == "ok" for r in run.summary.claim.rows)
    why = run.not_winner()["c0002"]
    assert why.reason == "set_aside" and why.text.startswith("set aside: it led, but regresses at 1 of 3 held-out sizes")
    shown = summary_view(read(run.path))   # what show --json prints
    assert shown["not_winner"]["c0002"] == why.to_json()
    assert "set aside: it led, but regresses at" in render_report(read(run.path))
    with console.capture() as table:
        print_summary(run)
    assert "not the winner: set aside: it led" in " ".join(table.get().split())
