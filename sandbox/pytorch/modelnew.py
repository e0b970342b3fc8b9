"""KernelBench's own answer format on the host: a Python file defining ``class ModelNew(nn.Module)`` (the same
constructor arguments as the problem's ``Model``, a ``forward`` with the same inputs), its CUDA built through
``torch.utils.cpp_extension.load_inline`` / ``load`` or CuPy's ``RawKernel``. Its own ``get_inputs`` /
``get_init_inputs`` and constants are ignored: the task's are used.

Parsed here with ``ast`` only: the host never executes a solution. It runs in the confined problem process
(``sandbox.pytorch.modelnew_run``), built there under the same confinement. Imports no torch.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

MAX_SOURCE_CHARS = 400_000
BUILDERS = ("load_inline", "load", "RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel")
_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL = re.compile(r"__global__\s+[\w:<>,\s\*&]*?\b([A-Za-z_]\w*)\s*(?:<[^>()]*>)?\s*\(")
_ELEMENTWISE = re.compile(r"(?:ElementwiseKernel|ReductionKernel)\s*\((?:[^()]|\([^()]*\))*?['\"]([A-Za-z_]\w*)['\"]\s*"
                          r"(?:,[^()]*)?\)", re.S)


class ModelNewError(ValueError):
    """A file that is not a ModelNew solution; the message names the file and what is missing."""


@dataclass(frozen=True)
class ModelNewSolution:
    """A parsed solution: its text, where it came from, and what the host can say without running it."""

    source: str
    path: str
    builders: tuple[str, ...]        # the build calls it makes (load_inline, RawKernel...), in source order
    kernels: tuple[str, ...]         # the __global__ functions its CUDA source declares: the kernels it built
    label: str = "modelnew"

    build_inputs: str = ""           # the string literals its builds read (sources, names, flags)

    @property
    def key(self) -> str:
        """The hash of the source."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def build_key(self) -> str:
        """The hash of the string literals its builds read: what its builds are cached by (solutions that build the
        same sources share one build)."""
        return hashlib.sha256(self.build_inputs.encode()).hexdigest()[:16]


def is_modelnew(text: str) -> bool:
    """Whether ``text`` looks like a ModelNew solution (a Python file defining ``class ModelNew``), not a ``.cu``."""
    return bool(re.search(r"^class\s+ModelNew\b", text, re.M))


def parse_modelnew(text: str, path: str | Path = "<solution>", label: str = "modelnew") -> ModelNewSolution:
    """The solution in ``text``, or one ModelNewError naming ``path`` and the reason."""
    where = str(path)
    if len(text) > MAX_SOURCE_CHARS:
        raise ModelNewError(f"{where}: {len(text)} characters, over the limit of {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(text, filename=where)
    except SyntaxError as exc:
        raise ModelNewError(f"{where}: line {exc.lineno}: cannot parse: {exc.msg}") from None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not classes:
        raise ModelNewError(f"{where}: no class ModelNew defined at module level (KernelBench's answer format: "
                            "class ModelNew(nn.Module) with Model's constructor arguments and forward inputs)")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in classes[-1].body):
        raise ModelNewError(f"{where}: class ModelNew defines no forward method")
    builders = tuple(_calls(tree))
    strings = "\n".join(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return ModelNewSolution(source=text, path=where, builders=builders, kernels=declared_kernels(strings, text),
                            label=label, build_inputs=_build_inputs(tree))


_CODE_MARKS = ("__global__", "#include", "torch::", 'extern "C"', "__device__")


def _build_inputs(tree: ast.Module) -> str:
    """The string literals a build reads: those in a build call's arguments, and those that hold C++ or CUDA."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in BUILDERS:
            found |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(m in node.value for m in _CODE_MARKS):
                found.add(node.value)
    return "\0".join(sorted(found))


def _name(f: ast.AST) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def load_modelnew(path: str | Path, label: str | None = None) -> ModelNewSolution:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelNewError(f"{p}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_modelnew(text, p, label or p.stem)


def _calls(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name in BUILDERS and name not in found:
                found.append(name)
    return found


def declared_kernels(cuda: str, python: str = "") -> tuple[str, ...]:
    """The names of the ``__global__`` functions in ``cuda`` (and CuPy elementwise kernels named in ``python``):
    a kernel the profiler reports under one of these names is one the solution built."""
    names = [m.group(1) for m in _GLOBAL.finditer(_BOUNDS.sub(" ", cuda))]
    names += [m.group(1) for m in _ELEMENTWISE.finditer(python)]
    return tuple(dict.fromkeys(n for n in names if n not in ("void", "extern")))


def toolchain() -> dict[str, str | None]:
    """Where nvcc, ninja and a host C++ compiler are (None where missing): what load_inline builds with."""
    from ..plumbing.tools import find_tool

    nvcc = find_tool("nvcc", "KERNELWRIGHT_NVCC", ("/usr/local/cuda*/bin/nvcc", "/usr/local/cuda/bin/nvcc"))
    return {"nvcc": nvcc, "ninja": shutil.which("ninja") or _pip_ninja(),
            "c++": shutil.which("c++") or shutil.which("g++")}


def _pip_ninja() -> str | None:
    try:
        import ninja  # the ninja wheel puts its binary beside its module
    except ImportError:
        return None
    binary = Path(ninja.__file__).parent / "data" / "bin" / "ninja"
    return str(binary) if binary.exists() else None
