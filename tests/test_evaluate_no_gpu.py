"""``kw.evaluate`` on a machine without a GPU says plainly that it only compiled (a warning naming why, a summary
that says nothing ran), and docs/python.md's "The sandbox directly" snippet runs as written from a checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import gpu_available

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(gpu_available(), reason="tests what a machine without a CUDA device does")]


def test_evaluate_without_a_gpu_warns_that_it_only_compiled():
    import kernelwright as kw

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = kw.evaluate("softmax", ROOT / "kernels" / "softmax" / "baseline.cu")
    assert result.status is kw.Status.compiled and result.speedup("baseline") is None
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any(s.startswith("no GPU sandbox opened (") and "softmax was compiled only; nothing ran" in s
               for s in said), said
    assert "compiled only: nothing ran" in result.summary()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kw.evaluate("softmax", sandbox="compile-only")
    assert any("sandbox='compile-only' runs nothing" in str(w.message) for w in caught)


def test_the_sandbox_directly_snippet_of_the_python_docs_runs_without_a_gpu(tmp_path):
    text = (ROOT / "docs" / "python.md").read_text()
    section = text[text.index("## The sandbox directly"):]
    snippet = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=200)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.strip().splitlines()
    assert first.startswith("baseline: compiled; compiled only: nothing ran") and second == "None"
