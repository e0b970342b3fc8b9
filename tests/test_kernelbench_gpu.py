"""PyTorch in, PyTorch out on a real GPU: three imported problems of different kinds (elementwise, reduction,
matmul) each optimized against a local scripted model server whose one answer is a correct CUDA kernel
(tests/fixtures/kernelbench/answers/); every result names its speedup over PyTorch eager and torch.compile,
and the exported module gives the reference's results when called from torch, also as the module's forward."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import agent
from sandbox.tasks.task import load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
LEAN = {"budget": {"gpu_seconds": 120}, "profile": "none", "sandbox_options": {"timing_budget_s": 0.1}}


def _answer(stem: str) -> str:
    return f"One pass, written from the module.\n\n```cuda\n{(KB / 'answers' / f'{stem}.cu').read_text()}```\n"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("stem", ["1_swish_clamp", "2_mean_over_dim", "3_matmul"])
def test_an_imported_problem_is_optimized_timed_against_eager_and_compile_and_exported_to_torch(
        stem, httpserver, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from sandbox.pytorch.importer import import_problem

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    folder = import_problem(KB / f"{stem}.py", tmp_path / "tasks").folder
    script = Script([_answer(stem)])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize(str(folder), model="scripted", base_url=httpserver.url_for("/v1"), iterations=1,
                         sandbox="gpu", tune=False, sanitize=False, traces=tmp_path / "traces", config=LEAN)
    best = run.best
    shown = run.summary.to_json()
    print(json.dumps({"best": shown["best"], "stops": shown["stops"], "heldout": shown["claim"]["heldout"]}, indent=2,
                     default=str))
    assert "class Model" in script.user_messages[0] and "PyTorch eager and compile" in script.user_messages[0]
    assert best is not None and best.result.status.value == "ok", [e.result.summary() for e in run.entries]
    timing = best.result.timing
    assert timing.primary == "eager" and set(timing.speedup) == {"eager", "compile"}, (timing.speedup, timing.unavailable)
    for name in ("eager", "compile"):
        s = timing.speedup[name]
        assert 0 < s.low <= s.value <= s.high
    print(f"{stem}: {best.result.summary()}")

    out = tmp_path / f"k_{stem}.py"
    exported = subprocess.run([sys.executable, "-m", "agent", "export", str(run.path), "--torch", "-o", str(out)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert exported.returncode == 0, exported.stderr
    mod = _load(out)
    errors = mod.check()
    assert set(errors) == {"out"}

    ns: dict = {}
    exec(compile((folder / "problem.py").read_text(), "problem.py", "exec"), ns)
    with torch.device("cuda"):
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]())
        args = ns["get_inputs"]()
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        expected = model.double()(*[a.double() for a in args]).float()
        model.float()
        ns["Model"].forward = mod.forward
        got = model(*args)
    tol = load_task(folder).output_tolerance("out")
    assert torch.allclose(got.reshape(expected.shape), expected, atol=tol.atol, rtol=tol.rtol)
