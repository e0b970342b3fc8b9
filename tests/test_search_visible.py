"""The built-in search as a user sees it: the screened configurations in show, report, the notebook and --json;
the winner's knobs and flags on its row; why each other timed candidate is not the winner; progress against
the budget; compiler warnings of a compile that succeeded."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from agent.loop.lineage import MemoryLineage
from agent.protocols import Entry
from agent.report.search import not_winner, runner_up
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Interval, Result, Status, Timing
from sandbox.tasks.task import load_task

ROOT = Path(__file__).resolve().parent.parent
UNROLL_ZERO = ROOT / "tests" / "fixtures" / "candidates" / "unroll_zero.cu"


@pytest.fixture(scope="module")
def task():
    return load_task("vector_add")


def _entry(task, eid, low, value, high, origin="tuner"):
    timing = Timing(sizes={"n": 1}, rounds=10, l2_flush_bytes=0, rotating_sets=1, impls={},
                    speedup={"baseline": Interval(value=value, low=low, high=high)})
    result = Result(status=Status.ok, task=task.name, task_fingerprint=task.fingerprint, candidate=eid,
                    candidate_key=eid, timing=timing)
    return Entry(eid, load_candidate(task.baseline_path), result, [] if origin == "baseline" else ["c0000"], origin, 0)


def _lineage(*entries) -> MemoryLineage:
    lineage = MemoryLineage()
    for e in entries:
        lineage.add(e)
    return lineage


@pytest.mark.timeout(60)
def test_a_finalist_inside_the_baselines_noise_floor_is_named_with_that_reason(task):
    base = _entry(task, "c0000", 0.997, 1.003, 1.010, origin="baseline")
    finalist = _entry(task, "c0001", 1.004, 1.012, 1.015)
    lineage = _lineage(base, finalist)
    assert lineage.best() is base   # the rule: a tie with the baseline goes to the baseline
    entry, why = runner_up(lineage.entries(), None, base)
    assert entry is finalist
    assert why.reason == "noise_floor" and "1.003x [0.997, 1.010]" in why.text


@pytest.mark.timeout(60)
def test_each_other_timed_candidate_says_why_it_is_not_the_winner(task):
    base = _entry(task, "c0000", 0.99, 1.0, 1.01, origin="baseline")
    slower = _entry(task, "c0001", 1.08, 1.10, 1.12)
    winner = _entry(task, "c0002", 1.18, 1.20, 1.22)
    tied = _entry(task, "c0003", 1.19, 1.21, 1.23)
    below = _entry(task, "c0004", 0.88, 0.90, 0.92)
    lineage = _lineage(base, slower, winner, tied, below)
    assert lineage.best() is winner
    reasons = not_winner(lineage.entries(), winner, base)
    assert {k: v.reason for k, v in reasons.items()} == {"c0001": "slower", "c0003": "tied", "c0004": "below_baseline"}
    assert "c0002 (1.200x [1.180, 1.220])" in reasons["c0001"].text
    assert "earlier entry keeps the lead" in reasons["c0003"].text


@pytest.mark.timeout(60)
def test_a_leader_the_held_out_check_set_aside_is_said_to_be_set_aside_not_tied(task):
    from agent.trace.claim import FlaggedWinner, HeldoutRow

    base = _entry(task, "c0000", 0.99, 1.0, 1.01, origin="baseline")
    aside = _entry(task, "c0001", 1.50, 1.52, 1.54)
    winner = _entry(task, "c0002", 1.18, 1.20, 1.22)
    lineage = _lineage(base, aside, winner)
    lineage.set_aside("c0001")
    assert lineage.best() is winner
    note = "REGRESSES at 1 of 3 held-out sizes: wrong at n=1000003"
    flagged = [FlaggedWinner(id="c0001", note=note, rows=[HeldoutRow(sizes={"n": 1000003}, status="wrong")])]
    assert not_winner(lineage.entries(), winner, base)["c0001"].reason == "tied_earlier"   # without the claim's word
    why = not_winner(lineage.entries(), winner, base, flagged)["c0001"]
    assert why.reason == "set_aside" and why.text == "set aside: it led, but regresses at 1 of 3 held-out sizes: " \
                                                     "wrong at n=1000003"
    entry, why = runner_up(lineage.entries(), None, base, flagged)   # where no winner is left: the fastest, and why
    assert entry is aside and why.reason == "set_aside"


@pytest.mark.timeout(60)
def test_rows_that_differ_only_in_their_id_are_collapsed_into_one():
    from agent.cli.optimize import collapse

    same = ["compiled", "-", "12", "tuner", "c0000", ""]
    rows = [["c0001", *same], ["c0002", *same], ["c0003", *same], ["c0004", "compiled", "-", "14", "tuner", "c0000", ""]]
    out = collapse(rows)
    assert out == [["c0001..c0003 (3 rows)", *same], rows[3]]


# ---- one simulated search, shared by the tests below --------------------------------------------------


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A fake-sandbox search of vector_add with its live progress recorded, then optimize --json of a second one."""
    import agent

    from agent.loop.progress import status_line

    traces = tmp_path_factory.mktemp("traces")
    snaps: list[dict] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        run = agent.optimize("vector_add", sandbox="fake", traces=traces, run_id="search",
                             on_progress=lambda kind, snap: snaps.append(snap))
    return run, traces, snaps, [status_line(s) for s in snaps]


