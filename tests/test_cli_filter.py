"""`kernelwright compile` refuses every include bypass before compiling: the reason is printed, the exit code is 1."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = (ROOT / "kernels" / "vector_add" / "baseline.cu").read_text()

BYPASSES = [
    ("comment", '/**/#include "/etc/passwd"\n', 'line 1: #include "/etc/passwd" is not allowed (an absolute path'),
    ("include_next", '#include_next "/etc/passwd"\n', "line 1: #include_next is not allowed"),
    ("digraph", "%:include </etc/passwd>\n", "line 1: #include </etc/passwd> is not allowed"),
    ("splice", "#inc\\\nlude </etc/passwd>\n", "line 1: #include </etc/passwd> is not allowed"),
    ("comment across lines", '/* a\n b */ #include "/etc/passwd"\n', 'line 2: #include "/etc/passwd" is not allowed'),
    ("macro", '#define P "/etc/passwd"\n#include P\n', "line 2: #include P is not allowed"),
    ("has_include", '#if __has_include("/etc/passwd")\n#endif\n', 'line 1: __has_include("/etc/passwd") is not allowed'),
]


def kw(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def in_process(*args):
    """The command through the app ``python -m agent`` runs, in this process: a process per bypass and format
    would cost a start-up each (the markup test below runs one as a user does)."""
    from typer.testing import CliRunner

    from agent.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, prefix, reason", BYPASSES, ids=[b[0] for b in BYPASSES])
def test_compile_rejects_include_bypasses_before_compiling(tmp_path, name, prefix, reason):
    path = tmp_path / f"{name.replace(' ', '_')}.cu"
    path.write_text(prefix + BASELINE)
    out = in_process("compile", "vector_add", str(path))
    assert out.exit_code == 1, out.stdout + out.stderr
    assert "rejected" in out.stdout
    assert reason in " ".join(out.stdout.split()), out.stdout
    record = json.loads(in_process("compile", "vector_add", str(path), "--json").stdout)
    assert record["status"] == "rejected" and reason in record["error"]
    assert record["compile"] is None and record["cost"]["compile_s"] == 0.0  # NVRTC never saw it


@pytest.mark.timeout(120)
def test_a_reason_that_looks_like_markup_is_printed_verbatim(tmp_path):
    path = tmp_path / "markup.cu"
    path.write_text('#include "[/red][bold]x.h"\n' + BASELINE)
    out = kw("compile", "vector_add", str(path))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert '#include "[/red][bold]x.h" is not allowed' in " ".join(out.stdout.split())
