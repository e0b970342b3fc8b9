"""The command line as a user meets it first: the console script that pyproject.toml declares runs with a package
of the user's named ``agent`` (or ``sandbox``) earlier on ``sys.path``; a mistyped option, command or value is
one error line and exit 2 (docs/cli.md); the top-level ``--help`` shows flags without Python types."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


def _script(*args: str, cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    """The console script as pip writes it: import the entry point's module, call its function."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["kernelwright"]
    module, function = entry.split(":")
    code = f"import sys; from {module} import {function}; sys.argv[0] = 'kernelwright'; sys.exit({function}())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=os.pathsep.join(map(str, pythonpath)), COLUMNS="100")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=100, cwd=cwd,
                          env=env)


def test_the_console_script_runs_beside_a_users_package_named_agent(tmp_path):
    for name in ("agent", "sandbox"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('the user package {name} was imported')\n")
        (tmp_path / name / "launch.py").write_text("raise ImportError('the user launch module was imported')\n")
    out = _script("tasks", cwd=tmp_path, pythonpath=[tmp_path, ROOT])
    assert out.returncode == 0, out.stderr
    assert "the user" not in out.stderr and "softmax" in out.stdout


@pytest.mark.parametrize("args, message", [
    (("optimize", "vector_add", "--sandbx", "fake"), "error: No such option: --sandbx (Possible options: --sandbox)"),
    (("optimze",), "error: No such command 'optimze'. Did you mean 'optimize'?"),
    (("--bogus",), "error: No such option: --bogus"),
    (("eval",), "error: Missing argument 'TASK'."),
    (("optimize", "vector_add", "--iterations", "many"), "error: Invalid value for '--iterations'"),
])
def test_a_mistyped_command_line_is_one_error_line_and_exit_2(args, message, tmp_path):
    out = _script(*args, cwd=tmp_path, pythonpath=[ROOT])
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message) and "--help lists what it takes" in lines[0], out.stderr
    assert out.stdout == ""


def test_the_top_level_help_shows_flags_without_python_types(tmp_path):
    out = _script("--help", cwd=tmp_path, pythonpath=[ROOT])
    assert out.returncode == 0, out.stderr
    version = next(line for line in out.stdout.splitlines() if "--version" in line)
    assert "<bool>" not in out.stdout and "Print kernelwright's version" in version
