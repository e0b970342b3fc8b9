"""Approximate math, refused before compiling where a task's tolerance does not admit fast math.

The intrinsics that ``--use_fast_math`` substitutes (``__expf``, ``__sinf``, ``__fdividef``, ...) and inline
PTX with an approximate instruction (``ex2.approx``, ``div.full``, ...), whether written literally, pasted
from pieces with ``##`` or stringized into an ``asm`` text. The text is read into tokens the way
``sandbox.source_filter`` reads it (comments, literals and line splices as NVRTC sees them); the library
functions (``expf``, ``rsqrtf``, ...) stay allowed at their documented accuracy.
"""

from __future__ import annotations

import re

from .source_filter import FilterError, Token, read_tokens

FAST_INTRINSICS = frozenset(("__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
                             "__tanf", "__sincosf", "__tanhf", "__fdividef"))
FAST_PIECES = frozenset(name[:k] for name in FAST_INTRINSICS for k in range(1, len(name)))
_APPROX_PTX = re.compile(r"\bapprox\b|\bdiv\s*\.\s*full\b")


def approximate_math(source: str) -> list[str]:
    """Reasons to refuse ``source`` for a task whose tolerance does not admit fast math: the fast-math
    intrinsics and approximate PTX instructions, however the text spells them (empty: none found)."""
    try:
        tokens, line = read_tokens(source)
    except FilterError as exc:
        return [str(exc)]
    return approximate_tokens(tokens, line)


def approximate_tokens(tokens: list[Token], line) -> list[str]:
    """``approximate_math`` on a text already read by ``source_filter.read_tokens``."""
    pastes = any(t.kind == "punct" and t.text == "##" for t in tokens)
    problems = []
    for i, tok in enumerate(tokens):
        where = f"line {line(tok.start)}"
        if tok.kind == "ident" and tok.text in FAST_INTRINSICS:
            problems.append(f"{where}: {tok.text} is a fast-math intrinsic, and this task does not allow fast math")
        elif tok.kind == "ident" and pastes and tok.text in FAST_PIECES:
            problems.append(f"{where}: the identifier {tok.text!r} in a text that pastes tokens (##) could build a "
                            f"fast-math intrinsic, and this task does not allow fast math")
        elif (tok.kind == "string" and _APPROX_PTX.search(tok.text)) or _approx_tokens(tokens, i):
            problems.append(f"{where}: an approximate PTX instruction (.approx, div.full), and this task does not "
                            f"allow fast math")
    return list(dict.fromkeys(problems))


def _approx_tokens(tokens: list[Token], i: int) -> bool:
    """``approx`` or ``div . full`` as tokens: a PTX text stringized from macro arguments."""
    tok = tokens[i]
    if tok.kind != "ident":
        return False
    if tok.text == "approx":
        return True
    return (tok.text == "full" and i >= 2 and tokens[i - 1].text == "." and tokens[i - 2].text == "div")
