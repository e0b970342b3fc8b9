"""On a real device, an optimize run with ``--parallel 2`` re-times its winner alone before the claim is printed
(``agent.claims.retime``): the claim keeps the first and the isolated interval, the headline is the isolated one, and
the re-time is a trace event with a measured (not simulated) result.

The task is vector_add with a starting kernel made slow on purpose (16 blocks in a grid-stride loop) and smaller
sizes, so that the one candidate (the suite's one-thread-per-element kernel) is the winner at every size with a wide
margin, whatever the GPU."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

import agent
from agent.protocols import Proposal
from agent.trace.events import RetimeEvent, read_events
from sandbox.candidates.candidate import load_candidate

pytestmark = pytest.mark.gpu
SUITE = Path(__file__).resolve().parent.parent / "kernels" / "vector_add"
SLOW = '''/*@kernelwright
[[launch]]
kernel = "vector_add"
grid = "16"
block = "256"
args = ["a", "b", "c", "n"]
@*/
// A grid of 16 blocks striding over the whole vector: far below the GPU's bandwidth.
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = a[i] + b[i];
}
'''


class Once:
    name = "once"

    def __init__(self, candidate):
        self.left = [candidate]

    def propose(self, request):
        return [Proposal(self.left.pop(), [request.baseline.id], "model")] if self.left else []

    def observe(self, entry):
        pass


def _slow_task(tmp_path: Path) -> Path:
    folder = tmp_path / "vector_add"
    shutil.copytree(SUITE, folder)
    (folder / "baseline.cu").write_text(SLOW)
    toml = (folder / "task.toml").read_text()
    toml = toml.replace("benchmark = { n = 268435456 }", "benchmark = { n = 16777216 }")
    toml = toml.replace("heldout = [ { n = 1000003 }, { n = 16777216 }, { n = 100000007 } ]",
                        "heldout = [ { n = 1000003 }, { n = 4194305 } ]")
    assert "n = 268435456" not in toml and "n = 100000007" not in toml
    (folder / "task.toml").write_text(toml)
    return folder


@pytest.mark.timeout(1200)
def test_an_optimize_run_with_parallel_2_re_times_its_winner_alone_and_states_the_re_time(tmp_path):
    from agent.cli.app import console
    from agent.cli.optimize import print_summary

    folder = _slow_task(tmp_path)
    fast = dataclasses.replace(load_candidate(SUITE / "baseline.cu"), label="fast")
    run = agent.optimize(str(folder), proposer=Once(fast), sandbox="gpu", tune=False, sanitize=False,
                         traces=tmp_path / "traces", progress=False,
                         config={"parallel": 2, "profile": "none", "budget": {"iterations": 2}})
    retime = run.summary.claim.retime
    print("\n", retime.model_dump_json(indent=1) if retime else None)
    assert not run.simulated and run.best is not None and run.best.id == "c0001", run.summary.notes
    assert retime is not None and retime.status == "retimed" and retime.candidate == "c0001", retime
    first, alone = retime.original["baseline"], retime.isolated["baseline"]
    assert first.low > 1.0 and alone.low > 1.0 and retime.headline == alone
    assert set(retime.isolated) == set(retime.original) and alone != first   # a second measurement, every baseline
    assert retime.isolated_ms and retime.gpu_s > 0 and "--parallel above 1" in retime.reason
    events = [e for e in read_events(run.path) if isinstance(e, RetimeEvent)]
    assert [e.candidate_id for e in events] == ["c0001"]
    measured = events[0].result
    assert measured.status.value == "ok" and not measured.env.simulated and measured.env.persisting_l2 is not None
    with console.capture() as final:
        print_summary(run)
    lines = " ".join(final.get().split())
    print(lines[-1500:])
    assert f"best: c0001 (model) {alone.value:.3f}x" in lines and "re-timed alone on the GPU: c0001" in lines
