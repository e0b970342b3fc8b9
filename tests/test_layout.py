"""The architecture tree (docs/architecture.md) names every package folder of agent/ and sandbox/, and each package says what it
is for and what it may import."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> list[Path]:
    return sorted(p.parent for top in ("agent", "sandbox") for p in (ROOT / top).rglob("__init__.py"))


def test_the_readme_tree_names_every_package_folder():
    section = (ROOT / "docs" / "architecture.md").read_text()
    tree = section[section.index("```text"):section.index("```", section.index("```text") + 3)]
    named = set(re.findall(r"^\s*([a-z_]+)/ ", tree, flags=re.M))
    missing = [str(p.relative_to(ROOT)) for p in _packages() if p.name not in named]
    assert not missing, f"docs/architecture.md's tree does not show: {', '.join(missing)} (add a line for each)"


def test_every_package_says_what_it_holds_and_may_import():
    silent = []
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        if not doc or "import" not in doc:
            silent.append(str((package / "__init__.py").relative_to(ROOT)))
    assert not silent, "a package's docstring says what it is for and what it may import: " + ", ".join(silent)
