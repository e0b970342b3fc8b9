"""No import cycle between the modules of ``agent`` and ``sandbox``, function-local imports included; each package
imports only what its ``__init__.py`` says it may.

Every module's imports are read with ``ast`` (nothing is imported): ``import a.b`` and ``from a import b`` (where
``a/b.py`` or ``a/b/`` exists) point at ``a.b``; ``from a.b import name`` at ``a.b``. Only edges between our own
modules count. One exception, by design: ``agent/cli/__init__.py`` imports the command modules so that they register
themselves on ``app``; those modules may import ``agent.cli.app`` but nothing may import ``agent.cli`` back.
A failure names each cycle with the file:line of every import that closes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "sandbox")
# (importer, imported) pairs allowed to close a cycle: the CLI's command registration.
REGISTRATION = "agent.cli"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the packages (a package is its __init__.py)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute dotted name of a (possibly relative) ``from`` import."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file that names one of ``modules``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, name, is_package)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target in modules and target != name:
                edges.append((target, node.lineno))
    return edges


def import_graph() -> dict[str, dict[str, int]]:
    """importer -> {imported: line of the first import of it}."""
    modules = module_files()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        targets: dict[str, int] = {}
        for target, line in imports_of(name, path, modules):
            targets.setdefault(target, line)
        graph[name] = targets
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def one_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a list of modules ending where it starts."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in graph[node]:
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return list(reversed(path)) + [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle found in component {component}")


def describe(graph: dict[str, dict[str, int]], cycle: list[str], files: dict[str, Path],
             component: list[str] | None = None) -> str:
    lines = [" -> ".join(cycle)]
    if component and len(component) > len(cycle) - 1:
        lines[0] += f"  (one of the circles among {len(component)} modules: {', '.join(component)})"
    for importer, imported in zip(cycle, cycle[1:]):
        where = files[importer].relative_to(ROOT)
        lines.append(f"    {where}:{graph[importer][imported]}  imports {imported}")
    return "\n".join(lines)


def without_registration(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The graph less the CLI's registration imports (agent.cli -> its command modules)."""
    pruned = {name: dict(targets) for name, targets in graph.items()}
    for target in list(pruned.get(REGISTRATION, {})):
        if target.startswith(REGISTRATION + "."):
            del pruned[REGISTRATION][target]
    return pruned


def test_no_import_cycle_between_modules():
    files = module_files()
    graph = without_registration(import_graph())
    cycles = [describe(graph, one_cycle(graph, component), files, component)
              for component in strongly_connected(graph)]
    assert not cycles, ("import cycles (break each by moving the shared piece into a module both can import, "
                        "or by turning the dependency around):\n" + "\n".join(cycles))


def test_nothing_imports_the_cli_package_back():
    """The registration exception holds only while no module but the entry point (``agent.launch``, which
    ``agent.__main__`` runs) imports ``agent.cli``."""
    files = module_files()
    back = [f"{files[name].relative_to(ROOT)}:{line} imports {REGISTRATION}"
            for name, targets in import_graph().items() if name not in ("agent.__main__", "agent.launch")
            for target, line in targets.items() if target == REGISTRATION]
    assert not back, "import agent.cli.app (or the module you need), not agent.cli:\n" + "\n".join(back)


def test_sandbox_imports_nothing_from_agent():
    files = module_files()
    wrong = [f"{files[name].relative_to(ROOT)}:{line} imports {target}"
             for name, targets in import_graph().items() if name.split(".")[0] == "sandbox"
             for target, line in targets.items() if target.split(".")[0] == "agent"]
    assert not wrong, "sandbox must not import agent:\n" + "\n".join(wrong)


