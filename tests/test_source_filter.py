"""The source filter refuses every way of naming a host file to NVRTC, and lets honest sources through."""

from pathlib import Path

import pytest

from sandbox.candidates.source_filter import ALLOWED_INCLUDES, check

ROOT = Path(__file__).resolve().parent.parent
KERNEL = '\nextern "C" __global__ void k(float* a) { a[0] = 1.0f; }\n'
PASSWD = '"/etc/passwd"'

# (name, source, a fragment the first reason must contain)
BYPASSES = [
    ("empty comment before #", f"/**/#include {PASSWD}", "absolute path"),
    ("include_next", f"#include_next {PASSWD}", "#include_next is not allowed"),
    ("include_next of an allowed name", "#include_next <cuda_fp16.h>", "#include_next is not allowed"),
    ("comment spanning lines first", f"/* a\n b */ #include {PASSWD}", "absolute path"),
    ("comment spanning lines after code", f"int q; /* a\n b */ #include {PASSWD}", "absolute path"),
    ("comment inside the directive", f"#/**/include {PASSWD}", "absolute path"),
    ("comment before the name", f"#include /**/ {PASSWD}", "absolute path"),
    ("allowed name in a trailing comment", f"#include {PASSWD} // cuda_fp16.h", "absolute path"),
    ("spaces", f"#   include    {PASSWD}", "absolute path"),
    ("line splice in the name", "#inc\\\nlude </etc/passwd>", "absolute path"),
    ("line splice with CR LF", "#inc\\\r\nlude </etc/passwd>", "absolute path"),
    ("digraph", f"%:include {PASSWD}", "absolute path"),
    ("form feed before #", f"\f#include {PASSWD}", "absolute path"),
    ("vertical tab before #", f"\v#include {PASSWD}", "absolute path"),
    ("macro naming a quoted path", f"#define P {PASSWD}\n#include P", "computed #include"),
    ("macro naming an angled path", "#define P </etc/passwd>\n#include P", "computed #include"),
    ("relative path", "#include <../../../../etc/passwd>", "'..'"),
    ("climbing out of an allowed folder", "#include <cuda/../../../../etc/passwd>", "'..'"),
    ("path that is not a header of the list", "#include <sys/stat.h>", "a path"),
    ("header not on the list", "#include <stdio.h>", "not on the list"),
    ("something after the header", f"#include <cuda_fp16.h> {PASSWD}", "nothing may follow"),
    ("has_include of a path", f"#if __has_include({PASSWD})\n#endif", "__has_include(\"/etc/passwd\")"),
    ("has_include of an angled path", "#if __has_include(</etc/shadow>)\n#endif", "absolute path"),
    ("has_include through a macro", "#define H(x) __has_include(x)\n#if H(\"/etc/passwd\")\n#endif",
     "named literally"),
    ("has_include as a macro value", f"#define HI __has_include\n#if HI({PASSWD})\n#endif", "named literally"),
    ("has_include_next", "#if __has_include_next(<cuda_fp16.h>)\n#endif", "__has_include_next is not allowed"),
    ("has_embed", f"#if __has_embed({PASSWD})\n#endif", "__has_embed is not allowed"),
    ("has_include pasted", f"#define CAT(a, b) a##b\n#if CAT(__has_, include)({PASSWD})\n#endif", "'__has_'"),
    ("has_include pasted with a digraph", f"#define CAT(a, b) a%:%:b\n#if CAT(__has_inc, lude)({PASSWD})\n#endif",
     "'__has_inc'"),
    ("has_include pasted from single characters", "#define C(a, b) a##b\n#define X C(_, _has_include)", "'_'"),
    ("embed", f"const char d[] = {{\n#embed {PASSWD}\n}};", "#embed is not allowed"),
    ("line", f"#line 1 {PASSWD}", "#line is not allowed"),
    ("line marker", f"# 1 {PASSWD}", "line marker"),
    ("import directive", f"#import {PASSWD}", "#import is not allowed"),
    ("ident", '#ident "x"', "#ident is not allowed"),
    ("assert", "#assert machine(x)", "#assert is not allowed"),
    ("elifdef", "#if 0\n#elifdef X\n#endif", "#elifdef is not allowed"),
    ("C++20 header unit", f"import {PASSWD};", "module line"),
    ("C++20 exported header unit", f"export import {PASSWD};", "module line"),
    ("C++20 module fragment", "module;", "module line"),
    ("pragma naming a file", '#pragma include_alias("x.h", "/etc/passwd")', "#pragma include_alias is not allowed"),
    ("GCC dependency pragma", f"#pragma GCC dependency {PASSWD}", "#pragma GCC is not allowed"),
    ("_Pragma naming a file", '_Pragma("include_alias(\\"x.h\\", \\"/etc/passwd\\")")', "is not allowed"),
    ("universal character name in a directive", f"#incl\\u0075de {PASSWD}", "universal character name"),
    ("non-ASCII letter in code", "int \u00e9 = 0;", "outside comments and literals"),
    ("dollar in code", "int a$b = 0;", "outside comments and literals"),
    ("NUL byte", f"int a;\0\n#include {PASSWD}", "NUL byte"),
    ("lone carriage return", f"int x;\r#include {PASSWD}", "carriage return"),
    ("trigraph #", f"??=include {PASSWD}", "trigraph"),
    ("trigraph backslash in a string", f'const char* s = "??/";\n/* "; */\n#include {PASSWD}', "trigraph"),
    ("backslash and blanks ending a line", f"#inc\\ \nlude {PASSWD}", "backslash followed by blanks"),
    ("backslash and blanks ending a comment", f"// x \\ \n#include {PASSWD}", "backslash followed by blanks"),
    ("line splice inside a raw string", f'const char* r = R"x( )x\\\n" /* )x";\n#include {PASSWD}\n*/;',
     "inside a raw string"),
    ("comment opener inside a raw string", f'const char* r = R"(/*)";\n#include {PASSWD}\n// */', "absolute path"),
    ("comment opener inside a string", f'const char* s = "/*";\n#include {PASSWD}\n// */', "absolute path"),
    ("quote inside a character literal", f"char c = '\"';\n#include {PASSWD}\n// \"", "absolute path"),
    ("escaped quote inside a string", f'const char* s = "\\"/*";\n#include {PASSWD}\n// */', "absolute path"),
    ("apostrophe opening a literal to the line's end", f"int x = ' /*\n#include {PASSWD}\n*/;", "never closed"),
    ("digit separators", f"int x = 1'0'0;\n#include {PASSWD}", "absolute path"),
    ("unterminated comment", "/* never closed", "never closed"),
    ("header name never closed", "#include <cuda_fp16.h", "never closed"),
]

