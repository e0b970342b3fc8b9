"""The source filter: every preprocessor directive of a candidate, read the way NVRTC reads it.

NVRTC compiles with the file system of the process that calls it: ``#include "/etc/passwd"`` reads
that file and its lines come back in the compile log. So before anything compiles, ``check(source)``
takes the text through the first phases of translation as NVRTC 13 performs them, then reads every
directive and refuses what is not allowed. It returns one message per problem (empty: allowed).

Translation, as NVRTC does it (each point was checked against NVRTC 13.x):
- CR LF ends a line; a lone CR does not (NVRTC reads it as a space, other compilers as a line end),
  so a lone CR is refused, as are NUL bytes, trigraphs such as ``??=`` (off in NVRTC's C++17/20
  modes, on elsewhere) and a backslash followed by blanks at a line's end (a line splice for GCC,
  not for NVRTC): what compilers disagree about is not guessed at.
- Backslash-newline pairs are removed everywhere, raw strings included (NVRTC does not revert them
  inside raw strings as GCC does, so a splice inside a raw string is refused).
- Comments, string, character and raw string literals are recognised; a directive is a ``#`` (or the
  digraph ``%:``) first on a line, and a block comment holding a line break ends the line for this
  purpose (NVRTC runs ``int x; /*<newline>*/ #include ...`` as a directive).
- Non-ASCII characters, ``$`` and ``\\u`` escapes outside comments and literals are refused: an
  identifier must read the same here and in the compiler.

Directives allowed: ``define undef if ifdef ifndef elif else endif error warning pragma`` (the
null directive too) and ``#include`` of a header on ``ALLOWED_INCLUDES``, named literally in ``<>``
or ``""``. Everything else is refused: ``include_next``, ``embed``, ``import``, ``line`` and line
markers, ``ident``, ``assert``, ``elifdef`` (ignored by NVRTC in C++17/20), a computed
``#include MACRO``, any path. ``#error`` and ``#warning`` only print the candidate's own text.

Pragmas: ``#pragma`` and ``_Pragma("...")`` with a literal text must name one of ``ALLOWED_PRAGMAS``.
A ``_Pragma`` whose text is built by macros (``_Pragma(STR(unroll N))``, a common idiom) cannot be
read before preprocessing and is allowed: NVRTC 13 opens no file for any pragma (checked with
strace over its known pragmas and GCC's/MSVC's file-naming ones), and the compile worker cannot
read host files anyway where Landlock is available (sandbox.landlock).

Elsewhere in the text: ``__has_include`` only with an allowed header named literally (it opens the
file it names); ``__has_include_next`` and ``__has_embed`` never; C++20 ``import``/``module`` lines
never (NVRTC opens the file of ``import "..."``). Token pasting (``##``) can assemble
``__has_include`` from pieces, so where the text pastes, no identifier may be a piece that starts
one (``_``, ``__``, ``__h``, ...).

Approximate math, refused where a task does not admit fast math, is ``sandbox.candidates.fast_math``.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

ALLOWED_INCLUDES = (
    "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h", "math_constants.h",
    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_awbarrier.h", "cuda_awbarrier_primitives.h",
    "cooperative_groups.h", "cooperative_groups/reduce.h", "cooperative_groups/scan.h",
    "cooperative_groups/memcpy_async.h", "cuda/pipeline", "cuda/barrier", "cuda/ptx",
)
ALLOWED_DIRECTIVES = ("define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "error", "warning",
                      "pragma", "include")
ALLOWED_PRAGMAS = ("unroll", "nounroll", "once", "message", "push_macro", "pop_macro", "nv_exec_check_disable",
                   "hd_warning_disable", "nv_abi", "nv_diag_suppress", "nv_diag_warning", "nv_diag_error",
                   "nv_diag_default", "nv_diag_once", "diag_suppress", "diag_warning", "diag_error",
                   "diag_default", "diag_once")
# names that reach the file system; pasting may build them from any of their prefixes
FILE_OPERATORS = ("__has_include", "__has_include_next", "__has_embed")
NEVER = ("__has_include_next", "__has_embed")
PASTE_PIECES = frozenset(name[:k] for name in FILE_OPERATORS for k in range(1, len(name)))
RAW_PREFIXES = ("R", "u8R", "uR", "UR", "LR")
LITERAL_PREFIXES = ("u8", "u", "U", "L")
HEADER_DIRECTIVES = ("include", "include_next", "import", "embed")
BLANKS = " \t\f\v"
DIGITS = frozenset("0123456789")

_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_BLANK_SPLICE = re.compile(r"\\[ \t\f\v]+\n")
_IDENT_CHARS = re.compile(r"[A-Za-z0-9_]*")
_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[A-Za-z0-9_]|[A-Za-z0-9_.])*")
_RAW_DELIM = re.compile(r'[^\s()\\"]{0,16}\(')


class FilterError(Exception):
    """The text cannot be read unambiguously: one message with its line."""


@dataclass(frozen=True)
class Token:
    kind: str  # ident, number, string, char, header, punct, other
    text: str
    start: int  # offset in the spliced text
    first: bool  # first token of its line


@functools.lru_cache(maxsize=32)
def read_tokens(source: str) -> tuple[tuple[Token, ...], _LineMap]:
    """The source's tokens (line splices joined) and the map from an offset to its line; FilterError if unreadable.
    The last few texts read are remembered: a candidate's source is read by the filter, the fast-math rule and the
    checks of its knobs, once per compile and once more in the orchestrator."""
    text, splices = _splice(source)
    line = _LineMap(text, splices)
    return tuple(_Lexer(text, splices, line).tokens()), line


def check(source: str) -> list[str]:
    """Reasons to refuse ``source`` before compiling (``line N: ...``); an empty list when it is allowed."""
    try:
        tokens, line = read_tokens(source)
    except FilterError as exc:
        return [str(exc)]
    return token_problems(tokens, line)


def token_problems(tokens: list[Token], line: _LineMap) -> list[str]:
    """``check`` on a text already read by ``read_tokens``: each reason once, in the order found."""
    return list(dict.fromkeys(_directive_problems(tokens, line) + _operator_problems(tokens, line)))


# ---- phases 1 and 2: characters and line splices ----------------------------------------------

def _splice(source: str) -> tuple[str, list[int]]:
    """(text with CR LF made LF and backslash-newlines removed, the offsets where splices were)."""
    text = source.replace("\r\n", "\n")
    for bad, what in (("\0", "a NUL byte"), ("\r", "a carriage return that does not end a line")):
        if bad in text:
            raise FilterError(f"line {text.count(chr(10), 0, text.index(bad)) + 1}: {what} is not allowed "
                              "(compilers disagree on what it means)")
    for pattern, what in ((_TRIGRAPH, "a trigraph ({})"),
                          (_BLANK_SPLICE, "a backslash followed by blanks at the end of a line")):
        m = pattern.search(text)
        if m:
            raise FilterError(f"line {text.count(chr(10), 0, m.start()) + 1}: {what.format(m.group(0))} is not "
                              "allowed (compilers disagree on what it means)")
    parts = text.split("\\\n")
    splices, out, pos = [], [], 0
    for part in parts[:-1]:
        out.append(part)
        pos += len(part)
        splices.append(pos)
    out.append(parts[-1])
    return "".join(out), splices


class _LineMap:
    """Offsets in the spliced text -> line numbers of the source as written."""

    def __init__(self, text: str, splices: list[int]):
        self.breaks = [i for i, ch in enumerate(text) if ch == "\n"]
        self.splices = splices

    def __call__(self, offset: int) -> int:
        return bisect.bisect_left(self.breaks, offset) + bisect.bisect_right(self.splices, offset) + 1


# ---- phase 3: preprocessing tokens ----------------------------------------------------------

class _Lexer:
    def __init__(self, text: str, splices: list[int], line: _LineMap):
        self.text, self.splices, self.line = text, splices, line
        self.out: list[Token] = []
        self.first = True
        self.header_next = False  # after `#include` or `__has_include(`: a header name may follow

    def fail(self, offset: int, message: str) -> FilterError:
        return FilterError(f"line {self.line(offset)}: {message}")

    def tokens(self) -> list[Token]:
        text, i, n = self.text, 0, len(self.text)
        while i < n:
            ch = text[i]
            if ch in BLANKS:
                i += 1
            elif ch == "\n":
                self.first, self.header_next = True, False
                i += 1
            elif text.startswith("//", i):
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise self.fail(i, "a /* comment is never closed")
                if "\n" in text[i:end]:
                    self.first = True  # NVRTC starts a directive after a comment that spans lines
                i = end + 2
            elif self.header_next and ch in '<"':
                i = self.header(i)
            elif ch.isascii() and (ch.isalpha() or ch == "_"):
                i = self.identifier(i)
            elif ch in DIGITS or (ch == "." and text[i + 1:i + 2] in DIGITS):
                m = _NUMBER.match(text, i)
                i = self.emit("number", text[i:m.end()], i, m.end())
            elif ch in "\"'":
                i = self.quoted(i, i)
            else:
                i = self.punctuator(i)
        return self.out

    def emit(self, kind: str, value: str, start: int, end: int) -> int:
        prev = self.out[-1] if self.out else None
        self.out.append(Token(kind, value, start, self.first))
        if self.header_next and not (kind == "punct" and value == "("):
            self.header_next = False
        if kind == "ident" and prev and prev.first and prev.text == "#" and value in HEADER_DIRECTIVES:
            self.header_next = True
        if kind == "punct" and value == "(" and prev and prev.kind == "ident" and prev.text in FILE_OPERATORS:
            self.header_next = True
        self.first = False
        return end

    def identifier(self, i: int) -> int:
        text = self.text
        end = _IDENT_CHARS.match(text, i).end()
        word = text[i:end]
        if text[end:end + 1] == '"' and word in RAW_PREFIXES:
            return self.raw_string(i, end)
        if text[end:end + 1] in ("\"", "'") and word in LITERAL_PREFIXES:
            return self.quoted(end, i)
        return self.emit("ident", word, i, end)

    def quoted(self, i: int, start: int) -> int:
        quote, text = self.text[i], self.text
        j = i + 1
        while j < len(text) and text[j] not in (quote, "\n"):
            j += 2 if text[j] == "\\" else 1
        if j >= len(text) or text[j] != quote:
            what = "string literal" if quote == '"' else "character literal"
            raise self.fail(start, f"a {what} is never closed on its line (write apostrophes in comments only)")
        return self.emit("string" if quote == '"' else "char", text[start:j + 1], start, j + 1)

    def raw_string(self, start: int, quote: int) -> int:
        m = _RAW_DELIM.match(self.text, quote + 1)
        if not m:
            raise self.fail(start, "a raw string literal without a valid delimiter")
        close = ")" + m.group(0)[:-1] + '"'
        end = self.text.find(close, m.end())
        if end < 0:
            raise self.fail(start, "a raw string literal is never closed")
        end += len(close)
        lo = bisect.bisect_right(self.splices, start)
        if lo < len(self.splices) and self.splices[lo] < end:
            raise self.fail(start, "a line splice (backslash-newline) inside a raw string literal is not allowed "
                                   "(compilers disagree on what it means)")
        return self.emit("string", self.text[start:end], start, end)

    def header(self, i: int) -> int:
        close = ">" if self.text[i] == "<" else '"'
        end = self.text.find(close, i + 1)
        newline = self.text.find("\n", i)
        if end < 0 or 0 <= newline < end:
            raise self.fail(i, f"a header name opened with {self.text[i]} is never closed on its line")
        return self.emit("header", self.text[i:end + 1], i, end + 1)

    def punctuator(self, i: int) -> int:
        text, ch = self.text, self.text[i]
        for spelled, value in (("%:%:", "##"), ("##", "##"), ("%:", "#")):
            if text.startswith(spelled, i):
                return self.emit("punct", value, i, i + len(spelled))
        if ch == "\\" and text[i + 1:i + 2] in ("u", "U"):
            raise self.fail(i, "a universal character name (\\u or \\U) outside string and character literals "
                               "is not allowed")
        if not ch.isascii() or ch == "$":
            raise self.fail(i, f"the character {ch!r} outside comments and literals is not allowed")
        return self.emit("punct" if ch in "#()<>,;" else "other", ch, i, i + 1)


# ---- reading the directives -----------------------------------------------------------------

def _directives(tokens: list[Token]) -> list[list[Token]]:
    """Each directive's tokens, its ``#`` first."""
    out: list[list[Token]] = []
    current: list[Token] | None = None
    for tok in tokens:
        if tok.first:
            current = [tok] if tok.text == "#" and tok.kind == "punct" else None
            if current is not None:
                out.append(current)
        elif current is not None:
            current.append(tok)
    return out