@pytest.mark.timeout(300)
def test_show_json_the_notebook_and_optimize_agree_on_the_screened_configurations(searched, kw):
    import agent

    run, traces, _, _ = searched
    shown = kw("show", "search", "--traces", traces, "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    rows = view["screened"]
    stored = agent.load_run(run.path).screened()
    assert rows and rows == [r.to_json() for r in run.screened()] == [r.to_json() for r in stored]
    assert rows == sorted(rows, key=lambda r: (r["relative"] is None, r["relative"] or 0.0))
    finals = {r["evaluated"] for r in rows if r["evaluated"]}
    tuned = {e.id for e in run.entries if e.origin == "tuner"}
    assert finals and finals <= tuned
    assert all(set(r) >= {"knobs", "flags", "status", "relative", "relative_ci", "ms", "evaluated"} for r in rows)
    text = kw("show", "search", "--traces", traces).stdout
    assert f"screened configurations: {len(rows)}, fastest first" in text


@pytest.mark.timeout(300)
def test_optimize_prints_the_winners_knobs_and_flags_and_json_the_screened_configurations(kw, tmp_path):
    out = kw("optimize", "vector_add", "--sandbox", "fake", "--traces", tmp_path / "t", "--run-id", "r")
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "t" / "r" / "summary.json").read_text())
    best = summary["best"]
    config = " ".join([f"{k}={v}" for k, v in best["knobs"].items()] + best["flags"])
    assert f"winner: {config}" in " ".join(out.stdout.split())
    as_json = kw("optimize", "vector_add", "--sandbox", "fake", "--traces", tmp_path / "t", "--run-id", "j", "--json")
    data = json.loads(as_json.stdout)
    assert data["screened"] and any(r["evaluated"] for r in data["screened"])
    ids = {f.name for f in (tmp_path / "t" / "j" / "candidates").iterdir()}
    assert set(data["not_winner"]) <= ids and all(w["reason"] and w["text"] for w in data["not_winner"].values())


@pytest.mark.timeout(300)
def test_the_report_plots_the_space_and_the_roofline_and_the_notebook_returns_both(searched):
    from matplotlib.figure import Figure

    from agent.report.html import render_report
    from agent.trace.reader import read

    run, _, _, _ = searched
    html = render_report(read(run.path))
    flat = html.replace("\n", "")
    assert '<figure class="plot" id="plot-space"><svg' in flat
    assert '<figure class="plot" id="plot-roofline"><svg' in flat
    assert '<table id="screened">' in html
    assert isinstance(run.plot("space"), Figure) and isinstance(run.plot("roofline"), Figure)


@pytest.mark.timeout(300)
def test_progress_counts_against_the_search_budget_and_estimates_the_time_left(searched):
    run, _, snaps, lines = searched
    measured = [l for l in lines if re.search(r"configurations measured \d+/\d+", l)]
    assert measured and any("s left" in l for l in measured)
    done = [s["work"]["done"] for s in snaps if s["work"]["what"] == "configurations measured"]
    assert done == sorted(done) and done[-1] == run.summary.totals.screened
    assert any(re.search(r"finalists evaluated in full \d+/\d+", l) for l in lines)


@pytest.mark.timeout(120)
def test_an_unreachable_endpoint_fails_in_one_line_before_anything_is_compiled(kw, tmp_path):
    out = kw("optimize", "vector_add", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--sandbox", "fake",
             "--traces", tmp_path / "t")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: model endpoint http://127.0.0.1:9/v1 cannot be reached: 127.0.0.1:9: Connection refused; nothing was "
        "compiled or run"]
    assert out.stdout == "" and not (tmp_path / "t").exists()


