"""A candidate as a small PyTorch module: one function taking torch tensors, launched through CuPy on
torch's current stream, plus ``check()`` against the task's reference, and for a task imported from a
PyTorch problem a ``forward`` that can replace the module's own (``templates/export_torch.py.j2``).

The launch plan's expressions are vetted by ``sandbox.expr`` here, their knobs written in as numbers and
``/`` turned into Python's ``//``, so the generated file evaluates only integer arithmetic of the sizes.
"""

from __future__ import annotations

import ast
import copy
import keyword
import re
from pathlib import Path

from sandbox import expr
from sandbox.candidate import Candidate, split_arg
from sandbox.compiler import BASE_OPTIONS, _expand
from sandbox.task import Task

TEMPLATES = Path(__file__).with_name("templates")


class _Python(ast.NodeTransformer):
    """A vetted plan expression as Python: knobs become their values, ``/`` floor division."""

    def __init__(self, knobs: dict[str, int]):
        self.knobs = knobs

    def visit_Name(self, node: ast.Name):
        return ast.Constant(self.knobs[node.id]) if node.id in self.knobs else node

    def visit_BinOp(self, node: ast.BinOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Div):
            node.op = ast.FloorDiv()
        return node


def python_expr(text: str, knobs: dict[str, int]) -> str | int:
    parsed = copy.deepcopy(expr.parse(text))  # parse() caches its trees: never change them in place
    tree = _Python(knobs).visit(ast.fix_missing_locations(ast.Expression(parsed)))
    out = ast.unparse(tree)
    return int(out) if re.fullmatch(r"-?\d+", out) else out


def _dims(dims, knobs) -> tuple:
    return tuple(python_expr(str(d), knobs) for d in dims)


def _py(value) -> str:
    """A Python literal of nested tuples, strings and numbers (repr is exact for these)."""
    return repr(value)


def module_name(path: Path) -> str:
    return re.sub(r"\W", "_", path.stem) or "kernel"


def render(task: Task, candidate: Candidate, origin: str, claim: str = "", module: str = "kernel") -> str:
    """The text of the generated module."""
    import jinja2

    knobs = candidate.defines()
    arrays = {t.name for t in task.spec.inputs + task.spec.outputs} | {s.name for s in candidate.scratch}
    scalars = {s.name: s for s in task.spec.scalars}
    launches = []
    for launch in candidate.launches:
        args = []
        for arg in launch.args:
            text, typed = split_arg(arg)
            if typed is None and text in arrays:
                args.append(("array", text))
            elif typed is None and text in scalars:
                args.append(("scalar", scalars[text].dtype, scalars[text].value))
            else:
                args.append(("expr", typed or "int32", python_expr(text, knobs)))
        launches.append((_expand(launch.kernel, knobs), _dims(launch.grid, knobs), _dims(launch.block, knobs),
                         python_expr(launch.shared, knobs), tuple(args)))
    spec = lambda t: (t.name, t.dtype, _dims(t.shape, {}))  # noqa: E731
    torch_spec = task.spec.torch
    options = [o for o in BASE_OPTIONS if o.startswith("-std")] + list(candidate.flags)
    options += [f"-D{k}={v}" for k, v in sorted(knobs.items())]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    inputs = [t.name for t in task.spec.inputs]
    context = dict(
        task=task.name, task_folder=str(task.folder.resolve()), fingerprint=task.fingerprint, origin=origin,
        claim=claim, module=module, function=task.name if task.name.isidentifier() and not keyword.iskeyword(task.name) else "kernel",
        source_literal=repr(candidate.render()), options=options,
        kernels=sorted({_expand(lch.kernel, knobs) for lch in candidate.launches}),
        input_specs=_py(tuple(spec(t) for t in task.spec.inputs)), output_specs=_py(tuple(spec(t) for t in task.spec.outputs)),
        scalars=_py({s.name: (s.dtype, s.value) for s in task.spec.scalars}), symbols=task.symbols,
        scratch=_py(tuple((s.name, s.dtype, python_expr(s.size, knobs), s.init) for s in candidate.scratch)),
        launches=_py(tuple(launches)), inputs=inputs, outputs=[t.name for t in task.spec.outputs],
        summary=f"{', '.join(t.name for t in task.spec.outputs)} of {task.name} from {', '.join(inputs)}.",
        torch_task=torch_spec is not None,
        parameters=_py(dict(torch_spec.parameters)) if torch_spec else "{}",
        arguments=_py(tuple(torch_spec.arguments)) if torch_spec else "()",
        arguments_signature=", ".join(torch_spec.arguments) if torch_spec else "")
    return env.get_template("export_torch.py.j2").render(**context)