# Each of these read the file when compiled unfiltered (NVRTC 13); the table above must stop them all.
READS_THE_FILE = ["empty comment before #", "include_next", "comment spanning lines first",
                  "comment spanning lines after code", "line splice with CR LF", "digraph", "form feed before #",
                  "vertical tab before #", "macro naming a quoted path", "macro naming an angled path"]


@pytest.mark.parametrize("name, source, reason", BYPASSES, ids=[b[0] for b in BYPASSES])
def test_every_bypass_attempt_is_refused_with_its_reason(name, source, reason):
    problems = check(source + KERNEL)
    assert problems, f"{name}: allowed"
    assert reason in problems[0], problems


HONEST = [
    ("allowed headers both ways", "#include <cuda_fp16.h>\n#include \"mma.h\"\n#include <cooperative_groups/reduce.h>"),
    ("every allowed header", "\n".join(f"#include <{h}>" for h in ALLOWED_INCLUDES)),
    ("pragmas", "#pragma once\n#pragma unroll 4\n#pragma nv_diag_suppress 177\n_Pragma(\"unroll\")"),
    ("computed _Pragma", "#define S_(x) #x\n#define S(x) S_(x)\n#define U _Pragma(S(unroll 4))"),
    ("has_include of an allowed header", "#if __has_include(<cuda_bf16.h>)\n#include <cuda_bf16.h>\n#endif"),
    ("asking whether has_include exists", "#if defined(__has_include)\n#endif\n#ifdef __has_include\n#endif"),
    ("error and warning", "#if BLOCK % 32\n#error BLOCK must be a multiple of 32\n#endif\n#warning slow path"),
    ("conditionals", "#define A 1\n#undef A\n#ifndef A\n#elif B\n#else\n#endif\n#"),
    ("raw string with comment markers", 'const char* r = R"d(/* // */ #include "x")d";'),
    ("directive text in literals", "const char* s = \"#include </etc/passwd>\"; char c = '#';"),
    ("digit separators", "int x = 1'000'000; float y = 1.5e+3f; double z = 0x1p-3;"),
    ("non-ASCII in comments and strings", "// x \u2264 y, \u00d7 2\nconst char* s = \"\u00e9\";"),
    ("apostrophes in comments", "// don't, won't\n/* it's */"),
    ("token pasting of ordinary names", "#define CAT(a, b) a##b\n#define K(n) CAT(kernel_, n)"),
    ("stringizing", "#define STR(x) #x\n#define X(a) a #a"),
    ("CR LF line ends", "#include <cuda_fp16.h>\r\n#define A \\\r\n  1\r\n"),
    ("line splice in a define", "#define MAX(a, b) \\\n  ((a) > (b) ? (a) : (b))"),
    ("import as an ordinary identifier mid-line", "int import_count = 0; int y = import_count;"),
]


@pytest.mark.parametrize("name, source", HONEST, ids=[h[0] for h in HONEST])
def test_honest_sources_pass(name, source):
    assert check(source + KERNEL) == []


SHIPPED = sorted([*ROOT.glob("kernels/*/baseline.cu"), *ROOT.glob("bench/candidates/*.cu"), *ROOT.glob("tests/cheats/*.cu")])


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_every_shipped_kernel_passes(path):
    assert check(path.read_text()) == []


def test_reasons_name_the_line_as_written():
    source = "int a;\n#define X \\\n  1\n/* two\nlines */\n#include_next <x.h>\n"
    assert check(source)[0].startswith("line 6: #include_next")


@pytest.mark.parametrize("name", READS_THE_FILE)
def test_the_refused_bypasses_really_read_files_unfiltered(name, tmp_path):
    from cuda.bindings import nvrtc

    from sandbox.candidates.compiler import include_dirs

    secret = tmp_path / "secret.h"
    secret.write_text("KW_SECRET_LINE_7\n")
    source = dict((b[0], b[1]) for b in BYPASSES)[name].replace("/etc/passwd", str(secret)) + KERNEL
    assert check(source)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"candidate.cu", 0, [], [])
    opts = [b"-arch=sm_90", b"-std=c++17", *[f"-I{d}".encode() for d in include_dirs()]]
    try:
        nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    assert b"KW_SECRET_LINE_7" in log
