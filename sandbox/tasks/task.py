"""Tasks: what to compute, at which sizes, how exactly, and the kernel to start from.

A task is a folder with ``task.toml`` (this schema), ``reference.py`` (the trusted reference and
an optional vendor implementation) and ``baseline.cu`` (a candidate in the format of
``sandbox.candidates.candidate``). A task with a ``[torch]`` table (``sandbox.pytorch``) is a PyTorch module kept
beside it as ``problem.py``: its baselines are PyTorch eager and ``torch.compile``, and ``baseline.cu``
is optional. Every problem in a task gets one ``TaskError`` naming the file, the key and
what was expected, at load time: every size (derived sizes and constraints included), every shape,
integer range and roofline expression is evaluated then, so nothing malformed reaches a sandbox.
"""

from __future__ import annotations

import ast
import hashlib
import tomllib
from functools import cached_property
from pathlib import Path
from types import ModuleType

from pydantic import ValidationError

from . import expr
from .task_reference import load_reference
from .task_spec import (  # noqa: F401  (the schema's names are part of this module's interface)
    CATEGORIES,
    DISTRIBUTIONS,
    ScalarSpec,
    Sizes,
    TaskError,
    TaskSpec,
    TensorSpec,
    Tolerance,
    bind,
    check_size,
    describe_sizes,
)


