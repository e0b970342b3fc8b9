"""The ModelNew timing loop (sandbox.pytorch.modelnew_timing.interleave) on the CPU: while the solution runs, no
correct output is held anywhere in the judge's frames, and inputs are drawn anew every round after the first pass,
so an answer kept from an earlier call (keyed on the tensors) is never right again."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from sandbox.pytorch.modelnew_timing import interleave, poison  # noqa: E402
from sandbox.tasks.task_spec import Tolerance  # noqa: E402

TOL = [Tolerance(atol=1e-5, rtol=1e-5)]


def _make_args(i: int) -> list:
    g = torch.Generator().manual_seed(1000 + i)
    return [torch.randn(64, 64, generator=g)]


def _eager(args):
    return torch.sigmoid(args[0]) * 3.0


def _held(answer: torch.Tensor, frame) -> list[str]:
    """Where, in ``frame`` and the frames above it, a tensor equal to ``answer`` is held (two levels into lists,
    tuples and dicts)."""
    found = []
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            stack = [(name, value, 0)]
            while stack:
                where, v, depth = stack.pop()
                if isinstance(v, torch.Tensor):
                    if v is not answer and v.shape == answer.shape and v.dtype == answer.dtype \
                            and torch.equal(v, answer):
                        found.append(f"{frame.f_code.co_name}:{where}")
                elif depth < 3 and isinstance(v, (list, tuple)):
                    stack += [(f"{where}[{i}]", x, depth + 1) for i, x in enumerate(v)]
                elif depth < 3 and isinstance(v, dict):
                    stack += [(f"{where}[{k!r}]", x, depth + 1) for k, x in v.items()]
        frame = frame.f_back
    return found


def test_no_correct_output_is_held_in_the_judge_while_the_solution_runs():
    seen: list[str] = []

    def candidate(args):
        answer = _eager(args)
        seen.extend(_held(answer, sys._getframe(1)))
        return answer

    timed = interleave({"candidate": candidate, "eager": _eager}, _make_args, "cpu", TOL, rounds=12, budget_s=5.0)
    assert timed["wrong"] is None and timed["rounds"] == 12
    assert seen == [], seen


def test_an_answer_kept_from_a_call_before_is_never_right_once_the_inputs_are_drawn_again():
    kept: dict[int, torch.Tensor] = {}
    calls, right_from_cache = [0], []

    def candidate(args):   # computes on the first sight of a tensor's address, then answers from the cache
        calls[0] += 1
        ptr = args[0].data_ptr()
        if ptr not in kept:
            kept[ptr] = _eager(args).clone()
        elif torch.equal(kept[ptr], _eager(args)):
            right_from_cache.append(calls[0])
        return kept[ptr].clone()

    timed = interleave({"candidate": candidate, "eager": _eager}, _make_args, "cpu", TOL, rounds=12, budget_s=5.0)
    first_pass = 2 + timed["rotating_sets"]   # the two warm-up calls, then one round per set
    assert [c for c in right_from_cache if c > first_pass] == []
    assert timed["rounds"] == 12


def test_a_dropped_output_is_overwritten_unless_it_shares_an_input_or_a_kept_storage():
    x = torch.randn(8)
    out, same, ints, flags = torch.ones(8), x.view(2, 4), torch.arange(4), torch.tensor([True, False])
    poison([out, same, ints, flags], {x.untyped_storage().data_ptr()})
    assert torch.isnan(out).all() and torch.equal(same.reshape(-1), x)
    assert torch.equal(ints, ~torch.arange(4)) and flags.tolist() == [False, True]
