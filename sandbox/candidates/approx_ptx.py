"""The approximate instructions in a PTX text, with the function and the source line each comes from.

PTX is what the GPU's assembler reads, so this sees approximate math however the source spelled it: an
``asm`` text split into several literals, a library-internal function the candidate declared itself, a macro
that builds either. ptxas accepts comments and line breaks between an opcode and its modifiers
(``ex2/**/.approx.f32``), so comments are dropped and modifiers joined before matching.

The line is the innermost ``.loc`` of the candidate's file in force at the instruction (``-lineinfo``): a
function the candidate wrote and the compiler inlined keeps its own line; a header's function carries no line
of its own, so its instructions keep the line that called it.

``trace`` reads the PTX of a compile that keeps every function apart (``-G``: nothing inlined, libdevice's and the
headers' functions each a ``.func`` of their own): each approximate instruction there is traced to the function
that holds it, the compiler's own mapping. A function that carries a line of the candidate's file is the
candidate's; any other is a library's, named by its identifier (``expf``, ``hexp``, ``/`` for an operator).
"""

from __future__ import annotations

import re

from ..judging.result import ApproxInstruction

OPCODES = ("ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos", "tanh", "div")
_FILE = re.compile(r'\.file\s+(\d+)\s+"([^"]*)"')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EVENT = re.compile(
    r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(?P<fn>[\w$]+)"
    r"|\.loc\s+(?P<file>\d+)\s+(?P<line>\d+)\s+\d+"
    r"(?:\s*,\s*function_name\s+[\w$]+\s*,\s*inlined_at\s+(?P<ifile>\d+)\s+(?P<iline>\d+)\s+\d+)?"
    rf"|(?<![\w.$%])(?P<op>{'|'.join(OPCODES)})(?P<mods>(?:\s*\.\s*[a-z0-9]+)+)")


def trace(ptx: str, source_name: str = "candidate.cu") -> list[ApproxInstruction]:
    """``scan`` of a ``-G`` compile's PTX, each instruction with ``source``: the library function holding it (None:
    a function of the candidate's own, one that carries a line of its file)."""
    found = scan(ptx, source_name)
    ours = {num for num, path in _FILE.findall(ptx) if path.rsplit("/", 1)[-1] == source_name}
    own: set[str] = set()
    function = ""
    for m in _EVENT.finditer(_COMMENT.sub(" ", ptx)):
        if m.group("fn"):
            function = m.group("fn")
        elif m.group("file") and (m.group("file") in ours or m.group("ifile") in ours):
            own.add(function)
    return [a.model_copy(update={"source": None if a.function in own else identifier(a.function)}) for a in found]


_OPERATORS = {"dv": "/", "ml": "*", "pl": "+", "mi": "-"}


def identifier(mangled: str) -> str:
    """The source identifier of a PTX function name: an ``extern "C"`` name as it is, an Itanium-mangled one's name
    (the last of a nested one's; an operator's symbol)."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    if rest[:2] in _OPERATORS:
        return _OPERATORS[rest[:2]]
    nested = rest.startswith("N")
    rest = rest[1:] if nested else rest
    name = mangled
    while rest[:1].isdigit():
        digits = re.match(r"\d+", rest).group(0)
        length = int(digits)
        name, rest = rest[len(digits):len(digits) + length], rest[len(digits) + length:]
        if not nested:
            break
    return name


def scan(ptx: str, source_name: str = "candidate.cu") -> list[ApproxInstruction]:
    """Every approximate instruction (a ``.approx`` or ``.full`` modifier) of ``ptx``, in order, once per
    (function, instruction, line)."""
    ours = {num for num, path in _FILE.findall(ptx) if path.rsplit("/", 1)[-1] == source_name}
    text = _COMMENT.sub(" ", ptx)
    found: dict[tuple, ApproxInstruction] = {}
    function, line = "", None
    for m in _EVENT.finditer(text):
        if m.group("fn"):
            function, line = m.group("fn"), None
        elif m.group("file"):
            if m.group("file") in ours:
                line = int(m.group("line"))
            elif m.group("ifile") in ours:
                line = int(m.group("iline"))
            else:
                line = None
        else:
            mods = re.sub(r"\s", "", m.group("mods"))
            if {"approx", "full"} & set(mods.split(".")):
                instr = m.group("op") + mods
                found.setdefault((function, instr, line), ApproxInstruction(function=function, instruction=instr,
                                                                             line=line))
    return list(found.values())
