"""Every prompt template renders with one item per line: each input, output, scalar and timed implementation is a
bullet of its own, for a suite task and for an imported PyTorch task."""

from __future__ import annotations

import dataclasses
import re

import pytest

from agent.proposers import prompts
from agent.protocols import Entry, ProposalRequest
from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Check, Mismatch, Status
from sandbox.tasks.task import load_task
from tests.test_agent_prompts import DEVICE, _result, _timed

pytestmark = pytest.mark.timeout(120)


def _entries(task, cand):
    base = Entry("c0000", cand, _result(task, Status.ok, **_timed(task, 1.0)), [], "baseline", 0, "start")
    better = Entry("c0001", dataclasses.replace(cand, source=cand.source + "\n// v1\n"),
                   _result(task, Status.ok, **_timed(task, 1.3)), ["c0000"], "llm", 1, "faster")
    broken = Entry("c0002", cand, _result(task, Status.compile_error, error="expected a ;",
                                          detail="candidate.cu(9): error: expected a \";\""), ["c0000"], "llm", 1, "")
    out = task.spec.outputs[0].name
    check = Check(sizes=task.spec.sizes.check[0], label="check[0]#0", output=out, distribution="normal", passed=False,
                  max_abs_error=0.5, mismatches=4, first_mismatch=Mismatch(index=[0], got=0.1, expected=0.6))
    wrong = Entry("c0003", cand, _result(task, Status.wrong, error=f"output {out!r} is wrong", checks=[check]),
                  ["c0000"], "llm", 1, "")
    return base, better, broken, wrong


def _requests(task, cand):
    base, better, broken, wrong = _entries(task, cand)
    req = lambda parents, best, failures=(): ProposalRequest(task, parents, best, base, list(failures), DEVICE, 2,  # noqa: E731
                                                             {"sandbox": "gpu"})
    return {"first": req([base], base), "first_module": req([], None), "iterate": req([better], better, [broken]),
            "repair_compile": req([broken], base), "repair_wrong": req([wrong], base)}


def _assert_one_item_per_line(text: str, task) -> None:
    lines = text.splitlines()
    for t in task.spec.inputs + task.spec.outputs:
        own = [ln for ln in lines if ln.startswith(f"- `{t.name}`: {t.dtype} ")]
        assert len(own) == 1, (t.name, text)
        assert own[0].count("- `") == 1 and own[0].rstrip().endswith("]") or own[0].endswith("(one element)"), own[0]
    for s in task.spec.scalars:
        assert any(ln.startswith(f"- `{s.name}`: {s.dtype} ") and ln.count("- `") == 1 for ln in lines), s.name
    for ln in lines:
        assert not re.search(r"\S- `\w+`: ", ln), ln          # a bullet glued to the end of the line before it
        assert not re.search(r"\S- (baseline|candidate|eager|compile): median", ln), ln
    timed = [ln for ln in lines if re.match(r"- \w+: median ", ln)]
    assert all(ln.count(": median ") == 1 for ln in timed), timed


@pytest.fixture(scope="module")
def imported_task(kernelbench_task):
    return load_task(kernelbench_task("5_gemm_bias_gelu_scale"))


@pytest.mark.parametrize("name", ["softmax", "bias_gelu_residual", "layernorm"])
def test_every_template_puts_each_tensor_of_a_suite_task_on_its_own_line(name):
    task = load_task(name)
    requests = _requests(task, load_candidate(task.baseline_path))
    del requests["first_module"]             # a task with a CUDA baseline never starts from its module
    for kind, req in requests.items():
        assert prompts.kind(req) == kind
        _assert_one_item_per_line(prompts.messages(req)[1]["content"], task)


def test_every_template_puts_each_tensor_of_an_imported_task_on_its_own_line(imported_task):
    task = imported_task
    suite = load_task("softmax")
    cand = load_candidate(suite.baseline_path)
    for kind, req in _requests(task, cand).items():
        assert prompts.kind(req) == kind
        system, user = (m["content"] for m in prompts.messages(req))
        _assert_one_item_per_line(user, task)
        assert "PyTorch eager and compile" in system.replace("\n", " ")
    assert len(task.spec.inputs) >= 3      # x, the weight, the bias: several bullets in a row
