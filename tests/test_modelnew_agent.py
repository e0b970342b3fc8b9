"""The agent loop answering in KernelBench's own format (``model.answer_format = "modelnew"``), on the fake sandbox
with a scripted endpoint: the prompt asks for a ModelNew module, the answers become ModelNew candidates judged
through the same verbs, and the trace, lineage, show, report, verify and export all handle them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import agent  # noqa: E402
from agent.config import ConfigError  # noqa: E402
from agent.proposers import modelnew as modelnew_format  # noqa: E402
from agent.proposers.answer import FormatError  # noqa: E402
from agent.trace.reader import read  # noqa: E402
from sandbox.pytorch.modelnew import ModelNewSolution  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "tests" / "modelnew" / "gpu"
pytestmark = pytest.mark.timeout(300)
MODELNEW = {"model": {"answer_format": "modelnew"}}


def answer(name: str, extra: str = "") -> str:
    return f"One elementwise kernel.\n\n```python\n{(SOLUTIONS / f'{name}.py').read_text()}{extra}```\n"


def kw(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_modelnew_answer_drives_optimize_on_an_imported_task(kernelbench_task, httpserver, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    script = Script([answer("honest_swish"), answer("honest_swish_vec4", "# // fake: speedup=1.5\n")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize(str(kernelbench_task("1_swish_clamp")), model="scripted", base_url=httpserver.url_for("/v1"),
                         iterations=2, sandbox="fake", config=MODELNEW, traces=tmp_path / "t", run_id="r1")
    system, first = script.requests[0]["messages"]
    assert "ModelNew" in system["content"] and "load_inline" in system["content"]
    assert "launch plan" not in system["content"]
    assert "## The PyTorch module to replace" in first["content"] and "```python" in first["content"]
    assert "## The parent" in script.user_messages[1] and "class ModelNew" in script.user_messages[1]
    assert [e.origin for e in run.entries] == ["llm", "llm"]
    assert all(isinstance(e.candidate, ModelNewSolution) for e in run.entries)
    best = run.best
    assert best.id == "c0001" and set(best.result.timing.speedup) == {"eager", "compile"}
    assert run.summary.best.against == "eager" and run.summary.best.speedup.value > 1.4
    assert {v.check for v in best.result.verdicts} >= {"no_custom_kernel", "inputs_written", "state_across_calls"}
    assert "vs eager" in run.summary.claim.heldout.text and "vs compile" in run.summary.claim.heldout.text
    assert any("tuning skipped: the leader is a ModelNew module" in n for n in run.summary.notes)
    sanitizer = run.summary.claim.sanitizer
    assert sanitizer.status == "skipped" and "not run on a ModelNew solution" in sanitizer.text

    path = tmp_path / "t" / "r1"
    assert (path / "best.py").read_text() == best.candidate.source
    stored = read(path)
    assert isinstance(stored.by_id["c0001"].candidate, ModelNewSolution)
    assert stored.best.id == "c0001"

    shown = kw("show", str(path))
    assert shown.returncode == 0 and "c0001" in shown.stdout, shown.stderr
    as_json = json.loads(kw("show", str(path), "--json").stdout)
    assert as_json["best"]["id"] == "c0001"
    assert {v["check"] for v in as_json["best"]["verdicts"]} >= {"no_custom_kernel", "inputs_written"}
    assert "no_custom_kernel: not run: simulated" in shown.stdout
    report = kw("report", str(path), "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0 and "class ModelNew" in (tmp_path / "r.html").read_text(), report.stderr
    verified = kw("verify", str(path))
    assert verified.returncode != 0 and "SIMULATED" in verified.stdout + verified.stderr

    exported = kw("export", str(path), "--torch", "-o", str(tmp_path / "swish.py"))
    assert exported.returncode == 0, exported.stderr
    text = (tmp_path / "swish.py").read_text()
    assert text.startswith(best.candidate.source.rstrip("\n")) and "\ndef check(sizes=None" in text
    compile(text, "swish.py", "exec")
    plain = kw("export", str(path), "-o", str(tmp_path / "plain.py"))
    assert plain.returncode == 0 and (tmp_path / "plain.py").read_text() == best.candidate.source

    again = agent.optimize(str(kernelbench_task("1_swish_clamp")), replay=path, iterations=2, sandbox="fake",
                           tune=False, traces=tmp_path / "t", run_id="r2")
    assert [e.candidate.key for e in again.entries] == [e.candidate.key for e in run.entries]
    assert again.best.id == "c0001"


def test_the_exported_check_compares_the_module_with_the_reference(kernelbench_task, tmp_path):
    from agent.report.export_modelnew import render
    from sandbox.pytorch.modelnew import parse_modelnew
    from sandbox.tasks.task import load_task

    task = load_task(kernelbench_task("1_swish_clamp"))
    plain = ROOT / "tests" / "modelnew" / "cpu" / "plain_torch.py"
    solution = parse_modelnew(plain.read_text(), plain)
    (tmp_path / "exported_swish.py").write_text(render(task, solution, "a test", ""))
    sys.path.insert(0, str(tmp_path))
    try:
        import exported_swish
    finally:
        sys.path.remove(str(tmp_path))
    errors = exported_swish.check(device="cpu")
    assert set(errors) == {o.name for o in task.spec.outputs} and all(e < 1e-4 for e in errors.values())


def test_modelnew_on_a_task_without_a_pytorch_module_or_with_tool_sessions_is_refused(kernelbench_task, tmp_path):
    with pytest.raises(ConfigError, match="not imported from PyTorch"):
        agent.optimize("vector_add", model="scripted", base_url="http://127.0.0.1:9/v1", config=MODELNEW,
                       sandbox="fake", traces=tmp_path / "t")
    with pytest.raises(ConfigError, match="tools sessions compile and time .cu candidates only"):
        agent.optimize(str(kernelbench_task("1_swish_clamp")), model="scripted", base_url="http://127.0.0.1:9/v1",
                       sandbox="fake", config={"model": {"answer_format": "modelnew", "tools": True}}, traces=tmp_path / "t")


def test_the_profiler_and_the_sanitizer_say_plainly_that_they_do_not_apply(kernelbench_task):
    from sandbox import FakeSandbox
    from sandbox.candidates.candidate import CandidateError
    from sandbox.pytorch.modelnew import load_modelnew
    from sandbox.tasks.task import load_task

    task = load_task(kernelbench_task("1_swish_clamp"))
    solution = load_modelnew(SOLUTIONS / "honest_swish.py")
    with FakeSandbox() as sandbox:
        result = sandbox.evaluate(task, solution)
        assert result.status.value == "ok" and result.env.simulated and set(result.timing.speedup) == {"eager", "compile"}
        profile = sandbox.profile(task, solution, result=result)
        assert profile.status == "skipped" and "ncu is not attached" in profile.reason and result.profile == profile
        report = sandbox.sanitize(task, solution)
        assert report.status == "skipped" and "not run on a ModelNew solution" in report.reason
        with pytest.raises(CandidateError, match="needs a task imported from PyTorch"):
            sandbox.compile(load_task("vector_add"), solution)


def test_an_answer_without_a_modelnew_class_is_a_format_error_for_the_model(kernelbench_task):
    from sandbox.tasks.task import load_task

    task = load_task(kernelbench_task("1_swish_clamp"))
    with pytest.raises(FormatError, match="no class ModelNew") as caught:
        modelnew_format.parse_answer("```python\nimport torch\nclass Model:\n    pass\n```", task)
    assert "class ModelNew(nn.Module)" in modelnew_format.format_error(caught.value.problem, caught.value.reason)
    with pytest.raises(FormatError, match="2 code blocks"):
        modelnew_format.parse_answer(answer("honest_swish") + answer("honest_swish_vec4"), task)
    solution, note = modelnew_format.parse_answer(answer("honest_swish"), task, label="c0003")
    assert solution.label == "c0003" and note == "One elementwise kernel." and "swish_clamp_kernel" in solution.kernels