def _directive_problems(tokens: list[Token], line: _LineMap) -> list[str]:
    problems = []
    for d in _directives(tokens):
        where = f"line {line(d[0].start)}"
        if len(d) == 1:
            continue  # the null directive
        name = d[1]
        if name.kind == "number":
            problems.append(f"{where}: a line marker (# {name.text} ...) is not allowed")
            continue
        if name.kind != "ident" or name.text not in ALLOWED_DIRECTIVES:
            allowed = " ".join(f"#{x}" for x in ALLOWED_DIRECTIVES)
            problems.append(f"{where}: #{name.text} is not allowed (allowed directives: {allowed})")
            continue
        rest = d[2:]
        if name.text == "include":
            problems += _include_problems(rest, where)
        elif name.text == "pragma" and rest:
            problems += _pragma_problems(rest[0].text, f"{where}: #pragma {rest[0].text}")
    return problems


def _include_problems(rest: list[Token], where: str) -> list[str]:
    if not rest or rest[0].kind != "header":
        shown = " ".join(t.text for t in rest) or "nothing"
        return [f"{where}: #include {shown} is not allowed: name the header literally in <> or \"\" "
                f"(a computed #include is refused)"]
    problems = []
    why = header_problem(rest[0].text[1:-1])
    if why:
        problems.append(f"{where}: #include {rest[0].text} is not allowed ({why})")
    if len(rest) > 1:
        problems.append(f"{where}: #include {rest[0].text} is followed by {rest[1].text!r}: nothing may follow "
                        "the header's name")
    return problems


