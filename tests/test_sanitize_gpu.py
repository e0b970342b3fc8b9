"""compute-sanitizer on a real device: a racy and an out-of-bounds cheat are caught, honest kernels are clean.

Needs compute-sanitizer beside the GPU: where it is missing these tests fail with the report's reason
(``not sanitized (no compute-sanitizer ...)``), since a GPU machine without it cannot keep doctor's promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import GPUSandbox, SandboxConfig, load_candidate, load_task

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sandbox():
    with GPUSandbox(SandboxConfig(check_timeout_s=45)) as sb:
        yield sb


@pytest.mark.timeout(600)
@pytest.mark.parametrize("cheat, tool", [("race.cu", "racecheck"), ("out_of_bounds.cu", "memcheck")])
def test_a_cheat_is_caught_by_its_tool_with_kernel_and_line(sandbox, cheat, tool):
    task = load_task("vector_add")
    report = sandbox.sanitize(task, load_candidate(ROOT / "tests" / "cheats" / cheat), tools=(tool,))
    assert report.status == "errors", report.text()
    (found,) = report.tools
    assert found.tool == tool and found.errors >= 1
    assert (found.kernel or "").split("(")[0] == "k" and (found.location or "").startswith("candidate.cu:"), found
    assert report.sizes == [{"n": 7}, {"n": 1000}]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("task_name, path", [("softmax", "kernels/softmax/baseline.cu"),
                                             ("vector_add", "tests/cheats/honest_overread.cu")])
def test_honest_kernels_are_clean_under_both_tools(sandbox, task_name, path):
    report = sandbox.sanitize(load_task(task_name), load_candidate(ROOT / path))
    assert report.status == "clean", report.text() + "\n" + "\n".join(t.reason for t in report.tools)
    assert [t.tool for t in report.tools] == ["memcheck", "racecheck"]
    assert all(t.errors == 0 for t in report.tools) and report.seconds > 0
    # side by side: the wall is under the tools' seconds added up; each says where its program's seconds went
    assert 0 < report.wall_s < report.seconds
    assert all(set(t.program_s) == {"imports", "context", "load", "inputs", "launches"} for t in report.tools)
