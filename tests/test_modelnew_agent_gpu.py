"""On a real GPU: a scripted endpoint answering in KernelBench's own format (``--answer-format modelnew``) drives
``optimize`` on an imported problem end to end. Each answer is built and judged in the confined process; the winner
is ``ok`` with speedups over PyTorch eager and torch.compile (intervals), its format verdicts pass, its held-out
re-check runs through the same judge, the sanitizer and the profiler say plainly that they do not apply, ``verify``
re-judges the winner (exit 0: it reproduces, 1: it does not; never a crash), and the exported module's ``check()``
passes on the GPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import agent

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
SOLUTIONS = ROOT / "tests" / "modelnew" / "gpu"
CONFIG = {"model": {"answer_format": "modelnew"}, "budget": {"gpu_seconds": 600},
          "sandbox_options": {"timing_budget_s": 0.1}}


def _answer(name: str) -> str:
    return f"One elementwise kernel.\n\n```python\n{(SOLUTIONS / f'{name}.py').read_text()}```\n"


@pytest.mark.gpu
@pytest.mark.timeout(1800)
def test_a_modelnew_answer_drives_optimize_on_the_gpu_and_its_winner_names_eager_and_compile(httpserver, tmp_path,
                                                                                           monkeypatch):
    pytest.importorskip("torch")
    from sandbox.pytorch.importer import import_problem
    from sandbox.pytorch.modelnew import ModelNewSolution

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    folder = import_problem(KB / "1_swish_clamp.py", tmp_path / "tasks").folder
    script = Script([_answer("honest_swish"), _answer("honest_swish_vec4")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize(str(folder), model="scripted", base_url=httpserver.url_for("/v1"), iterations=2,
                         sandbox="gpu", traces=tmp_path / "traces", run_id="mn", config=CONFIG)
    shown = run.summary.to_json()
    print(json.dumps({"best": shown["best"], "stops": shown["stops"], "heldout": shown["claim"]["heldout"],
                      "notes": shown["notes"]}, indent=2, default=str))
    for e in run.entries:
        print(e.id, e.result.summary(), [(v.check, v.outcome) for v in e.result.verdicts])
    assert "ModelNew" in script.requests[0]["messages"][0]["content"]
    assert [e.origin for e in run.entries] == ["llm", "llm"]
    assert all(isinstance(e.candidate, ModelNewSolution) for e in run.entries)
    assert all(e.result.status.value == "ok" for e in run.entries), [e.result.error for e in run.entries]
    best = run.best
    assert best is not None and not best.result.env.simulated
    timing = best.result.timing
    assert timing.primary == "eager" and set(timing.speedup) == {"eager", "compile"}, (timing.speedup,
                                                                                       timing.unavailable)
    for name in ("eager", "compile"):
        s = timing.speedup[name]
        assert 0 < s.low <= s.value <= s.high
    outcomes = {v.check: v.outcome for v in best.result.verdicts}
    assert outcomes["no_custom_kernel"] == "pass" and outcomes["inputs_written"] == "pass", outcomes
    claim = run.summary.claim
    assert "vs eager" in claim.heldout.text and "vs compile" in claim.heldout.text
    assert claim.heldout.rows and all(r.status == "ok" for r in claim.heldout.rows), claim.heldout.rows
    assert claim.sanitizer.status == "skipped" and "not run on a ModelNew solution" in claim.sanitizer.text
    assert any("tuning skipped: the leader is a ModelNew module" in n for n in run.summary.notes)
    profiled = [e.result.profile for e in run.entries if e.result.profile is not None]
    assert all(p.status == "skipped" and "ncu is not attached" in p.reason for p in profiled)
    print(f"winner {best.id}: {best.result.summary()}")

    verified = subprocess.run([sys.executable, "-m", "agent", "verify", str(run.path), "--json"], capture_output=True,
                              text=True, timeout=900, cwd=ROOT)
    print("verify:", verified.returncode, verified.stdout[-2000:], verified.stderr[-2000:])
    assert verified.returncode in (0, 1) and best.id in verified.stdout, verified.stderr

    out = tmp_path / "swish_modelnew.py"
    exported = subprocess.run([sys.executable, "-m", "agent", "export", str(run.path), "--torch", "-o", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert exported.returncode == 0, exported.stderr
    spec = importlib.util.spec_from_file_location(out.stem, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    errors = module.check()
    assert set(errors) == {"out"}, errors
    print("exported check():", errors)
