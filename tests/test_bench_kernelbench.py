"""bench/kernelbench.py's arithmetic: fast_p is a share of every problem given (refused imports count as not
correct and are listed with the reason); it is counted both ways, by KernelBench's rule (the mean speedup clears p)
and by ours (the low end of the speedup interval clears p); the geometric mean carries a bootstrap interval; the
table says what was run and in which TF32 mode eager was timed."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import kernelbench as kb  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def _p(name, eager=None, compile_=None, correct=True, **kw):
    speedups = {k: v for k, v in (("eager", eager), ("compile", compile_)) if v}
    means = {k: v[0] for k, v in speedups.items()}   # unless given: the mean speedup is the interval's value
    return kb.Problem(name, "done", correct=correct, compiled=True, speedups=speedups or None,
                      mean_speedups=kw.pop("mean_speedups", means), **kw)


def test_fast_p_counts_only_correct_problems_whose_interval_low_end_clears_p():
    problems = [_p("a", eager=(1.5, 1.3, 1.7), compile_=(1.1, 0.9, 1.3)),
                _p("b", eager=(1.25, 1.19, 1.3), compile_=(1.21, 1.201, 1.22)),
                _p("c", eager=(3.0, 2.5, 3.5), correct=False),
                kb.Problem("d", "error")]
    assert kb.fast_p(problems, "eager", 1.0) == 0.5          # a and b of four; c is not correct
    assert kb.fast_p(problems, "eager", 1.2) == 0.25         # b's point estimate 1.25 clears 1.2, its low end 1.19 does not
    assert kb.fast_p(problems, "compile", 1.0) == 0.25       # a's compile interval reaches below 1.0
    assert kb.fast_p(problems, "compile", 1.2) == 0.25
    assert kb.fast_p(problems, "eager", 2.0) == 0.0
    assert kb.fast_p([], "eager", 1.0) == 0.0


def test_kernelbenchs_rule_counts_the_mean_speedup_ours_the_interval_low_end_over_every_problem_given():
    problems = [_p("a", eager=(1.25, 1.19, 1.3)),                              # mean 1.25: KernelBench's 1.2, not ours
                _p("b", eager=(0.9, 0.85, 0.95), mean_speedups={"eager": 1.6}),  # noisy: a mean above the median
                _p("c", eager=(3.0, 2.5, 3.5), correct=False),
                kb.Problem("d", "refused", note="ProblemError: no class Model"),
                kb.Problem("e", "error")]
    assert [kb.fast_p(problems, "eager", p, "mean") for p in (0.0, 0.8, 1.2, 1.5, 2.0)] == [0.4, 0.4, 0.4, 0.2, 0.0]
    assert [kb.fast_p(problems, "eager", p, "interval") for p in (0.0, 0.8, 1.2, 1.5, 2.0)] == [0.4, 0.4, 0.0, 0.0, 0.0]
    assert kb.fast_p(problems, "compile", 0.0, "mean") == 0.0                   # no compile time: not counted
    s = kb.summarize(problems)
    assert s["problems"] == 5 and s["refused"] == {"d": "ProblemError: no class Model"}
    assert s["fast_p"]["eager"]["mean"][1.2] == 0.4 and s["fast_p"]["eager"]["interval"][1.2] == 0.0
    assert kb.PS == (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0)


def test_the_mean_speedup_is_the_mean_baseline_time_over_the_mean_candidate_time():
    timing = {"impls": {"candidate": {"samples_ms": [1.0, 3.0]}, "eager": {"samples_ms": [4.0, 4.0, 7.0]},
                        "compile": {"samples_ms": []}}}
    assert kb.mean_speedups(timing) == {"eager": 2.5}
    assert kb.mean_speedups({}) == {}


def test_a_refused_problem_stays_in_the_table_with_its_reason(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "batch.json").write_text(json.dumps({"tasks": ["/x/1_relu"], "results": {}}))
    problems = kb.collect(tmp_path / "b", {"2_conv": "ProblemError: 2_conv.py: forward returned a list",
                                           "1_relu": "stale entry for a problem that ran"})
    assert [(x.name, x.state) for x in problems] == [("1_relu", "not run"), ("2_conv", "refused")]
    text = kb.render(problems, "level1")
    assert "problems given: 2 (imported 1, refused at import 1); every share below is of all 2" in text
    assert "refused at import (counted as not correct): 1\n- 2_conv: ProblemError: 2_conv.py: forward returned a list" in text
    assert [x.name for x in kb.collect(None, {"3_gru": "timeout"})] == ["3_gru"]


def test_the_table_names_the_tf32_mode_eager_was_timed_in():
    assert kb.tf32_line(["off"], None) == "PyTorch eager and torch.compile timed with TF32 off (float32 arithmetic)"
    assert "PyTorch's default TF32 settings (cuDNN convolutions in TF32, matmuls not; as KernelBench)" in \
        kb.tf32_line(["default"], "off")
    assert kb.tf32_line(["default", "off"], None).startswith("PyTorch eager and torch.compile timed in MIXED TF32 modes")
    assert kb.tf32_line([], "on") == ("PyTorch eager and torch.compile to be timed with TF32 on (matmuls and "
                                      "convolutions) (no problem was timed)")
    text = kb.render([_p("a", eager=(2.0, 1.8, 2.2), tf32="default")], "t")
    assert "timed with PyTorch's default TF32 settings" in text


def test_geometric_mean_and_its_bootstrap_interval():
    g, lo, hi = kb.geomean_ci([2.0, 0.5, 1.0, 4.0])
    assert g == pytest.approx(math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 4))
    assert lo <= g <= hi and lo >= 0.5 and hi <= 4.0
    assert kb.geomean_ci([1.5, 1.5, 1.5]) == pytest.approx((1.5, 1.5, 1.5))
    assert kb.geomean_ci([]) is None


def test_summary_and_table_name_eager_and_compile_and_cost_per_problem():
    problems = [_p("a", eager=(2.0, 1.8, 2.2), compile_=(1.0, 0.9, 1.1), tokens=1000, usd=0.01, gpu_s=10.0),
                _p("b", eager=(0.5, 0.45, 0.55), compile_=(0.25, 0.2, 0.3), tokens=3000, usd=0.03, gpu_s=30.0),
                kb.Problem("c", "error", note="exit code 2")]
    s = kb.summarize(problems)
    assert (s["problems"], s["correct"], s["tokens"], s["gpu_s"]) == (3, 2, 4000, 40.0)
    assert s["fast_p"]["eager"]["interval"][1.0] == pytest.approx(1 / 3) and s["fast_p"]["compile"]["interval"][1.0] == 0
    (g, _, _), count = s["geomean"]["eager"]
    assert count == 2 and g == pytest.approx(1.0)
    text = kb.render(problems, "level")
    assert "problems correct: 2 of 3 (67%)" in text
    assert "| fast_p | p = 0 | p = 0.5 | p = 0.8 | p = 1 | p = 1.2 | p = 1.5 | p = 2 |" in text
    assert "| vs PyTorch eager, interval low end > p | 67% | 33% | 33% | 33% | 33% | 33% | 0% |" in text
    assert "| vs PyTorch eager, KernelBench's rule (mean speedup > p) | 67% | 33% | 33% | 33% | 33% | 33% | 0% |" in text
    assert "| vs PyTorch compile, interval low end > p | 67% | 33% | 33% | 0% | 0% | 0% | 0% |" in text
    assert "per problem: 1,333 tokens, $0.0133, 13.33 GPU-s" in text
    assert "| c | error | - | - | - | 0 | 0.0000 | 0.00 | exit code 2 |" in text


def test_a_compile_only_batch_says_nothing_ran():
    problems = [kb.Problem("a", "done", compiled=True), kb.Problem("b", "done", compiled=False)]
    text = kb.render(problems, "ci")
    assert "problems compiled: 1 of 2 (nothing ran: correctness and speed unknown)" in text


def test_a_problem_is_read_from_its_run_folder(tmp_path):
    run = tmp_path / "3_matmul"
    (run / "candidates" / "c0002").mkdir(parents=True)
    totals = {"tokens": 900, "usd": 0.002, "gpu_s": 12.5}
    (run / "summary.json").write_text(json.dumps({"totals": totals, "counts": {"ok": 2}, "simulated": True,
                                                  "best": {"id": "c0002"}, "stop_reason": "iterations"}))
    timing = {"speedup": {"eager": {"value": 1.4, "low": 1.3, "high": 1.5},
                          "compile": {"value": 0.9, "low": 0.8, "high": 1.0}}}
    timing["impls"] = {"candidate": {"samples_ms": [1.0, 1.0]}, "eager": {"samples_ms": [1.5, 1.3]}}
    timing["torch_tf32"] = "default"
    (run / "candidates" / "c0002" / "result.json").write_text(json.dumps({"status": "ok", "timing": timing}))
    x = kb.read_problem("3_matmul", run, None)
    assert x.correct and x.simulated and x.winner == "c0002" and x.speedups["eager"] == (1.4, 1.3, 1.5)
    assert x.mean_speedups == {"eager": pytest.approx(1.4)} and x.tf32 == "default"
    assert kb.read_problem("4_conv2d", tmp_path / "4_conv2d", {"state": "error", "stop": "boom"}).note == "boom"


def _answer(stem: str) -> str:
    source = (ROOT / "tests" / "fixtures" / "kernelbench" / "answers" / f"{stem}.cu").read_text()
    return f"Written from the module.\n\n```cuda\n{source}```\n"


@pytest.mark.timeout(600)
def test_the_bench_runs_imported_problems_against_the_scripted_server_and_resumes(httpserver, tmp_path):
    pytest.importorskip("torch")
    import subprocess

    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "agent"))
    from scripted_server import Script

    level = tmp_path / "level1"
    level.mkdir()
    for stem in ("1_swish_clamp", "2_mean_over_dim"):
        (level / f"{stem}.py").write_text((ROOT / "tests" / "fixtures" / "kernelbench" / f"{stem}.py").read_text())
    (level / "3_no_model.py").write_text("import torch\n\n\ndef get_inputs():\n    return [torch.rand(4)]\n")
    script = Script([_answer("1_swish_clamp"), _answer("2_mean_over_dim")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    env = {**{k: v for k, v in __import__("os").environ.items() if not k.startswith("OPENAI_")},
           "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "bench/kernelbench.py", str(level), "--model", "scripted", "--base-url",
            httpserver.url_for("/v1"), "--iterations", "1", "--sandbox", "compile-only", "--traces", str(tmp_path / "t")]
    first = subprocess.run(args, capture_output=True, text=True, timeout=500, cwd=ROOT, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "problems given: 3 (imported 2, refused at import 1)" in first.stdout
    assert "problems compiled: 2 of 3 (nothing ran: correctness and speed unknown)" in first.stdout
    assert "| vs PyTorch eager, KernelBench's rule (mean speedup > p) | 0% | 0% | 0% | 0% | 0% | 0% | 0% |" in first.stdout
    assert "| 2_mean_over_dim | done |" in first.stdout and "| 3_no_model | refused |" in first.stdout
    assert "- 3_no_model: " in first.stdout and "3_no_model.py" in first.stdout.split("- 3_no_model: ")[1]
    assert "to be timed with TF32 off (float32 arithmetic) (no problem was timed)" in first.stdout
    assert len(script.requests) == 2 and "class Model" in script.user_messages[0]
    again = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert again.returncode == 0 and len(script.requests) == 2, again.stderr   # finished problems are not run again
    assert "problems compiled: 2 of 3" in again.stdout and "- 3_no_model: " in again.stdout
    table = subprocess.run([sys.executable, "bench/kernelbench.py", str(level), "--table-only", "--traces",
                            str(tmp_path / "t"), "--out", str(tmp_path / "table.md")], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, env=env)
    assert table.returncode == 0 and (tmp_path / "table.md").read_text() in table.stdout
    assert first.stdout.split("- 3_no_model: ")[1] in table.stdout   # the reason is kept for the table


def test_the_tf32_option_reaches_the_sandbox_settings_and_a_bad_mode_is_one_clear_error():
    from agent.run_options import OptionError, RunOptions

    assert RunOptions(torch_tf32="default").overrides() == {"sandbox_options": {"torch_tf32": "default"}}
    with pytest.raises(OptionError, match="--torch-tf32: expected one of off, default, on, got 'tf32'"):
        RunOptions(torch_tf32="tf32").overrides()


@pytest.mark.timeout(300)
def test_a_timed_imported_task_records_the_tf32_mode_of_its_pytorch_baselines(tmp_path):
    pytest.importorskip("torch")
    from sandbox import SandboxConfig, load_candidate, load_task
    from sandbox.host.open import open_sandbox
    from sandbox.pytorch.importer import import_problem

    kb_dir = ROOT / "tests" / "fixtures" / "kernelbench"
    task = load_task(import_problem(kb_dir / "2_mean_over_dim.py", tmp_path).folder)
    with open_sandbox("fake", SandboxConfig(torch_tf32="default")) as sb:
        result = sb.evaluate(task, load_candidate(kb_dir / "answers" / "2_mean_over_dim.cu"))
    assert result.status.value == "ok" and result.timing.torch_tf32 == "default"


@pytest.mark.gpu
@pytest.mark.timeout(1800)
def test_on_a_gpu_the_table_gives_fast_p_both_ways_over_every_problem_given(httpserver, tmp_path):
    """The lead's check on a GPU: two imported level-1 problems optimized against the scripted server (one correct
    answer each), one problem refused at import; eager timed with PyTorch's default TF32 settings."""
    pytest.importorskip("torch")
    import subprocess

    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "agent"))
    from scripted_server import Script

    level = tmp_path / "level1"
    level.mkdir()
    for stem in ("1_swish_clamp", "2_mean_over_dim"):
        (level / f"{stem}.py").write_text((ROOT / "tests" / "fixtures" / "kernelbench" / f"{stem}.py").read_text())
    (level / "3_no_model.py").write_text("import torch\n\n\ndef get_inputs():\n    return [torch.rand(4)]\n")
    config = tmp_path / "lean.toml"
    config.write_text('profile = "none"\n[sanitize]\nenabled = false\n[sandbox_options]\ntiming_budget_s = 0.1\n')
    script = Script([_answer("1_swish_clamp"), _answer("2_mean_over_dim")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run([sys.executable, "bench/kernelbench.py", str(level), "--model", "scripted", "--base-url",
                           httpserver.url_for("/v1"), "--iterations", "1", "--sandbox", "gpu", "--torch-tf32", "default",
                           "--config", str(config), "--traces", str(tmp_path / "t")],
                          capture_output=True, text=True, timeout=1700, cwd=ROOT, env=env)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "problems given: 3 (imported 2, refused at import 1)" in done.stdout
    assert "problems correct: 2 of 3 (67%)" in done.stdout
    assert "timed with PyTorch's default TF32 settings" in done.stdout
    rows = {line.split(" | ")[0]: line for line in done.stdout.splitlines() if line.startswith("| vs PyTorch")}
    assert set(rows) == {"| vs PyTorch eager, KernelBench's rule (mean speedup > p)", "| vs PyTorch eager, interval "
                         "low end > p", "| vs PyTorch compile, KernelBench's rule (mean speedup > p)",
                         "| vs PyTorch compile, interval low end > p"}
    assert all(line.split(" | ")[1] == "67%" for line in rows.values())    # p = 0: both correct problems count
