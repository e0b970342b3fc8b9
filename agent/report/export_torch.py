"""A candidate as a small PyTorch module (``templates/export_torch.py.j2``): a ``torch.library.custom_op`` whose
fake implementation gives the outputs' shapes from the task's shape expressions (``torch.compile`` traces it
without a graph break) and whose CUDA implementation launches through CuPy on torch's current stream with the
tensors' pointers (a CUDA graph captures it); a function taking torch tensors that calls it, ``Module``,
``check()`` against the task's reference, and for a task imported from a PyTorch problem a ``forward`` and a
``replace(model)`` that put the kernel in place of the module's own forward.

The launch plan's expressions are vetted by ``sandbox.tasks.expr`` here, their knobs written in as numbers and
``/`` turned into Python's ``//``, so the generated file evaluates only integer arithmetic of the sizes.
No text from a run folder, a task or a model is pasted into the generated code: every string (the docstrings
included) is a literal written by ``literal()``, and every name the code defines or takes (the function, its
parameters) is checked to be an identifier that is no keyword and no name of the module's own, else renamed.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import json
import keyword
import math
import re
from pathlib import Path

from sandbox.candidates.candidate import Candidate, split_arg
from sandbox.candidates.compiler import BASE_OPTIONS, expand_names
from sandbox.tasks import expr
from sandbox.tasks.task import Task

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


def python_condition(text: str) -> str:
    """A task's size constraint (a chain of comparisons) as Python, ``/`` as floor division."""
    parsed = copy.deepcopy(expr.parse_condition(text))
    return ast.unparse(_Python({}).visit(ast.fix_missing_locations(ast.Expression(parsed))))


