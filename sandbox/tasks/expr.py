"""A small safe evaluator for launch-plan and roofline expressions.

Allowed: integer literals, names bound by the caller (size symbols, knobs), the operators
``+ - * / // %`` (``/`` is floor division: launch geometry is integral), unary minus, parentheses,
and the functions ``min``, ``max`` and ``ceil_div``. Anything else (attributes, subscripts,
calls to other functions, floats, comparisons, lambdas, strings) is refused before evaluation.
A *condition* (a task's size constraint) is a chain of comparisons between such expressions,
e.g. ``"KW <= L"`` or ``"1 <= K <= 64"``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import lru_cache

FUNCTIONS = ("min", "max", "ceil_div")
_LIMIT = 1 << 62  # results beyond this are an error, not a silent wrap-around


class ExprError(ValueError):
    """An expression that is not allowed, or that cannot be evaluated with the given names."""


def _ceil_div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("ceil_div by zero")
    return -(-a // b)


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a // b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_CALLS = {"min": min, "max": max, "ceil_div": _ceil_div}
_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
}


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.expr:
    """Parse and vet ``text``; raise ExprError naming the first construct that is not allowed."""
    node = _tree(text, "expression")
    _vet(node, text)
    return node


def _tree(text: str, what: str) -> ast.expr:
    if not isinstance(text, str) or not text.strip():
        raise ExprError(f"empty {what}")
    if len(text) > 500:
        raise ExprError(f"{what} longer than 500 characters")
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"cannot parse {text!r}: {exc.msg}") from None


@lru_cache(maxsize=1024)
def parse_condition(text: str) -> ast.Compare:
    """Parse a chain of comparisons (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``) of integer expressions."""
    node = _tree(text, "condition")
    if not isinstance(node, ast.Compare):
        raise ExprError(f"{text!r}: expected a comparison such as 'KW <= L'")
    for op in node.ops:
        if type(op) not in _COMPARE:
            raise ExprError(f"{text!r}: operator {type(op).__name__} is not allowed (use < <= > >= == !=)")
    for operand in (node.left, *node.comparators):
        _vet(operand, text)
    return node


def condition_names(text: str) -> set[str]:
    """The free names a condition uses."""
    tree = parse_condition(text)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in FUNCTIONS}


def holds(text: str, env: Mapping[str, int]) -> bool:
    """Whether the condition ``text`` is true with the integer bindings in ``env``."""
    node = parse_condition(text)
    left = _eval(node.left, env, text)
    for op, comparator in zip(node.ops, node.comparators):
        right = _eval(comparator, env, text)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _vet(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:
            raise ExprError(f"{text!r}: only integer literals are allowed, not {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise ExprError(f"{text!r}: {node.id} must be called")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"{text!r}: operator {type(node.op).__name__} is not allowed")
        _vet(node.left, text)
        _vet(node.right, text)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise ExprError(f"{text!r}: operator {type(node.op).__name__} is not allowed")
        _vet(node.operand, text)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExprError(f"{text!r}: only {', '.join(FUNCTIONS)} may be called")
        if node.keywords:
            raise ExprError(f"{text!r}: keyword arguments are not allowed")
        want = 2 if node.func.id == "ceil_div" else None
        if (want and len(node.args) != want) or len(node.args) < 2:
            raise ExprError(f"{text!r}: {node.func.id} takes {want or 'at least 2'} arguments")
        for arg in node.args:
            _vet(arg, text)
    else:
        raise ExprError(f"{text!r}: {type(node).__name__} is not allowed")


def names(text: str) -> set[str]:
    """The free names an expression uses (function names excluded)."""
    tree = parse(text)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in FUNCTIONS}


def evaluate(text: str | int, env: Mapping[str, int]) -> int:
    """Evaluate ``text`` with the integer bindings in ``env``."""
    if isinstance(text, bool):
        raise ExprError(f"{text!r} is not an integer expression")
    if isinstance(text, int):
        return text
    return _eval(parse(text), env, text)


def _eval(node: ast.expr, env: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"{text!r}: unknown name {node.id!r} (known: {', '.join(sorted(env)) or 'none'})")
        value = env[node.id]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExprError(f"{text!r}: {node.id!r} is not an integer")
        return value
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        try:
            result = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExprError(f"{text!r}: division by zero") from None
    else:  # ast.Call, vetted by parse()
        args = [_eval(a, env, text) for a in node.args]
        try:
            result = _CALLS[node.func.id](*args)
        except ZeroDivisionError:
            raise ExprError(f"{text!r}: division by zero") from None
    if abs(result) > _LIMIT:
        raise ExprError(f"{text!r}: value {result} is out of range")
    return result