# What each package may import, as its __init__.py says: an allow-list (its own modules always allowed) ...
MAY_IMPORT = {
    "agent.claims": ("sandbox", "agent.protocols", "agent.trace"),
    "agent.proposers": ("sandbox", "agent.protocols", "agent.config", "agent.redact", "agent.trace"),
    "agent.report": ("sandbox", "agent.protocols", "agent.stops", "agent.trace", "agent.claims"),
    "agent.trace": ("sandbox", "agent.protocols", "agent.stops", "agent.redact"),
    "agent.tune": ("sandbox", "agent.protocols", "agent.trace"),
}
# ... or a deny-list, with the exceptions it names: (importer or its package, imported). The vocabulary of candidates,
# tasks, judging and plumbing sits below the contracts at the sandbox's top and below the packages that do the work.
ABOVE_VOCABULARY = ("sandbox.protocol", "sandbox.jobs", "sandbox.wire", "sandbox.host", "sandbox.worker",
                    "sandbox.cluster", "sandbox.profile")
MAY_NOT_IMPORT = {
    "sandbox.candidates": ABOVE_VOCABULARY + ("sandbox.pytorch",),
    "sandbox.tasks": ABOVE_VOCABULARY,
    "sandbox.judging": ABOVE_VOCABULARY + ("sandbox.pytorch",),
    "sandbox.plumbing": ABOVE_VOCABULARY + ("sandbox.pytorch",),
    "agent.loop": ("agent.api", "agent.cli", "agent.report.html", "agent.report.notebook"),
    "sandbox.host": ("sandbox.worker",),
    "sandbox.worker": ("sandbox.host", "sandbox.profile"),
    "sandbox.pytorch": ("sandbox.host", "sandbox.worker", "sandbox.profile"),
    "sandbox.profile": ("sandbox.host", "sandbox.worker"),
}
EXCEPT: set[tuple[str, str]] = set()


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_breaches(graph: dict[str, dict[str, int]], files: dict[str, Path]) -> list[str]:
    out = []
    for importer, targets in graph.items():
        for target, line in targets.items():
            where = f"{files[importer].relative_to(ROOT)}:{line} imports {target}"
            for package, allowed in MAY_IMPORT.items():
                if (_under(importer, package) and target.split(".")[0] == "agent" and not _under(target, package)
                        and not any(_under(target, a) for a in allowed)):
                    out.append(f"{where}: {package} may import only {', '.join(allowed)} (and itself)")
            for package, denied in MAY_NOT_IMPORT.items():
                excused = any(_under(importer, i) and _under(target, t) for i, t in EXCEPT)
                if _under(importer, package) and any(_under(target, d) for d in denied) and not excused:
                    out.append(f"{where}: {package} may not import {', '.join(denied)}")
    return out


def test_each_package_imports_only_what_its_init_allows():
    """The rules each package's __init__.py states; change the docstring and the table together."""
    breaches = layer_breaches(import_graph(), module_files())
    assert not breaches, "imports across the layers' rules:\n" + "\n".join(breaches)


def test_the_checker_finds_a_cycle_and_names_its_imports(tmp_path):
    """The checker itself: a made-up three-module circle, one edge a function-local import."""
    graph = {"p.a": {"p.b": 3}, "p.b": {"p.c": 7}, "p.c": {"p.a": 12}, "p.d": {"p.a": 1}}
    files = {name: ROOT / (name.replace(".", "/") + ".py") for name in graph}
    [component] = strongly_connected(graph)
    assert component == ["p.a", "p.b", "p.c"]
    text = describe(graph, one_cycle(graph, component), files)
    assert text.splitlines() == ["p.a -> p.b -> p.c -> p.a", "    p/a.py:3  imports p.b",
                                 "    p/b.py:7  imports p.c", "    p/c.py:12  imports p.a"]
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from .sub import thing, other\n    from . import b\n")
    modules = {"p.m": source, "p.sub": source, "p.b": source}
    assert imports_of("p.m", source, modules) == [("p.sub", 4), ("p.b", 5)]
    layered = {"agent.tune.x": {"agent.loop.y": 4, "agent.protocols": 2, "agent.tune.z": 5}, "sandbox.worker.w": {"sandbox.host.h": 9}}
    files.update({name: ROOT / (name.replace(".", "/") + ".py") for name in layered})
    assert layer_breaches(layered, files) == [
        "agent/tune/x.py:4 imports agent.loop.y: agent.tune may import only sandbox, agent.protocols, agent.trace "
        "(and itself)",
        "sandbox/worker/w.py:9 imports sandbox.host.h: sandbox.worker may not import sandbox.host, sandbox.profile"]
