"""GPU evaluations spread over a Ray cluster, on the CPU: one local Ray instance per module declaring four fake GPUs,
the FakeSandbox in each actor, real NVRTC compiles as Ray CPU tasks. Skipped where Ray is not installed."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import agent  # noqa: E402
from sandbox.candidates.candidate import load_candidate  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from conftest import private_cache  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(240)

# every kind of outcome: timed, a compile error, a wrong result, a duplicate build, a better one
ANSWERS = [answer(fake="speedup=1.1"), answer(broken=True), answer(fake="speedup=1.3", variant=1),
           answer(fake="wrong", variant=2), answer(fake="speedup=1.3", variant=1), answer(fake="speedup=1.5", variant=3),
           answer(fake="speedup=1.2", variant=4)]


@pytest.fixture(scope="module")
def cluster():
    """One local Ray instance for the module: 2 CPUs for compiles, 4 fake GPUs for the sandbox actors."""
    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch, compiled_kernels):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def lineage(run) -> list[tuple]:
    """What a run decided, candidate by candidate: ids, parents, builds, outcomes, simulated speedups (not the
    origin: a replay names itself, not the model)."""
    out = []
    for e in run.entries:
        s = e.result.speedup("baseline")
        out.append((e.id, tuple(e.parent_ids), e.candidate.key, e.result.status.value,
                    round(s.value, 9) if s else None))
    return out


def skips(run) -> list[tuple]:
    from agent.trace.events import SkipEvent, read_events

    return [(e.candidate_id, e.reason, e.duplicate_of) for e in read_events(run.path) if isinstance(e, SkipEvent)]


def test_optimize_on_2_and_4_gpu_actors_records_the_lineage_of_the_run_without_ray(cluster, httpserver, tmp_path):
    script = Script(list(ANSWERS))
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    common = dict(sandbox="fake", tune=False, iterations=len(ANSWERS), traces=tmp_path / "traces")
    alone = agent.optimize("vector_add", model="scripted", base_url=httpserver.url_for("/v1"),
                           config={"parallel": 5}, **common)
    assert alone.summary.candidates >= 6 and skips(alone)  # the duplicate was skipped before the GPU
    for gpus in (2, 4):
        spread = agent.optimize("vector_add", replay=alone.path, config={"parallel": 5, "cluster": {"gpus": gpus}},
                                **common)
        assert lineage(spread) == lineage(alone), gpus
        assert skips(spread) == skips(alone)
        assert spread.best.id == alone.best.id
        notes = spread.summary.notes
        assert any(n.startswith(f"cluster (local): {gpus} x ") for n in notes), notes
        info = spread.info if hasattr(spread, "info") else None
        run_json = (spread.path / "run.json").read_text()
        assert '"cluster"' in run_json and run_json.count('"ray_gpus"') == gpus, (info, gpus)
        places = {e.result.env.measured_by() for e in spread.entries if e.result.timing is not None}
        assert places and all("/gpu" in p for p in places)


def test_a_gpu_actor_killed_mid_evaluation_costs_only_a_retry_of_its_candidate(cluster):
    from sandbox.cluster import RaySandbox
    from sandbox.jobs import Evaluated

    task = load_task("vector_add")
    cands = [dataclasses.replace(load_candidate(task.baseline_path), label="c0000")]
    sources = [answer(fake=f"speedup=1.{i + 1}", variant=i + 1) for i in range(3)]
    from agent.proposers.answer import parse_answer

    cands += [parse_answer(s, task)[0] for s in sources]
    with RaySandbox("fake", gpus=2) as sandbox:
        assert sandbox.slots == 2
        jobs = [sandbox.submit_evaluate(task, c, tag=i) for i, c in enumerate(cands)]
        victim = sandbox.pool.actors[jobs[0].actor]
        ray.kill(victim.handle)               # it holds the first evaluation: that one goes to another actor
        done = []
        while len(done) < len(jobs):
            done += sandbox.wait(1.0)
        assert all(isinstance(j.outcome, Evaluated) for j in jobs), [j.outcome for j in jobs]
        assert jobs[0].attempts == 1 and jobs[0].lost and jobs[0].actor != victim.name
        lost = sandbox.describe()["lost"]
        assert len(lost) == 1 and lost[0]["actor"] == victim.name
        while len(sandbox.pool.actors) < 2:   # a replacement was asked for and joins
            sandbox.wait(1.0)
            sandbox.pool.collect(ray.wait(sandbox.pool.refs(), timeout=1.0)[0])
        again = sandbox.evaluate(task, cands[1])
        assert again.ok and again.env.measured_by()


@pytest.mark.parametrize("gpus", [2, 4])
def test_batch_with_ray_spreads_each_task_over_the_gpus(cluster, httpserver, tmp_path, gpus):
    import json
    import shutil

    from typer.testing import CliRunner

    from agent.cli.app import app

    script = Script(list(ANSWERS[:2]) * 2)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    other = tmp_path / "vector_add_copy"
    shutil.copytree(load_task("vector_add").folder, other)
    spec = other / "task.toml"
    spec.write_text(spec.read_text().replace('name = "vector_add"', 'name = "vector_add_copy"', 1))
    out = CliRunner().invoke(app, ["batch", "vector_add", str(other), "--sandbox", "fake", "--ray", "--ray-gpus", str(gpus),
                                   "--model", "scripted", "--base-url", httpserver.url_for("/v1"), "--iterations", "2",
                                   "--no-tune", "--no-sanitize", "--json", "--traces", str(tmp_path / "traces"),
                                   "--batch-id", "b"])
    assert out.exit_code == 0, out.output
    for name in ("vector_add", "vector_add_copy"):
        cluster_info = json.loads((tmp_path / "traces" / "b" / name / "run.json").read_text())["sandbox"]["cluster"]
        assert cluster_info["kind"] == "fake" and len(cluster_info["gpus"]) == gpus
    rows = json.loads((tmp_path / "traces" / "b" / "summary.json").read_text())["tasks"]
    assert [r["state"] for r in rows] == ["done", "done"] and all(r["candidates"] == 3 for r in rows), rows
