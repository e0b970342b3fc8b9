"""SEARCH/REPLACE edits against the parent: applied exactly or refused naming the block, and what they save.

The token test runs the whole loop twice on a 254-line kernel (tests/fixtures/tasks/long_vector_add) with a real
local OpenAI-compatible server whose usage counts characters / 4 of the actual text (tests/fixtures/agent/
scripted_server.py): once answering with whole files, once with edits that give the same candidates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agent
from agent.proposers.answer import FormatError, parse_answer
from agent.proposers.edits import EditError, apply_edits, parse_edits
from sandbox.candidates.candidate import load_candidate
from sandbox.tasks.task import load_task

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(240)

LONG = Path(__file__).parent / "fixtures" / "tasks" / "long_vector_add"
SOURCE = "int a = 1;\nint b = 2;\nint c = 3;\n"


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_edits_are_applied_in_order_each_to_the_text_the_previous_left():
    edits, note = parse_edits("Two changes.\n```text\n" + block("int a = 1;\n", "int a = 10;\n")
                              + block("int a = 10;\nint b = 2;\n", "int ab = 12;\n") + "```\n")
    assert note == "Two changes."
    assert apply_edits(SOURCE, edits) == "int ab = 12;\nint c = 3;\n"


def test_a_block_that_does_not_match_is_named_with_the_closest_lines_and_the_first_difference():
    edits, _ = parse_edits(block("int a = 1;\n", "int a = 5;\n") + block("int b = 2;\nint c  = 3;\n", "x\n"))
    with pytest.raises(EditError) as err:
        apply_edits(SOURCE, edits)
    message = str(err.value)
    assert message.startswith("edit block 2 of 2 (answer line 6) did not match")
    assert "The closest lines of the parent are lines 2-3" in message
    assert "line 2: 'int c  = 3;', where the parent has 'int c = 3;'" in message


@pytest.mark.parametrize("text, words", [
    (block("int c = 3;\n", "x\n") * 2, "edit block 2 of 2 .*: its SEARCH text is not in the parent"),
    (block("int a = 1;\n", "int c = 3;\n") + block("int c = 3;\n", "x\n"), "block 2 of 2 .*occurs 2 times"),
    (block("\n", "x\n"), "empty SEARCH text"),
    ("<<<<<<< SEARCH\nint a = 1;\n>>>>>>> REPLACE\n", "has no ======= line"),
    ("<<<<<<< SEARCH\nint a = 1;\n=======\nint a = 2;\n", "not closed by a >>>>>>> REPLACE line"),
])
def test_ambiguous_empty_or_malformed_blocks_are_refused(text, words):
    with pytest.raises(EditError, match=words):
        apply_edits(SOURCE, parse_edits(text)[0])


def test_an_edit_answer_becomes_the_parent_with_the_change_and_a_bad_one_is_a_format_error():
    task = load_task("vector_add")
    parent = load_candidate(task.baseline_path)
    text = "Four elements per thread would need a new kernel; first, a smaller block.\n" + block(
        "BLOCK = [256, 128, 512, 1024]\n", "BLOCK = [128, 256]\n")
    candidate, note = parse_answer(text, task, parent=parent)
    assert list(candidate.knobs["BLOCK"]) == [128, 256] and note.startswith("Four elements")
    assert candidate.render() == parent.render().replace("[256, 128, 512, 1024]", "[128, 256]")
    with pytest.raises(FormatError) as err:
        parse_answer(block("BLOCK = [64]\n", "BLOCK = [32]\n"), task, parent=parent)
    assert err.value.reason == "edit" and "edit block 1 of 1" in err.value.problem
    with pytest.raises(FormatError, match="edits are not accepted for this request"):
        parse_answer(text, task)
    with pytest.raises(FormatError, match="after the edits, the candidate file is malformed"):
        parse_answer(block('args = ["a", "b", "c", "n"]\n', 'args = ["a", "b", "out", "n"]\n'), task, parent=parent)


# ---- the loop: a failed edit is repaired in the same request; edits cost fewer tokens ----


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-edits-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _chain(steps: int) -> list[tuple[str, str, str]]:
    """(note, edit blocks, whole file) of each step; step k edits step k-1's file (the baseline's first)."""
    text = load_candidate(load_task(LONG).baseline_path).render()
    cap, out = 2112, []
    for k in range(1, steps + 1):
        new_cap = 2112 + 132 * k
        blocks = (block(f'grid = "min(ceil_div(ceil_div(n, VEC * UNROLL), BLOCK), {cap})"\n',
                        f'grid = "min(ceil_div(ceil_div(n, VEC * UNROLL), BLOCK), {new_cap})"\n')
                  + block(f"#define GRID_CAP {cap}\n",
                          f"#define GRID_CAP {new_cap}\n// fake: speedup={1 + 0.25 * k:.2f}\n"
                          if k == 1 else f"#define GRID_CAP {new_cap}\n"))
        if k > 1:
            blocks += block(f"// fake: speedup={1 + 0.25 * (k - 1):.2f}\n", f"// fake: speedup={1 + 0.25 * k:.2f}\n")
        text = apply_edits(text, parse_edits(blocks)[0])
        out.append((f"A grid cap of {new_cap} blocks: more loads in flight.", blocks, text))
        cap = new_cap
    return out


def _run(httpserver, tmp_path, answers: list[str], name: str, iterations: int | None = None):
    script = Script(answers)
    httpserver.clear()
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize(LONG, model="scripted", base_url=httpserver.url_for("/v1"), iterations=iterations or len(answers),
                         sandbox="fake", tune=False, sanitize=False, traces=tmp_path / name, progress=False,
                         config={"selection": {"explore": 0.0}})
    return run, script


def test_edits_on_a_long_kernel_cost_at_least_40_percent_fewer_completion_tokens_for_the_same_candidates(
        httpserver, tmp_path):
    assert len(load_candidate(load_task(LONG).baseline_path).render().splitlines()) >= 250
    steps = _chain(4)
    whole, _ = _run(httpserver, tmp_path, [f"{note}\n\n```cuda\n{text}```\n" for note, _, text in steps], "whole")
    edited, script = _run(httpserver, tmp_path, [f"{note}\n\n{blocks}" for note, blocks, _ in steps], "edits")
    assert "<<<<<<< SEARCH" in script.requests[0]["messages"][1]["content"]

    def candidates(run):
        return [(e.id, e.parent_ids, e.candidate.render(), e.result.status.value) for e in run.entries]

    assert candidates(edited) == candidates(whole) and len(whole.entries) == 5
    assert [e.parent_ids for e in whole.entries[1:]] == [["c0000"], ["c0001"], ["c0002"], ["c0003"]]
    assert all(e.result.status.value == "ok" for e in whole.entries)

    def per_candidate(run):
        tokens = run.summary.claim.ledger.usage.completion_tokens
        evaluated = len(run.entries) - 1
        return tokens / evaluated

    w, e = per_candidate(whole), per_candidate(edited)
    print(f"completion tokens per evaluated candidate: whole files {w:.0f}, edits {e:.0f} ({1 - e / w:.0%} fewer)")
    assert e <= 0.6 * w


def test_a_replay_of_a_run_answering_with_edits_applies_them_to_the_same_parents(httpserver, tmp_path):
    steps = _chain(3)
    edited, _ = _run(httpserver, tmp_path, [f"{note}\n\n{blocks}" for note, blocks, _ in steps], "edits")
    again = agent.optimize(LONG, replay=edited.path, sandbox="fake", tune=False, sanitize=False, progress=False,
                           traces=tmp_path / "replay", config={"selection": {"explore": 0.0}})
    assert [(e.parent_ids, e.candidate.render()) for e in again.entries] == \
        [(e.parent_ids, e.candidate.render()) for e in edited.entries]
    assert again.entries[-1].candidate.render() == steps[-1][2]


def test_an_edit_that_does_not_match_gets_one_repair_turn_naming_the_block(httpserver, tmp_path):
    [(note, blocks, _)] = _chain(1)
    wrong = blocks.replace("#define GRID_CAP 2112\n", "#define GRID_CAP  2112\n", 1)
    run, script = _run(httpserver, tmp_path, [f"{note}\n\n{wrong}", f"{note}\n\n{blocks}"], "repair", 1)
    assert len(script.requests) == 2
    follow_up = script.user_messages[1]
    assert follow_up.startswith("Your answer could not be used: edit block 2 of 2")
    assert "'#define GRID_CAP  2112', where the parent has '#define GRID_CAP 2112'" in follow_up
    assert "Copy each SEARCH text exactly" in follow_up
    assert [e.result.status.value for e in run.entries] == ["ok", "ok"]
    assert run.entries[1].candidate.render().count("2244") == 2