def literal(value) -> str:
    """Python source for a value of nested tuples, lists, dicts, strings, numbers, booleans and None; anything
    else is refused. ``repr`` is exact for these apart from non-finite floats, which are spelled out."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, (tuple, list)):
        items = ", ".join(literal(v) for v in value)
        return f"({items}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{items}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Python literal for {type(value).__name__}")


# Names the generated module defines or imports, and the function's own keyword-arguments name: a task or an
# input that bears one of them gets another name in the module.
MODULE_NAMES = frozenset({
    "torch", "TASK", "TASK_FOLDER", "TASK_FINGERPRINT", "SOURCE", "OPTIONS", "KERNELS", "INPUTS", "OUTPUTS",
    "SCALARS", "SYMBOLS", "DERIVED", "DEPENDS", "CONSTRAINTS", "SCRATCH", "LAUNCHES", "PARAMETERS", "ARGUMENTS",
    "FUNCTION", "sizes_of", "output_shape", "plan", "forward", "check", "derive", "_DTYPES", "_modules", "_module", "_value",
    "_at", "_solve", "cupy", "numpy", "OP", "OP_NAME", "SCHEMA", "Module", "replace", "_named", "_outputs", "_launch",
    "_fake", "_register", "_attr", "_attr_or_none", "types"}) | set(dir(builtins)) | {"self", "sizes"}


def identifier(name: str, taken: set[str], fallback: str = "arg") -> str:
    """``name`` if it can be a Python name here, else the first of ``name_``, ``name__``, ... that can (a
    name that is no identifier at all becomes ``fallback``...); the result is added to ``taken``."""
    base = name if name.isidentifier() and name.isascii() else fallback
    out = base
    while keyword.iskeyword(out) or keyword.issoftkeyword(out) or out in taken or out in MODULE_NAMES:
        out += "_"
    taken.add(out)
    return out


def module_name(path: Path) -> str:
    """The name ``import`` finds a file under: its stem if that is an identifier, else one made from it."""
    name = re.sub(r"\W", "_", path.stem, flags=re.ASCII) or "kernel"
    return name if name.isidentifier() and not keyword.iskeyword(name) else f"_{name}"


def _depends(task: Task) -> dict[str, list[str]]:
    """For every derived size and every shape dimension that is an expression: the size symbols it depends on."""
    derived: dict[str, set[str]] = {}
    for name, text in task.spec.sizes.derived.items():
        derived[name] = set().union(*(derived.get(n, {n}) for n in expr.names(str(text))))
    out = {name: sorted(deps) for name, deps in derived.items()}
    for t in task.spec.inputs:
        for dim in t.shape:
            if isinstance(dim, str) and not dim.strip().isidentifier():
                text = str(python_expr(dim, {}))
                out[text] = sorted(set().union(*(derived.get(n, {n}) for n in expr.names(dim))))
    return out


def _op_digest(task: Task, candidate: Candidate, options: list[str]) -> str:
    """Twelve hex digits naming the build: two modules of one kernel share their operator, two builds do not."""
    text = json.dumps([task.fingerprint, candidate.render(), options], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _schema(inputs: int, outputs: int) -> str:
    """The operator's schema: the inputs, then the sizes given by keyword (-1 where a shape gives them)."""
    params = ", ".join(f"Tensor t{i}" for i in range(inputs))
    returns = "Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")"
    return f"({params}, int[] given) -> {returns}"


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
        launches.append((expand_names(launch.kernel, knobs), _dims(launch.grid, knobs), _dims(launch.block, knobs),
                         python_expr(launch.shared, knobs), tuple(args)))
    spec = lambda t: (t.name, t.dtype, _dims(t.shape, {}))  # noqa: E731
    torch_spec = task.spec.torch
    options = [o for o in BASE_OPTIONS if o.startswith("-std")] + list(candidate.flags)
    options += [f"-D{k}={v}" for k, v in sorted(knobs.items())]
    function = identifier(task.name, set(), "kernel")
    taken: set[str] = {function}
    params = {t.name: identifier(t.name, taken) for t in task.spec.inputs}
    arguments = list(torch_spec.arguments) if torch_spec else []
    forward_params = [params.get(a) or identifier(a, taken) for a in arguments]
    module = module_name(Path(module + ".py")) if module else "kernel"
    inputs, outputs = [params[t.name] for t in task.spec.inputs], [t.name for t in task.spec.outputs]
    usage = f"{', '.join(outputs)} = {module}.{function}({', '.join(inputs)})"
    op_name = f"kernelwright::{function}_{_op_digest(task, candidate, options)}"
    doc = (f"{task.name}: a CUDA kernel exported by kernelwright from {origin}, as the PyTorch operator\n"
           f"torch.ops.{op_name.replace('::', '.')} (torch.library.custom_op, with a fake implementation).\n\n"
           f"    import torch\n    import {module}\n\n"
           f"    {usage}   # CUDA tensors, contiguous\n"
           f"    {module}.check()          # against the task's reference (needs kernelwright and the task folder)\n"
           + (f"    {module}.replace(model)   # a Model of the task's problem.py: its forward is now the kernel\n"
              if torch_spec else f"    model.layer = {module}.Module()   # in place of a submodule doing the same\n")
           + f"    torch.compile(model, fullgraph=True)   # traced without a graph break\n"
           + "\nEvery call checks the tensors against the task (device, dtype, contiguity, shape), binds the size "
           "symbols\nfrom their shapes (solving derived sizes for symbols no shape holds), resolves the launch plan at "
           "those sizes\nand launches it on torch's current stream, so a CUDA graph captures it: call it once on a "
           "device before\ncapturing (the first call compiles the source by NVRTC through CuPy, with the run's flags "
           "and knobs).\nOn the meta device and under torch.compile, the output shapes come from the task's shape "
           "expressions.\nForward only: the operator has no autograd formula (run it under torch.no_grad() or "
           "torch.inference_mode()).\n" + (f"\n{claim}\n" if claim else ""))
    summary = f"{', '.join(outputs)} of {task.name} from {', '.join(t.name for t in task.spec.inputs)}."
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["py"] = literal
    context = dict(
        doc=doc, summary=summary, task=task.name, task_folder=str(task.folder.resolve()), fingerprint=task.fingerprint,
        function=function, params=inputs, source=candidate.render(), options=options,
        kernels=sorted({expand_names(lch.kernel, knobs) for lch in candidate.launches}),
        input_specs=tuple(spec(t) for t in task.spec.inputs), output_specs=tuple(spec(t) for t in task.spec.outputs),
        scalars={s.name: (s.dtype, s.value) for s in task.spec.scalars}, symbols=task.symbols,
        derived=tuple((name, python_expr(str(text), {})) for name, text in task.spec.sizes.derived.items()),
        depends=_depends(task), constraints=tuple(python_condition(c) for c in task.spec.sizes.constraints),
        scratch=tuple((s.name, s.dtype, python_expr(s.size, knobs), s.init) for s in candidate.scratch),
        launches=tuple(launches), single=len(outputs) == 1, torch_task=torch_spec is not None,
        parameters=dict(torch_spec.parameters) if torch_spec else {}, arguments=arguments,
        forward_params=forward_params, op_name=op_name,
        schema=_schema(len(inputs), len(outputs)))
    return env.get_template("export_torch.py.j2").render(**context)