class Task:
    """A loaded task: the validated spec plus its folder, reference module and baseline source."""

    def __init__(self, spec: TaskSpec, folder: Path):
        self.spec = spec
        self.folder = folder

    name = property(lambda self: self.spec.name)

    @property
    def symbols(self) -> list[str]:
        """The size symbols a size sets (derived ones excluded)."""
        return list(self.spec.sizes.benchmark)

    @property
    def all_symbols(self) -> list[str]:
        """Every name an expression may use for a size: the symbols, then the derived sizes."""
        return self.symbols + list(self.spec.sizes.derived)

    @property
    def baseline_path(self) -> Path:
        return self.folder / "baseline.cu"

    @property
    def has_baseline(self) -> bool:
        """Whether the task has a CUDA starting kernel (a [torch] task may not: it starts from the module)."""
        return self.baseline_path.is_file()

    @property
    def baselines(self) -> list[str]:
        """The named implementations a candidate is timed against, the first being the one scores use."""
        names = ["baseline"] if self.has_baseline else []
        return names + (list(self.spec.torch.baselines) if self.spec.torch is not None else [])

    @property
    def reference_path(self) -> Path:
        return self.folder / "reference.py"

    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the task's files: results are only comparable within one fingerprint."""
        h = hashlib.sha256()
        names = ["task.toml", "reference.py", "baseline.cu"]
        if self.spec.torch is not None:
            names = [n for n in names if (self.folder / n).is_file()] + [self.spec.torch.problem]
        for name in names:
            h.update(name.encode() + b"\0" + (self.folder / name).read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def env(self, sizes: dict[str, int]) -> dict[str, int]:
        """``sizes`` with the derived sizes added (what expressions and the reference see)."""
        return bind(self.spec, sizes)

    def check_sizes(self, sizes: dict[str, int], where: str = "sizes") -> None:
        """Validate a size given from outside the task (e.g. ``--sizes``): TaskError naming the problem."""
        if set(sizes) != set(self.symbols):
            raise TaskError(f"{where} must set exactly {', '.join(self.symbols)} (got {', '.join(sizes) or 'none'})")
        try:
            check_size(self.spec, "given", sizes)
        except ValueError as exc:
            raise TaskError(f"{where}: {exc}".replace("sizes.given ", "")) from None

    def shape(self, tensor: TensorSpec, sizes: dict[str, int]) -> tuple[int, ...]:
        env = self.env(sizes)
        return tuple(expr.evaluate(str(d), env) for d in tensor.shape)

    def numel(self, tensor: TensorSpec, sizes: dict[str, int]) -> int:
        n = 1
        for d in self.shape(tensor, sizes):
            n *= d
        return n

    def bounds(self, tensor: TensorSpec, sizes: dict[str, int]) -> tuple[float, float]:
        """An input's ``low`` and ``high`` at ``sizes`` (expressions evaluated)."""
        env = self.env(sizes)
        return tuple(expr.evaluate(b, env) if isinstance(b, str) else b for b in (tensor.low, tensor.high))

    def tensor(self, name: str) -> TensorSpec:
        for t in self.spec.inputs + self.spec.outputs:
            if t.name == name:
                return t
        raise KeyError(name)

    def flops(self, sizes: dict[str, int]) -> int:
        return expr.evaluate(str(self.spec.roofline.flops), self.env(sizes))

    def bytes(self, sizes: dict[str, int]) -> int:
        return expr.evaluate(str(self.spec.roofline.bytes), self.env(sizes))

    def tolerance(self, dtype: str) -> Tolerance:
        return self.spec.tolerance[dtype]

    def output_tolerance(self, output: TensorSpec | str) -> Tolerance:
        """An output's own tolerance, else its dtype's."""
        out = self.tensor(output) if isinstance(output, str) else output
        return out.tolerance or self.spec.tolerance[out.dtype]

    def reference_module(self) -> ModuleType:
        """Import reference.py (trusted code: the task's own reference and vendor functions)."""
        return load_reference(self.reference_path)

    def __repr__(self) -> str:
        return f"Task({self.name!r}, {self.folder})"


def suite_dir() -> Path:
    """The task suite: kernels/ in a checkout, sandbox/_suite in an installed wheel."""
    here = Path(__file__).resolve().parents[1]  # the sandbox package's folder
    for candidate in (here / "_suite", here.parent / "kernels"):
        if candidate.is_dir():
            return candidate
    raise TaskError(f"no task suite found next to {here}")


def suite_names() -> list[str]:
    return sorted(p.parent.name for p in suite_dir().glob("*/task.toml"))


def task_folders(path: str | Path) -> list[Path]:
    """The task folders at ``path``: the folder itself if it holds task.toml, else its sub-folders that do."""
    path = Path(path)
    if (path / "task.toml").is_file():
        return [path]
    if not path.is_dir():
        raise TaskError(f"{path}: no such folder")
    found = sorted(p.parent for p in path.glob("*/task.toml"))
    if not found:
        raise TaskError(f"{path}: holds no task (no task.toml in it or in a folder below it)")
    return found


def format_validation(path: Path, err: ValidationError) -> str:
    """A task.toml's validation errors as one message naming the file and each key at fault."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing"
        lines.append(f"{path}: {loc}: {msg}" if loc else f"{path}: {msg}")
    return "\n".join(lines)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None


def _vet_reference(path: Path, vendor: str | None) -> None:
    """reference.py parses and defines reference() (and vendor() when the task names a vendor), without running it."""
    try:
        tree = ast.parse(_read_text(path), filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}:{exc.lineno}: invalid Python: {exc.msg}") from None
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    defined = functions | assigned | imported
    if "reference" not in defined:
        raise TaskError(f"{path}: reference: expected a function reference(xp, **arrays_and_sizes)")
    if vendor and "vendor" not in defined:
        raise TaskError(f"{path}: vendor: the task names a vendor ({vendor!r}) but reference.py defines no vendor() function")


def resolve_folder(name_or_path: str | Path) -> Path:
    """A suite name means the suite's task; anything else is a path (a task folder or its task.toml)."""
    text = str(name_or_path)
    path = Path(name_or_path)
    if path.name == "task.toml":
        return path.parent.resolve()
    if "/" not in text and text not in (".", "..") and (suite_dir() / text / "task.toml").is_file():
        return suite_dir() / text
    if path.is_dir():
        return path.resolve()
    known = ", ".join(suite_names())
    raise TaskError(f"{name_or_path}: no such task (not a folder with task.toml; suite tasks: {known})")


def shadowed(name_or_path: str | Path) -> Path | None:
    """A folder in the working directory that a bare suite name does not mean (``./NAME`` picks it)."""
    text = str(name_or_path)
    if "/" in text or text not in suite_names():
        return None
    local = Path(text)
    return local if (local / "task.toml").is_file() and local.resolve() != (suite_dir() / text).resolve() else None


def load_task(name_or_path: str | Path) -> Task:
    """Load a task by suite name or by path (a task folder or its task.toml)."""
    folder = resolve_folder(name_or_path)
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{folder}: task.toml is missing")
    try:
        data = tomllib.loads(_read_text(toml_path))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{toml_path}: invalid TOML: {exc}") from None
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskError(format_validation(toml_path, exc)) from None
    if spec.name != folder.name:
        raise TaskError(f"{toml_path}: name: expected the folder name {folder.name!r}, got {spec.name!r}")
    required = ("reference.py", "baseline.cu") if spec.torch is None else ("reference.py", spec.torch.problem)
    for name in required:
        if not (folder / name).is_file():
            raise TaskError(f"{folder / name}: file is missing (a task needs task.toml, reference.py and "
                            + ("baseline.cu)" if spec.torch is None else "its PyTorch problem)"))
    _vet_reference(folder / "reference.py", spec.vendor)
    return Task(spec, folder)
