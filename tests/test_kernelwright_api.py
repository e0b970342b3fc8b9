"""``import kernelwright``: the public API for notebooks and scripts, typed, documented, and kernelwright's own
even where a user's project has packages named ``sandbox`` or ``agent``."""

from __future__ import annotations

import os
import pydoc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(ROOT)  # after the working directory, as a notebook beside the user's packages has it
    env["KERNELWRIGHT_CACHE_DIR"] = str(cwd / ".kw-cache")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _user_project(tmp_path: Path) -> Path:
    for name in ("sandbox", "agent"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHOSE = 'the user project'\nraise_me = 1 / 1\n")
    return tmp_path


def test_help_shows_every_public_name_with_its_docstring():
    import kernelwright

    text = pydoc.render_doc(kernelwright, renderer=pydoc.plaintext)
    for name in ("optimize", "evaluate", "load_run", "compare", "Run", "Result", "Interval", "Comparison"):
        assert name in kernelwright.__all__
        assert name in text
        assert getattr(kernelwright, name).__doc__, f"kernelwright.{name} has no docstring"
    assert set(kernelwright.__all__) <= set(dir(kernelwright))


def test_the_package_is_typed_and_shipped_in_the_wheel():
    import tomllib

    assert (ROOT / "kernelwright" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "kernelwright" in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]


def test_importing_kernelwright_imports_neither_cupy_nor_openai(tmp_path):
    done = _python("""
        import sys, kernelwright
        print(sorted(m for m in ("cupy", "openai", "torch") if m in sys.modules))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_users_own_sandbox_and_agent_packages_do_not_break_kernelwright(tmp_path):
    project = _user_project(tmp_path)
    done = _python("""
        import kernelwright
        result = kernelwright.evaluate("vector_add", sandbox="fake")
        import sandbox, agent
        print(result.status.value, result.speedup() is not None, sandbox.__file__, agent.__file__)
    """, project)
    assert done.returncode == 0, done.stderr
    status, timed, sandbox_file, agent_file = done.stdout.split()
    assert (status, timed) == ("ok", "True")
    assert Path(sandbox_file).parent == ROOT / "sandbox" and Path(agent_file).parent == ROOT / "agent"


def test_a_same_named_package_imported_first_is_one_clear_import_error(tmp_path):
    project = _user_project(tmp_path)
    done = _python("""
        import sandbox
        import kernelwright
    """, project)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: a package named 'sandbox' from ") and "import kernelwright first" in last


def test_compare_puts_runs_side_by_side_from_their_traces(tmp_path, monkeypatch):
    import kernelwright

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    run = kernelwright.optimize("vector_add", sandbox="fake", traces=tmp_path, run_id="a", tune=True,
                                config={"tune": {"max_evaluations": 4}})
    again = kernelwright.load_run("a", traces=tmp_path)
    table = kernelwright.compare([run, tmp_path / "a"])
    assert [r.run for r in table.rows] == ["a", "a"]
    assert table.rows[0] == table.rows[1]
    row = table.rows[0]
    assert row.task == "vector_add" and row.simulated and row.evaluations == again.summary.totals.evaluations
    assert str(table).splitlines()[0].split()[:3] == ["run", "task", "winner"]
    assert "<table>" in table._repr_html_()


def test_evaluate_reports_a_bad_candidate_path_as_a_candidate_error(tmp_path):
    import kernelwright

    with pytest.raises(kernelwright.CandidateError, match="no such file"):
        kernelwright.evaluate("vector_add", tmp_path / "missing.cu", sandbox="compile-only")
