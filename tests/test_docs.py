"""README's tour runs as written on a machine without a GPU, and every relative link in README.md, docs/ and
bench/results/ points to a file (and heading) that exists."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "bench" / "results").glob("*.md"))]
# Parts of the manual written on other branches; their links are checked once those pages exist.


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _tour() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A five-minute tour"):text.index("## Where to go next")]
    lines = [line.split("#", 1)[0].strip() for line in _blocks(section, "bash")[0].splitlines()]
    return [shlex.split(line) for line in lines if line]


def _user_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="120", PYTHONPATH=str(ROOT))
    return env


@pytest.fixture
def checkout(tmp_path):
    """A working directory that looks like the root of a fresh clone (the tour's relative paths resolve), whose
    traces/ folder is this test's own."""
    work = tmp_path / "clone"
    work.mkdir()
    for name in ("examples", "kernels"):
        (work / name).symlink_to(ROOT / name)
    return work


def _shown() -> dict[str, list[str]]:
    """README's printed tour: the arguments of each `$ kernelwright ...` line -> the lines shown under it."""
    text = (ROOT / "README.md").read_text()
    block = _blocks(text[text.index("What they printed"):], "text")[0]
    out: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in block.splitlines():
        if line.startswith("$ kernelwright "):
            lines = out.setdefault(shlex.join(shlex.split(line[2:], comments=True)[1:]), [])
        elif line.strip():
            lines.append(line.rstrip())
    return out


def _same(line: str) -> str:
    """A line with what differs from run to run (elapsed seconds) written alike."""
    return re.sub(r"\b\d+(\.\d+)? s\b", "# s", line.rstrip())


def _missing(shown: list[str], printed: str) -> list[str]:
    """The lines of ``shown`` that ``printed`` does not hold in that order: ``...`` skips lines, a line ending in
    ``...`` matches a printed line that starts with it."""
    lines = [_same(line) for line in printed.splitlines()]
    at, missing = 0, []
    for want in shown:
        if want == "...":
            continue
        cut = want.endswith("...")
        want = _same(want[:-3] if cut else want)
        hit = next((i for i in range(at, len(lines)) if (lines[i].startswith(want) if cut else lines[i] == want)), None)
        if hit is None:
            missing.append(want)
        else:
            at = hit + 1
    return missing


def test_the_tour_comparison_sees_a_line_readme_shows_that_was_not_printed():
    printed = "run tour: 4 candidates\nc0001  ok  1.134x\nbest: c0001 1.134x (0.51 s)\n"
    assert _missing(["run tour: 4 candidates", "...", "best: c0001 1.134x (0.9 s)"], printed) == []
    assert _missing(["best: c0001 ...", "c0001  ok  1.134x"], printed) == ["c0001  ok  1.134x"]   # order counts
    assert _missing(["REGRESSES at 1 of 3 held-out sizes"], printed) == ["REGRESSES at 1 of 3 held-out sizes"]
    assert set(_shown()) >= {"compile softmax kernels/softmax/baseline.cu", "optimize vector_add --sandbox fake "
                             "--run-id tour", "show tour"}


def test_readme_opens_with_exactly_the_install_and_the_test_command():
    first = _blocks((ROOT / "README.md").read_text(), "bash")[0]
    commands = [line for line in first.splitlines() if line.strip()]
    assert commands == ['python -m pip install -e ".[dev,cuda13]"', "python -m pytest -q"]


@pytest.mark.timeout(600)
def test_every_command_of_the_readme_tour_and_its_python_snippet_run_on_a_machine_without_a_gpu(checkout, tmp_path):
    tour = _tour()
    assert [c[0] for c in tour] == ["kernelwright"] * len(tour) and len(tour) >= 6
    for command in tour:
        done = subprocess.run([sys.executable, "-m", "agent", *command[1:]], cwd=checkout, env=_user_env(tmp_path),
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        shown = _shown().get(shlex.join(command[1:]))
        if shown is not None:
            missing = _missing(shown, done.stdout)
            assert not missing, f"{shlex.join(command)}: README shows lines it did not print:\n" + "\n".join(missing)
    assert (checkout / "traces" / "tour" / "report.html").is_file()
    snippet = _blocks((ROOT / "README.md").read_text(), "python")[0]
    done = subprocess.run([sys.executable, "-c", snippet], cwd=checkout, env=_user_env(tmp_path),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stdout and "tour" in done.stdout


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def _links(page: Path):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:", target):
            yield target


def test_every_relative_link_points_to_an_existing_file_and_heading():
    broken = []
    for page in PAGES:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_link_check_sees_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](page.md#title) [c](page.md#nowhere) [d](https://x.org/y)\n")
    found = list(_links(page))
    assert found == ["missing.md", "page.md#title", "page.md#nowhere"]
    assert _anchors(page) == {"title"}
