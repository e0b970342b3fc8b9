"""The launch-plan expression evaluator accepts integer arithmetic on known names and nothing else."""

import pytest

from sandbox.tasks.expr import ExprError, evaluate, names


@pytest.mark.parametrize("text, expected", [
    ("ceil_div(n, 256)", 4),
    ("min(n, 128) * 2", 256),
    ("max(n, 2048)", 2048),
    ("(n + 255) / 256", 4),
    ("n // 3 % 7", 4),
    ("-n + 1025", 25),
    ("BLOCK * 4", 1024),
])
def test_integer_arithmetic_on_sizes_and_knobs(text, expected):
    assert evaluate(text, {"n": 1000, "BLOCK": 256}) == expected


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "n.bit_length()", "n[0]", "open('x')", "n ** 2", "1.5 * n",
    "lambda: 1", "'a'", "n if n else 1", "n < 3", "[n]", "abs(n)", "min(n)", "ceil_div(n)", "n << 2",
    "min(n, key=1)", "not n", "x.y",
])
def test_anything_else_is_refused(text):
    with pytest.raises(ExprError):
        evaluate(text, {"n": 4})


def test_unknown_names_and_division_by_zero_are_errors_naming_the_problem():
    with pytest.raises(ExprError, match="unknown name 'm'"):
        evaluate("m + 1", {"n": 1})
    with pytest.raises(ExprError, match="division by zero"):
        evaluate("n / (n - n)", {"n": 1})
    with pytest.raises(ExprError, match="out of range"):
        evaluate("n * n * n * n * n * n * n", {"n": 10**10})


def test_names_lists_free_variables_but_not_functions():
    assert names("ceil_div(rows * cols, BLOCK) + min(a, 3)") == {"rows", "cols", "BLOCK", "a"}
