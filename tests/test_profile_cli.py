"""``kernelwright profile``: bad input is exit 2 with one line; without a GPU, resources only and exit 3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import gpu_available

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


def kw(*args):
    return subprocess.run([sys.executable, "-m", "agent", "profile", *args], capture_output=True, text=True,
                          timeout=110, cwd=ROOT)


@pytest.mark.parametrize("args, says", [
    (("no_such_task", "baseline"), "no_such_task"),
    (("vector_add", "missing.cu"), "missing.cu"),
    (("vector_add", "baseline", "--parent", "missing_parent.cu"), "missing_parent.cu"),
])
def test_bad_input_is_exit_2_with_one_line_naming_it(args, says):
    out = kw(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0]


@pytest.mark.skipif(gpu_available(), reason="a GPU is present: the full profile runs instead")
def test_without_a_gpu_the_resources_are_printed_and_the_exit_code_is_3():
    out = kw("softmax", "baseline")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.startswith("counters: none (no CUDA device)")
    assert "resources: softmax_rows" in out.stdout and "registers" in out.stdout
