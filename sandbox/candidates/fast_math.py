"""Approximate math, refused where a task's tolerance does not admit fast math: first in the source, then in the
compiled code.

The intrinsics that ``--use_fast_math`` substitutes (``__expf``, ``__sinf``, ``__fdividef``, ...) and inline
PTX with an approximate instruction (``ex2.approx``, ``div.full``, ...), whether written literally, pasted
from pieces with ``##`` or stringized into an ``asm`` text. The text is read into tokens the way
``sandbox.candidates.source_filter`` reads it (comments, literals and line splices as NVRTC sees them); the library
functions (``expf``, ``rsqrtf``, ...) stay allowed at their documented accuracy.

The source rule is a fast first pass; ``compiled_problems`` is the judge. It reads the approximate instructions
in the PTX (``sandbox.candidates.approx_ptx``), and each must be accounted for by a function named on its source
line that emits exactly that instruction when compiled without fast math: ``LIBRARY`` (CUDA's math functions at their
documented accuracy, allowed in every task) or ``HALF`` / ``BFLOAT16`` (the functions of ``cuda_fp16.h`` and
``cuda_bf16.h``, allowed where every output's tolerance admits a rounding to that type; their result is rounded
to it, and the approximate step inside errs far less). An approximate instruction on a line with inline PTX
(``asm``) is the candidate's own and is refused. The tables are what NVRTC 13 emits; a test compiles every
function in them and fails where NVRTC emits something they do not list.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..judging.result import ApproxInstruction
from .source_filter import FilterError, Token, read_tokens

if TYPE_CHECKING:
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
    return out


def compiled_problems(found: list[ApproxInstruction], source: str, task: "Task") -> list[str]:
    """Reasons to refuse a compiled candidate whose approximate instructions (``found``, from its PTX) ``task``
    does not admit: each names the function, the instruction and the source line (empty: none)."""
    if task.spec.allow_fast_math or not found:
        return []
    try:
        tokens, line = read_tokens(source)
    except FilterError as exc:
        return [str(exc)]
    names = _names_by_line(tokens, line)
    everywhere = set().union(*names.values()) if names else set()
    allowed = allowed_emitters(task)
    problems = []
    for use in found:
        named = names.get(use.line, set()) if use.line is not None else everywhere
        where = f"line {use.line}" if use.line is not None else "no line"
        if named & _ASM:
            why = "written in inline PTX on that line"
        elif any(use.instruction in allowed.get(n, ()) for n in named):
            continue
        else:
            why = "that no function named on that line emits at its documented accuracy"
        problems.append(f"{where}: {use.function} compiles to {use.instruction}, an approximate instruction {why}, "
                        f"and this task does not allow fast math")
    return list(dict.fromkeys(problems))


def _names_by_line(tokens: list[Token], line) -> dict[int, set[str]]:
    """The identifiers (and the ``/`` operator) each line names, through macros: a line that uses a macro names
    what the macro's body names. The lines of a statement that runs on over several lines share their names,
    since the compiler may place an instruction at any line of it."""
    macros: dict[str, set[str]] = {}
    by_line: dict[int, set[str]] = {}
    directive, defining = False, None
    for i, tok in enumerate(tokens):
        if tok.first:
            directive = tok.text == "#"
            defining = None
        if directive:
            if tok.kind == "ident" and tokens[i - 1].text == "define" and defining is None:
                defining = tok.text
                macros[defining] = set()
            elif defining is not None and (tok.kind == "ident" or tok.text == "/"):
                macros[defining].add(tok.text)
            continue
        if tok.kind == "ident" or tok.text == "/":
            by_line.setdefault(line(tok.start), set()).add(tok.text)
    for _ in range(8):                          # macros that use macros, a few levels deep
        for body in macros.values():
            body |= set().union(*(macros.get(n, set()) for n in list(body)))
    expanded = {n: set(v).union(*(macros.get(x, set()) for x in v)) for n, v in by_line.items()}
    # a statement runs on until a line holding ';', '{' or '}': its lines share their names
    ends = {line(t.start) for t in tokens if t.text in (";", "{", "}")}
    out: dict[int, set[str]] = {}
    group: list[int] = []
    for n in sorted(set(expanded) | ends):
        group.append(n)
        if n in ends:
            shared = set().union(*(expanded.get(k, set()) for k in group))
            out.update({k: shared for k in group})
            group = []
    shared = set().union(*(expanded.get(k, set()) for k in group))
    out.update({k: shared for k in group})
    return out