def header_problem(name: str) -> str | None:
    """Why a header name is refused, or None when it is on the list."""
    if name in ALLOWED_INCLUDES:
        return None
    if name.startswith("/"):
        why = "an absolute path"
    elif ".." in re.split(r"[/\\]", name):
        why = "a path with '..'"
    elif "/" in name or "\\" in name:
        why = "a path"
    else:
        why = "not on the list"
    return f"{why}; only these headers may be included, by name: {', '.join(ALLOWED_INCLUDES)}"


def _pragma_problems(word: str, what: str) -> list[str]:
    if word in ALLOWED_PRAGMAS:
        return []
    return [f"{what} is not allowed (allowed pragmas: {', '.join(ALLOWED_PRAGMAS)})"]


def _operator_problems(tokens: list[Token], line: _LineMap) -> list[str]:
    problems = []
    pastes = any(t.kind == "punct" and t.text == "##" for t in tokens)
    for i, tok in enumerate(tokens):
        where = f"line {line(tok.start)}"
        if tok.kind != "ident":
            continue
        word = tok.text
        if word in NEVER:
            problems.append(f"{where}: {word} is not allowed")
        elif word == "__has_include":
            problems += _has_include_problem(tokens, i, where)
        elif word == "_Pragma":
            problems += _literal_pragma_problem(tokens, i, where)
        elif tok.first and _module_line(tokens, i):
            problems.append(f"{where}: a C++20 module line ({word} ...) is not allowed")
        if pastes and word in PASTE_PIECES:
            problems.append(f"{where}: the identifier {word!r} in a text that pastes tokens (##) is not allowed: "
                            f"pasting could build {', '.join(FILE_OPERATORS)} from it")
    return problems