# ---- compiler warnings -------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_the_warnings_of_a_compile_that_succeeded_are_shown_in_compile_the_result_and_the_prompt(kw, task):
    from agent.proposers.prompts import entry_view, environment
    from sandbox import CompileOnlySandbox

    out = kw("compile", "vector_add", UNROLL_ZERO)
    assert out.returncode == 0
    assert "compiler warnings (1):" in out.stdout and "ignoring pragma for this loop" in out.stdout
    with CompileOnlySandbox() as sb:
        result = sb.compile(task, load_candidate(UNROLL_ZERO))
    assert "compiler warning: candidate.cu(16): warning #20168-D" in result.summary()
    view = entry_view(Entry("c0001", load_candidate(UNROLL_ZERO), result, ["c0000"], "llm", 1))
    prompt = environment().from_string('{% import "_result.j2" as r %}{{ r.result(c) }}').render(c=view)
    assert "It compiled with warnings" in prompt and "#pragma unroll UNROLL" in prompt


# ---- help, no driver, fake eval, file modes ----------------------------------------------------------

COMMANDS = ("tasks", "compile", "eval", "check-task", "doctor", "profile", "optimize", "batch", "report", "show",
            "verify", "best", "import", "export")


@pytest.mark.timeout(300)
def test_every_help_has_exit_codes_and_environment_and_no_type_placeholders(kw):
    from typer.testing import CliRunner

    from agent.cli import app

    for command in COMMANDS:   # in this process (the same app python -m agent runs); optimize's also as a user runs it
        shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        text = " ".join(shown.output.split())
        assert "Exit codes: 0" in text and "Environment:" in text, command
        assert not re.search(r"<(bool|str|int|float|path|list\[)", text), command
    optimize = " ".join(kw("optimize", "--help").stdout.split())
    assert "the cluster is [cluster] of --config" in optimize
    assert "OPENAI_BASE_URL" in optimize and "KERNELWRIGHT_CACHE_DIR" in optimize


@pytest.mark.timeout(60)
def test_without_a_driver_the_device_problem_says_so_and_what_works(monkeypatch):
    import importlib

    app_mod = importlib.import_module("agent.cli.app")   # the module (agent.cli.app, the attribute, is the Typer app)
    monkeypatch.setattr(app_mod, "driver_present", lambda: False)
    said = app_mod.device_problem("CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    assert said == "no NVIDIA driver found: compile, check-task and --sandbox fake work here"
    monkeypatch.setattr(app_mod, "driver_present", lambda: True)
    assert app_mod.device_problem("no usable CUDA device: out of memory\nmore") == "no usable CUDA device: out of memory"


@pytest.mark.timeout(120)
def test_eval_with_the_fake_sandbox_needs_no_gpu_and_says_simulated(kw):
    out = kw("eval", "vector_add", ROOT / "kernels" / "vector_add" / "baseline.cu", "--sandbox", "fake")
    assert out.returncode == 0, out.stderr
    assert "(SIMULATED)" in out.stdout.splitlines()[0]
    bad = kw("eval", "vector_add", ROOT / "kernels" / "vector_add" / "baseline.cu", "--sandbox", "cpu")
    assert bad.returncode == 2 and "--sandbox: expected one of gpu, fake" in bad.stderr


@pytest.mark.timeout(120)
def test_a_fake_result_summary_carries_the_simulated_marker(task):
    from sandbox import FakeSandbox

    with FakeSandbox() as sb:
        result = sb.evaluate(task, load_candidate(task.baseline_path))
    assert result.summary().startswith(f"{result.candidate}: ok [SIMULATED]")


@pytest.mark.timeout(120)
def test_a_report_is_readable_by_others_as_the_umask_allows(searched, tmp_path):
    from agent.report.html import write_report
    from agent.trace.reader import read

    old = os.umask(0o022)
    try:
        path = write_report(read(searched[0].path), tmp_path / "r.html")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.timeout(60)
def test_asking_a_run_without_a_winner_for_its_speedup_says_why_there_is_none(task):
    from agent.api import NoWinner, Run
    from agent.trace.records import EntryRow, Summary

    def summary(sandbox: str, best: str | None = None) -> Summary:
        row = EntryRow(id=best, origin="llm", parents=[], status="ok") if best else None
        return Summary(run_id="r", task={"name": "softmax"}, sandbox=sandbox, simulated=True, candidates=2, best=row)

    base = _entry(task, "c0000", 0.997, 1.003, 1.010, origin="baseline")
    finalist = _entry(task, "c0001", 1.004, 1.012, 1.015)
    run = Run("r", Path("."), summary("fake"), [base, finalist])
    with pytest.raises(NoWinner, match=r"the fastest, c0001 at 1.012x \[1.004, 1.015\], is not the winner: within "
                                       r"the noise floor"):
        run.speedup()
    compiled = Run("c", Path("."), summary("compile-only"), [])
    with pytest.raises(NoWinner, match="a compile-only run times nothing"):
        compiled.speedup()
    won = Run("w", Path("."), summary("fake", "c0001"), [base, finalist])
    assert won.speedup().value == 1.012
