"""Optimizing a task imported from PyTorch (simulated sandbox, scripted model): no CUDA baseline is evaluated,
the first prompt shows the module's source, every speedup names eager and compile; and a GPU run's winner that
passes its held-out check fills the best-known store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import agent  # noqa: E402
from agent.claims.best import BestStore  # noqa: E402
from agent.config import ConfigError  # noqa: E402
from agent.claims.claim import offer_best  # noqa: E402
from agent.loop import opening  # noqa: E402
from sandbox.judging.environment import Environment  # noqa: E402
from agent.trace.claim import Claim, HeldoutRow, HeldoutSection  # noqa: E402
from sandbox import FakeSandbox  # noqa: E402
from sandbox.pytorch.importer import import_problem  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402
from tuner_fakes import H200_ENV  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def matmul(tmp_path_factory):
    return import_problem(KB / "3_matmul.py", tmp_path_factory.mktemp("tasks")).folder


def _answer(extra: str = "") -> str:
    source = (KB / "answers" / "3_matmul.cu").read_text()
    if extra:  # another unrolling: other machine code, so not a duplicate of the first answer
        source = source.replace("#pragma unroll\n", "#pragma unroll 4\n") + extra
    return f"From the module.\n\n```cuda\n{source}```\n"


def test_an_imported_task_starts_from_its_module_and_names_eager_and_compile(matmul, httpserver, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    script = Script([_answer(), _answer("// fake: speedup=1.5\n")])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize(str(matmul), model="scripted", base_url=httpserver.url_for("/v1"), iterations=2,
                         sandbox="fake", tune=False, traces=tmp_path / "t")
    assert [e.origin for e in run.entries] == ["llm", "llm"] and run.baseline is None
    first = script.requests[0]["messages"]
    assert "timed against\nPyTorch eager and compile" in first[0]["content"]
    assert "## The PyTorch module to replace" in first[1]["content"] and "torch.matmul(A, B)" in first[1]["content"]
    assert "## The parent to improve" in script.user_messages[1]
    best = run.best
    assert best.id == "c0001" and best.result.timing.primary == "eager"
    assert set(best.result.timing.speedup) == {"eager", "compile"}
    assert best.result.speedup("baseline") == best.result.speedup("eager")
    assert run.summary.best.against == "eager" and run.summary.best.speedup.value > 1.4
    assert "vs eager" in run.summary.claim.heldout.text and "vs compile" in run.summary.claim.heldout.text
    assert run.summary.claim.ledger.saving.over == "eager"


def test_without_a_model_an_imported_task_is_refused_with_the_reason(matmul, tmp_path):
    with pytest.raises(ConfigError, match="no CUDA starting kernel"):
        agent.optimize(str(matmul), sandbox="fake", traces=tmp_path / "t")


class _LikeGPU(FakeSandbox):
    """The fake sandbox's results presented as a GPU's (an H200's environment, not marked simulated), so that
    the end of a run can be tested on a machine without one."""

    kind = "gpu"

    def evaluate(self, task, candidate, sizes=None, timing=True):
        result = super().evaluate(task, candidate, sizes, timing)
        result.env = Environment.model_validate({**result.env.model_dump(exclude={"simulated"}), **H200_ENV})
        return result


def test_a_gpu_runs_winner_that_passes_its_heldout_sizes_fills_the_best_known_store(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(opening, "open_sandbox", lambda kind, options: _LikeGPU(options))
    run = agent.optimize("vector_add", config={"tune": {"max_evaluations": 3}}, traces=tmp_path / "t", run_id="r1")
    best = run.best
    assert best is not None and all(r.status == "ok" for r in run.summary.claim.rows)
    records = BestStore(tmp_path / "cache" / "best").records(load_task("vector_add"))
    assert [(r.run, r.label, r.against) for r in records] == [("r1", best.id, "baseline")]
    assert any(n.startswith("best-known store:") for n in run.summary.notes)
    out = subprocess.run([sys.executable, "-m", "agent", "best", "vector_add", "--gpu", "NVIDIA H200"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0 and out.stdout.startswith("/*@kernelwright"), out.stderr


def test_a_winner_wrong_at_a_heldout_size_is_not_offered(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    offered = []
    monkeypatch.setattr(BestStore, "offer", lambda self, *a, **k: offered.append(a) or True)
    best = SimpleNamespace(origin="llm", candidate=None, result=None, id="c0003")
    lineage, task, notes = SimpleNamespace(best=lambda: best), load_task("vector_add"), []
    gpu = SimpleNamespace(kind="gpu")

    def offer(rows) -> None:
        offer_best(gpu, task, lineage, Claim(heldout=None if rows is None else HeldoutSection(rows=rows)), "r", notes)

    offer([HeldoutRow(sizes={}, status="ok"), HeldoutRow(sizes={}, status="wrong")])
    assert offered == [] and "did not pass every held-out size" in notes[0]
    offer(None)
    assert offered == []
    offer([HeldoutRow(sizes={}, status="ok")] * len(task.spec.sizes.heldout))
    assert len(offered) == 1
