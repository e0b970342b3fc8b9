"""`kernelwright verify`: the verdict rules, the refusals (simulated, compile-only, changed task or file), the
answer on a machine without a GPU, and (GPU) a fresh run's winner re-measured on the same device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import simulated_run, strip_simulation  # noqa: E402,F401  (simulated_run: a fixture)

from conftest import gpu_available  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def kw(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


def cli(*args):
    """``verify`` in this process, through the app ``python -m agent`` runs: its refusals come before any sandbox
    opens, and a process per refusal would cost a start-up each (the answer without a GPU runs as a process)."""
    from typer.testing import CliRunner

    from agent.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"}, catch_exceptions=False)


@pytest.fixture
def measured_run(simulated_run) -> Path:
    """The simulated fixture with its simulation markers stripped (reaches the paths that refuse simulated runs)."""
    return strip_simulation(simulated_run)


def _remeasured(entry, value, low, high, status=None, **env):
    from sandbox.judging.environment import Environment
    from sandbox.judging.result import Interval, Status

    r = entry.result
    timing = r.timing.model_copy(update={"speedup": {**r.timing.speedup, "baseline": Interval(value=value, low=low, high=high)}})
    update = {"timing": timing, "env": Environment.model_validate({**r.env.model_dump(), **env})}
    if status:
        update.update(status=Status(status), timing=None, error="output 'c' is wrong at n=7")
    return r.model_copy(update=update)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("interval, reproduces, overlap, words", [
    ((1.70, 1.69, 1.72), True, True, "REPRODUCES: the intervals overlap, and the speedup still clears 1.0"),
    ((1.66, 1.65, 1.67), True, False, "within 3% of each other (they do not overlap strictly)"),
    ((1.40, 1.38, 1.42), False, False, "lies outside the claimed one (widened by 3%)"),
], ids=["overlap", "within-tolerance", "slower"])
def test_the_verdict_follows_the_interval_rules(measured_run, interval, reproduces, overlap, words):
    from agent.trace.reader import read
    from agent.claims.verify import compare

    stored = read(measured_run)
    best = stored.best
    v = compare(stored, best, _remeasured(best, *interval))
    assert (v.reproduces, v.overlap) == (reproduces, overlap)
    assert words in v.verdict() and v.claim_cleared
    data = json.loads(json.dumps(v.to_dict()))  # no default=: every field must be plain JSON
    assert data["measured"] == {"value": interval[0], "low": interval[1], "high": interval[2]}
    assert data["claimed"]["low"] == best.result.speedup("baseline").low and data["verdict"] == v.verdict()


@pytest.mark.timeout(60)
def test_a_claim_that_cleared_one_does_not_reproduce_when_the_new_interval_contains_one(measured_run):
    from agent.trace.reader import read
    from agent.claims.verify import compare

    stored = read(measured_run)
    base = stored.baseline
    claim = base.result.model_copy(update={"timing": _remeasured(base, 1.02, 1.01, 1.03).timing})
    entry = type(base)(base.id, base.candidate, claim, [], "llm", 1)
    v = compare(stored, entry, _remeasured(base, 1.01, 0.99, 1.02))
    assert v.overlap and not v.reproduces
    assert v.verdict() == "DOES NOT REPRODUCE: the claim cleared 1.0 and the new interval does not"
    assert compare(stored, entry, _remeasured(base, 1.015, 1.005, 1.03)).reproduces


@pytest.mark.timeout(60)
def test_a_winner_that_fails_on_this_machine_does_not_reproduce(measured_run):
    from agent.trace.reader import read
    from agent.claims.verify import compare

    stored = read(measured_run)
    v = compare(stored, stored.best, _remeasured(stored.best, 0, 0, 0, status="wrong"))
    assert not v.reproduces and v.measured is None
    assert v.verdict() == "DOES NOT REPRODUCE: the winner is wrong on this machine: output 'c' is wrong at n=7"


@pytest.mark.timeout(60)
def test_each_difference_from_the_runs_environment_is_a_warning(measured_run):
    from agent.trace.reader import read
    from agent.claims.verify import compare

    stored = read(measured_run)
    best = stored.best
    same = compare(stored, best, _remeasured(best, 1.70, 1.69, 1.72, nvrtc=stored.info.environment["nvrtc"]))
    # the stored fixture predates the hashes: its one warning says so
    assert same.warnings == ([stored.unchecked] if stored.unchecked else [])
    assert all(r["same"] for r in same.environment if r["key"] in ("gpu", "driver"))
    other = compare(stored, best, _remeasured(best, 1.70, 1.69, 1.72, gpu="NVIDIA A100", driver="111.11",
                                              cuda_runtime="12.8", nvrtc=stored.info.environment["nvrtc"]))
    assert other.reproduces
    differences = [w for w in other.warnings if w != stored.unchecked]
    assert [w.split(":")[0] for w in differences] == ["other GPU", "other driver", "other CUDA runtime"]
    assert "the run measured on stand-in GPU, this machine has NVIDIA A100" in differences[0]


@pytest.mark.timeout(120)
def test_verify_re_measures_the_winners_file_through_a_sandbox(measured_run):
    from agent.trace.reader import read
    from agent.claims.verify import verify
    from sandbox import FakeSandbox

    stored = read(measured_run)
    with FakeSandbox() as sandbox:
        v = verify(stored, sandbox=sandbox)
    assert v.candidate == stored.best.id and v.status == "ok" and v.sizes == {"n": 268435456}
    assert v.measured.value == pytest.approx(1.7, abs=0.05), "the winner's '// fake: speedup=1.7' annotation"
    assert v.overlap and v.reproduces and any(w.startswith("other GPU") for w in v.warnings)


@pytest.mark.timeout(60)
def test_verify_refuses_a_simulated_run(simulated_run):
    out = cli("verify", simulated_run)
    assert out.exit_code == 2
    assert "is SIMULATED (fake sandbox): its figures were modelled, not measured" in out.stderr


@pytest.mark.timeout(180)
def test_verify_refuses_a_compile_only_run(tmp_path):
    import agent

    run = agent.optimize("vector_add", sandbox="compile-only", config={"tune": {"max_evaluations": 2}},
                         traces=tmp_path, run_id="compiled")
    out = cli("verify", run.path)
    assert out.exit_code == 2 and "has no timed winner to verify (a compile-only run times nothing)" in out.stderr


@pytest.mark.timeout(60)
def test_verify_refuses_when_the_task_changed_since_the_run(measured_run):
    info = json.loads((measured_run / "run.json").read_text())
    info["task"]["fingerprint"] = "0000000000000000"
    (measured_run / "run.json").write_text(json.dumps(info))
    out = cli("verify", measured_run)
    assert out.exit_code == 2 and "was not found unchanged" in out.stderr


@pytest.mark.timeout(60)
def test_verify_refuses_a_winner_file_that_is_not_what_the_run_evaluated(measured_run):
    from agent.trace.reader import read

    best = read(measured_run).best.id
    path = measured_run / "candidates" / best / "candidate.cu"
    path.write_text(path.read_text().replace("BLOCK = [512, 256, 128]", "BLOCK = [128, 256, 512]"))
    out = cli("verify", measured_run)
    assert out.exit_code == 2 and "differ from those the run evaluated" in out.stderr


@pytest.mark.timeout(60)
def test_verify_rejects_a_tolerance_outside_zero_to_one(measured_run):
    out = cli("verify", measured_run, "--tolerance", "1.5")
    assert out.exit_code == 2 and "--tolerance: expected a fraction in [0, 1), got 1.5" in out.stderr


@pytest.mark.timeout(120)
@pytest.mark.skipif(gpu_available(), reason="this machine has a CUDA device")
def test_verify_without_a_gpu_exits_3_and_says_what_works_without_one(measured_run):
    out = kw("verify", measured_run)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "verify re-measures on a CUDA device" in out.stderr and "kernelwright show RUN" in out.stderr
    assert "Traceback" not in out.stderr


# ---- GPU -----------------------------------------------------------------------------------------

FUSED = '''One kernel instead of three: x + bias, GELU and the residual in registers, 12 bytes per element.

```cuda
/*@kernelwright
[knobs]
BLOCK = [256, 128, 512, 1024]

[[launch]]
kernel = "bias_gelu_residual"
grid = "ceil_div(rows * cols, BLOCK)"
block = "BLOCK"
args = ["x", "bias", "residual", "out", "rows * cols", "cols"]
@*/
extern "C" __global__ void bias_gelu_residual(const float* __restrict__ x, const float* __restrict__ bias,
                                              const float* __restrict__ residual, float* __restrict__ out,
                                              int n, int cols) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        float a = x[i] + bias[i % cols];
        float g = 0.5f * a * (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
        out[i] = g + residual[i];
    }
}
```'''


class OneAnswer:
    """A proposer that answers the first request with ``FUSED`` (as a model would) and then has nothing more."""

    name = "replay"

    def __init__(self):
        self.sent = False

    def propose(self, request):
        from agent.proposers.answer import parse_answer
        from agent.protocols import Proposal

        if self.sent:
            return []
        self.sent = True
        candidate, note = parse_answer(FUSED, request.task)
        return [Proposal(candidate, [request.parents[0].id], self.name, note=note, exchange={"answer": FUSED})]

    def observe(self, entry) -> None:
        pass


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_verify_reproduces_the_winner_of_a_fresh_run_on_this_gpu(tmp_path):
    import agent

    run = agent.optimize("bias_gelu_residual", proposer=OneAnswer(), sandbox="gpu", iterations=1, tune=False,
                         traces=tmp_path, run_id="fresh", config={"profile": "none"})
    assert run.best is not None and not run.simulated, run.summary
    claimed = run.best.result.speedup("baseline")
    assert claimed.low > 1.0, claimed
    out = kw("verify", "fresh", "--traces", tmp_path, "--json", timeout=600)
    assert out.returncode == 0, (out.stdout, out.stderr)
    v = json.loads(out.stdout)
    assert v["reproduces"] and v["now_clears"] and v["warnings"] == []
    assert v["verdict"].startswith("REPRODUCES")
    assert v["candidate"] == run.best.id and v["claimed"]["low"] == pytest.approx(claimed.low)
    text = kw("show", "fresh", "--traces", tmp_path)
    assert text.returncode == 0 and f"winner {run.best.id}" in text.stdout
