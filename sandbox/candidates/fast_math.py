"""Approximate math, refused where a task's tolerance does not admit fast math: first in the source, then in the
compiled code.

The intrinsics that ``--use_fast_math`` substitutes (``__expf``, ``__sinf``, ``__fdividef``, ...) and inline
PTX with an approximate instruction (``ex2.approx``, ``div.full``, ...), whether written literally, pasted
from pieces with ``##`` or stringized into an ``asm`` text. The text is read into tokens the way
``sandbox.candidates.source_filter`` reads it (comments, literals and line splices as NVRTC sees them); the library
functions (``expf``, ``rsqrtf``, ...) stay allowed at their documented accuracy.

The source rule is a fast first pass; ``compiled_problems`` is the judge. It reads the approximate instructions
of a second compile that keeps every function apart (``compiler.trace_approx``, ``approx_ptx.trace``): each must
sit in a function of ``LIBRARY`` (CUDA's math functions at their documented accuracy, allowed in every task) or
``HALF`` / ``BFLOAT16`` (the functions of ``cuda_fp16.h`` and ``cuda_bf16.h``, allowed where every output's
tolerance admits a rounding to that type; their result is rounded to it, and the approximate step inside errs far
less) that emits exactly that instruction. One in the candidate's own code (an NVVM builtin, inline PTX, a name
pasted together) is refused, whatever the line around it names. The tables are what NVRTC 13 emits; a test compiles
every function in them and fails where NVRTC emits something they do not list.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .source_filter import FilterError, Token, read_tokens

if TYPE_CHECKING:
    from ..judging.result import CompileInfo
    from ..tasks.task import Task

FAST_INTRINSICS = frozenset(("__expf", "__exp10f", "__logf", "__log2f", "__log10f", "__powf", "__sinf", "__cosf",
                             "__tanf", "__sincosf", "__tanhf", "__fdividef")) | frozenset(
    # libdevice's own names for them, which a candidate can declare and call
    f"__nv_fast_{n}" for n in ("expf", "exp10f", "logf", "log2f", "log10f", "powf", "sinf", "cosf", "tanf",
                               "sincosf", "fdividef"))
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
        if tok.kind == "ident" and (tok.text in FAST_INTRINSICS or (tok.text.startswith("__nvvm_") and "approx" in tok.text)):
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


def _table(rows: dict[str, str]) -> dict[str, frozenset[str]]:
    """{function: instructions} from {instruction: the functions that emit it}."""
    out: dict[str, set[str]] = {}
    for instruction, names in rows.items():
        for name in names.split():
            out.setdefault(name, set()).add(instruction)
    return {k: frozenset(v) for k, v in out.items()}


# What each function emits when compiled without fast math (NVRTC 13, sm_90); "/" is the division operator.
LIBRARY = _table({
    "ex2.approx.ftz.f32": "expf exp exp10f exp10 sinhf sinh coshf cosh tanhf tanh erff erf erfcf erfc erfcxf "
                          "normcdff normcdf cbrtf cbrt rcbrtf rcbrt",
    "ex2.approx.f32": "exp2f exp2",
    "lg2.approx.f32": "cbrtf cbrt rcbrtf rcbrt erfcinvf erfcinv normcdfinvf normcdfinv",
    "lg2.approx.ftz.f32": "erfinvf erfinv erfcinvf erfcinv normcdfinvf normcdfinv cbrt rcbrt",
    "rcp.approx.ftz.f32": "tanf tan atanf atan tanhf tanh asinhf asinh atanhf atanh erfcf erfc erfcxf normcdff "
                          "normcdf lgammaf lgamma tgammaf tgamma j0f j1f y0f y1f powf pow fmodf fmod remainderf remainder",
    "rsqrt.approx.f32": "rsqrtf rsqrt rhypotf rnormf rnorm3df rnorm4df j0f j1f y0f y1f",
    "rsqrt.approx.ftz.f32": "asinf asin acosf acos asinhf asinh acoshf acosh erfinvf erfinv erfcinvf erfcinv "
                            "normcdfinvf normcdfinv",
    "div.approx.f32": "erfcxf tgammaf tgamma fmodf fmod remainderf remainder",
    "div.approx.ftz.f32": "sinhf sinh coshf cosh",
    "rcp.approx.ftz.f64": "log log2 log10 log1p tan atan cosh tanh asinh acosh atanh erfc erfinv erfcinv normcdf "
                          "normcdfinv lgamma tgamma cbrt pow",
    "rsqrt.approx.f64": "rsqrt erfcinv normcdfinv",
    "rsqrt.approx.ftz.f64": "asin acos asinh acosh erfcinv normcdfinv hypot rhypot",
})
HALF = _table({
    "ex2.approx.ftz.f32": "hexp h2exp hexp2 h2exp2 hexp10 h2exp10 htanh h2tanh",
    "lg2.approx.ftz.f32": "hlog h2log hlog2 h2log2 hlog10 h2log10",
    "rcp.approx.ftz.f32": "hrcp h2rcp __hdiv __h2div htanh h2tanh /",
    "rsqrt.approx.ftz.f32": "hrsqrt h2rsqrt",
    "sqrt.approx.ftz.f32": "hsqrt h2sqrt",
    "tanh.approx.f16": "htanh_approx",
    "tanh.approx.f16x2": "h2tanh_approx",
})
BFLOAT16 = _table({
    "ex2.approx.f32": "hexp h2exp hexp2 h2exp2 hexp10 h2exp10",
    "lg2.approx.f32": "hlog h2log hlog2 h2log2 hlog10 h2log10",
    "rcp.approx.f32": "hrcp h2rcp",
    "rsqrt.approx.f32": "hrsqrt h2rsqrt",
    "sqrt.approx.f32": "hsqrt h2sqrt",
    "div.approx.f32": "__hdiv __h2div /",
    "tanh.approx.f32": "htanh h2tanh",
})
# libdevice's helpers that the compile keeping functions apart shows on their own, by the functions calling them
HELPERS = {"__internal_accurate_pow": ("pow", "tgamma"), "__internal_lgamma_pos": ("lgamma",)}
HALF_ROUNDOFF, BFLOAT16_ROUNDOFF = 2.0 ** -11, 2.0 ** -8   # unit roundoff: half the distance between neighbours
_ASM = frozenset(("asm", "__asm", "__asm__"))


def allowed_emitters(task: "Task") -> dict[str, frozenset[str]]:
    """The functions whose approximate instructions ``task`` admits without fast math: the library always, the
    16-bit headers where every output's relative tolerance admits a rounding to that type."""
    rtol = min((task.output_tolerance(o).rtol for o in task.spec.outputs), default=0.0)
    out = dict(LIBRARY)
    for table, roundoff in ((HALF, HALF_ROUNDOFF), (BFLOAT16, BFLOAT16_ROUNDOFF)):
        if rtol >= roundoff:
            for name, forms in table.items():
                out[name] = out.get(name, frozenset()) | forms
    for helper, callers in HELPERS.items():
        out[helper] = frozenset().union(*(out.get(c, frozenset()) for c in callers))
    return out


