"""Parsing a model's answer into a candidate, and the precise messages for answers that cannot be used."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.proposers.answer import FormatError, extract, parse_answer, split_reasoning
from sandbox.tasks.task import load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import PLAIN  # noqa: E402

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def task():
    return load_task("vector_add")


def test_one_cuda_block_becomes_a_candidate_and_the_prose_its_note(task):
    cand, note = parse_answer(f"I kept it simple.\n\n```cuda\n{PLAIN}```\nThat is all.", task)
    assert cand.launches[0].kernel == "vector_add"
    assert note == "I kept it simple.\n\n\nThat is all."


def test_a_block_tagged_cpp_is_accepted_when_it_holds_the_plan(task):
    cand, _ = parse_answer(f"```cpp\n{PLAIN}```", task)
    assert cand.launches[0].args == ("a", "b", "c", "n")


def test_the_block_with_the_plan_wins_over_other_snippets(task):
    cand, _ = parse_answer(f"Before: ```\nc[i] = a[i] + b[i];\n```\nNow:\n```cuda\n{PLAIN}```", task)
    assert cand.launches[0].kernel == "vector_add"


@pytest.mark.parametrize("text, reason, words", [
    ("", "empty", "empty"),
    ("I would vectorize the loads.", "no_code", "no ```cuda code block"),
    (PLAIN, "no_code", "not inside a fenced block"),
    (f"```cuda\n{PLAIN}", "unclosed", "never closed"),
    (f"```cuda\n{PLAIN}```\n```cuda\n{PLAIN}```", "several", "2 code blocks"),
    ("```cuda\n__global__ void k() {}\n```", "plan", "no launch plan"),
    ("```python\nprint(1)\n```", "plan", "hold no launch plan"),
])
def test_unusable_answers_say_what_was_missing(task, text, reason, words):
    with pytest.raises(FormatError) as err:
        parse_answer(text, task)
    assert err.value.reason == reason
    assert words in err.value.problem


def test_a_plan_naming_an_unknown_array_is_a_format_error_naming_it(task):
    bad = PLAIN.replace('"a", "b", "c", "n"', '"a", "b", "out", "n"')
    with pytest.raises(FormatError) as err:
        parse_answer(f"```cuda\n{bad}```", task)
    assert "out" in err.value.problem and err.value.reason == "plan"


def test_inline_think_blocks_are_split_off_as_reasoning():
    answer, reasoning = split_reasoning(f"<think>float4 would halve the loads</think>\n```cuda\n{PLAIN}```")
    assert reasoning == "float4 would halve the loads"
    code, _ = extract(answer)
    assert code.startswith("/*@kernelwright")
