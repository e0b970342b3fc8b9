"""A ModelNew candidate exported as a PyTorch module: the solution's own file, unchanged (it is the module), with a
``check()`` appended that compares ``ModelNew`` with the task's float64 reference (``templates/export_modelnew.py.j2``).

Unlike ``export_torch``'s generated launcher, the module's code is the solution's own text: importing it runs that
code (its builds included) in the importing process, as importing any KernelBench solution does. What is appended
holds no text from a run folder, a task or a model except as literals written by ``export_torch.literal``; its
function is named ``check``, or ``kernelwright_check`` where the solution defines a ``check`` of its own.
"""

from __future__ import annotations

import ast

from sandbox.tasks.task import Task

from .export_torch import TEMPLATES, literal


def check_name(source: str) -> str:
    tree = ast.parse(source)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    names |= {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return "kernelwright_check" if "check" in names else "check"


def render(task: Task, solution, origin: str, claim: str = "") -> str:
    """The text of the exported module: the solution's source, then the appended ``check()``."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["py"] = literal
    tail = env.get_template("export_modelnew.py.j2").render(
        origin=origin, claim=claim, task_folder=str(task.folder.resolve()), fingerprint=task.fingerprint,
        check=check_name(solution.source))
    return solution.source.rstrip("\n") + "\n" + tail