def _has_include_problem(tokens: list[Token], i: int, where: str) -> list[str]:
    before = [t.text for t in tokens[max(0, i - 2):i]]
    if before[-1:] == ["defined"] or before == ["defined", "("] or before[-1:] in (["ifdef"], ["ifndef"]):
        return []  # asks whether the operator exists; opens nothing
    after = tokens[i + 1:i + 4]
    if [t.text for t in after[:1]] == ["("] and len(after) == 3 and after[1].kind == "header" and after[2].text == ")":
        why = header_problem(after[1].text[1:-1])
        return [f"{where}: __has_include({after[1].text}) is not allowed ({why})"] if why else []
    return [f"{where}: __has_include is allowed only with a header named literally, as in __has_include(<mma.h>)"]


def _literal_pragma_problem(tokens: list[Token], i: int, where: str) -> list[str]:
    after = tokens[i + 1:i + 4]
    if len(after) < 3 or after[0].text != "(" or after[1].kind != "string" or after[2].text != ")":
        return []  # built by macros: see the module's docstring
    literal = after[1].text
    body = literal[literal.index('"') + 1:-1].replace('\\"', '"').replace("\\\\", "\\").strip()
    if not body:
        return []
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", body)
    return _pragma_problems(m.group(0) if m else body.split()[0], f"{where}: _Pragma({literal})")


def _module_line(tokens: list[Token], i: int) -> bool:
    word = tokens[i].text
    if word in ("import", "module"):
        return True
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    return word == "export" and nxt is not None and not nxt.first and nxt.text in ("import", "module")