def compiled_problems(info: "CompileInfo", source: str, task: "Task") -> list[str]:
    """Reasons to refuse a compiled candidate whose approximate instructions ``task`` does not admit (empty: none).
    Each instruction of the compile that keeps functions apart (``info.approx_traced``) must sit in a library
    function the task admits that emits it (``allowed_emitters``); one in the candidate's own code (an NVVM builtin,
    inline PTX, however spelled) is refused, naming the builtins and ``asm`` its source writes. An instruction of the
    optimised code that the traced compile does not hold is refused too: nothing accounts for it."""
    found = info.approx or []
    if task.spec.allow_fast_math or not found:
        return []
    if info.approx_traced is None:
        return [f"{found[0].function} compiles to {found[0].instruction}, which could not be traced to a function "
                f"({info.trace_error or 'no trace'}), and this task does not allow fast math"]
    try:
        tokens, _ = read_tokens(source)
    except FilterError as exc:
        return [str(exc)]
    spelled = sorted({t.text for t in tokens if t.kind == "ident" and (t.text.startswith("__nvvm_") or t.text in _ASM)})
    named = f" (the source writes {', '.join(spelled)})" if spelled else ""
    allowed = allowed_emitters(task)
    problems = []
    for use in info.approx_traced:
        where = f"line {use.line}: " if use.line is not None else ""
        if use.source is None:
            problems.append(f"{where}{use.function} compiles to {use.instruction}, an approximate instruction of its "
                            f"own code, no library function's{named}, and this task does not allow fast math")
        elif use.instruction not in allowed.get(use.source, ()):
            lines = sorted({a.line for a in found if a.instruction == use.instruction and a.line is not None})
            at = f" (at line {', '.join(map(str, lines))})" if lines else ""
            problems.append(f"{use.source} compiles to {use.instruction}{at}, an approximate instruction this task's "
                            f"tolerance does not admit from it, and this task does not allow fast math")
    traced = {a.instruction for a in info.approx_traced}
    for use in found:
        if use.instruction not in traced:
            where = f"line {use.line}: " if use.line is not None else ""
            problems.append(f"{where}{use.function} compiles to {use.instruction}, an approximate instruction that no "
                            f"function accounts for{named}, and this task does not allow fast math")
    return list(dict.fromkeys(problems))
