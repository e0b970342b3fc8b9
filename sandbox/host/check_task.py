"""Validate a task on a machine without a GPU: everything that can be known before a GPU run.

``check_task(path)`` loads the task (every size, derived size, constraint, shape, integer range and
roofline expression is evaluated at load time), runs ``reference()`` with NumPy at every check size
for each input-distribution trial and checks what it returns (a dict of the declared outputs, their
shapes, float64 for floating-point outputs), runs ``vendor()`` with NumPy where it can and compares
it with the reference under the task's tolerance, and compiles the baseline (and any other
candidates given) with NVRTC, resolving its plan at every size against the kernels as compiled:
argument count and sizes, grid and block limits, shared memory against the target's limit.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, computed_field

from ..candidate import CandidateError, load_candidate, validate_for_task
from ..compare import compare
from ..compiler import DEFAULT_ARCH
from ..dtypes import itemsize
from ..inputs import distribution_count, generate_all, input_specs, output_specs
from ..plan import PlanError, resolve, shared_limit
from ..task import Task, describe_sizes, load_task
from ..task_reference import ReferenceOutputError, checked_outputs
from .compile_only import CompileOnlySandbox
from .config import SandboxConfig

SCHEMA_VERSION = 1
INT32_INDEX = 2**31


class Finding(BaseModel):
    """One check and what it found."""

    check: str = Field(description="What was checked, e.g. 'reference check[2]#1' or 'baseline'.")
    status: Literal["ok", "failed", "skipped", "note"]
    detail: str = ""


class SizeRow(BaseModel):
    """One size of the task with what it implies."""

    label: str
    sizes: dict[str, int]
    derived: dict[str, int]
    shapes: dict[str, list[int]]
    array_bytes: int = Field(description="Bytes of every input and output together.")
    flops: int
    roofline_bytes: int


class TaskCheck(BaseModel):
    """What ``kernelwright check-task`` found; ``ok`` when no finding failed."""

    schema_version: int = SCHEMA_VERSION
    task: str
    folder: str
    version: int
    fingerprint: str
    arch: str
    sizes: list[SizeRow]
    findings: list[Finding]

    @computed_field
    @property
    def ok(self) -> bool:
        return not any(f.status == "failed" for f in self.findings)


def check_task(path: str | Path, candidates: list[str | Path] = (), arch: str | None = None,
               trials: int | None = None) -> TaskCheck:
    """Check the task at ``path`` (a TaskError if it does not even load) and ``candidates`` against it;
    ``trials`` per check size (default: enough to draw every listed distribution of every input). A PyTorch task's
    problem.py runs only in a confined process (sandbox.pytorch.confined); where it misbehaves there (exits, hangs,
    prints, crashes), a ProblemCodeError (a TaskError) says so in one line."""
    task = load_task(path)
    trials = trials or distribution_count(task)
    arch = arch or DEFAULT_ARCH
    rows, findings = _sizes(task)
    if task.spec.torch is not None:  # its reference runs problem.py: only in the confined process
        findings += _confined_reference(task, trials)
    else:
        module = task.reference_module()
        expected, found = _reference(task, module, trials)
        findings += found
        if callable(getattr(module, "vendor", None)):
            findings += _vendor(task, module, expected)
    for cand in [*([task.baseline_path] if task.has_baseline else []), *map(Path, candidates)]:
        findings.append(_candidate(task, cand, arch))
    return TaskCheck(task=task.name, folder=str(task.folder), version=task.spec.version, fingerprint=task.fingerprint,
                     arch=arch, sizes=rows, findings=findings)


def _sizes(task: Task) -> tuple[list[SizeRow], list[Finding]]:
    rows, notes = [], []
    tensors = task.spec.inputs + task.spec.outputs
    for label, sizes in task.spec.all_sizes():
        env = task.env(sizes)
        shapes = {t.name: list(task.shape(t, sizes)) for t in tensors}
        rows.append(SizeRow(label=label, sizes=sizes, derived={k: env[k] for k in task.spec.sizes.derived}, shapes=shapes,
                            array_bytes=sum(task.numel(t, sizes) * itemsize(t.dtype) for t in tensors),
                            flops=task.flops(sizes), roofline_bytes=task.bytes(sizes)))
        big = [t.name for t in tensors if task.numel(t, sizes) >= INT32_INDEX]
        if big:
            notes.append(Finding(check=f"sizes {label}", status="note",
                                 detail=f"{', '.join(big)} hold 2^31 elements or more at {describe_sizes(sizes)}: int32 "
                                        f"indices overflow there (pass sizes as ':i64' and index in 64 bits)"))
    notes.insert(0, Finding(check="task.toml", status="ok",
                            detail=f"loads; {len(rows)} sizes, every shape, range and roofline expression evaluated"))
    return rows, notes


def _where(task: Task, sizes: dict[str, int]) -> str:
    return f"at {describe_sizes(task.env(sizes))}"


def _raised(exc: BaseException, path: Path) -> str:
    """The exception, with the line of the task's file it came from."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name == path.name]
    at = f" at {path.name}:{frames[-1].lineno}" if frames else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"raised {type(exc).__name__}{at}: {first}"


def _inputs(task: Task, sizes: dict[str, int], trial: int) -> tuple[list[dict], dict]:
    specs = input_specs(task, sizes, trial)
    return specs, generate_all(np, specs, 1000 * trial + 1)


def _reference(task: Task, module, trials: int) -> tuple[dict[str, dict], list[Finding]]:
    """reference() at every check size and trial; returns the first trial's outputs per size for vendor()."""
    findings, expected = [], {}
    scalars = {s.name: s.value for s in task.spec.scalars}
    for i, sizes in enumerate(task.spec.sizes.check):
        for trial in range(trials):
            label = f"check[{i}]#{trial}"
            specs, ins = _inputs(task, sizes, trial)
            check = f"reference {label}"
            t0 = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    outs = checked_outputs(np, module.reference(np, **ins, **task.env(sizes), **scalars),
                                           output_specs(task, sizes))
            except ReferenceOutputError as exc:
                findings.append(Finding(check=check, status="failed", detail=f"{_where(task, sizes)}: {exc}"))
                return expected, findings
            except Exception as exc:  # the task's own code: report it with its line
                findings.append(Finding(check=check, status="failed",
                                        detail=f"{_where(task, sizes)}: reference() {_raised(exc, task.reference_path)}"))
                return expected, findings
            dists = ", ".join(f"{s['name']} {s['dist']}" for s in specs)
            nonfinite = {n: int((~np.isfinite(a)).sum()) for n, a in outs.items() if a.dtype.kind == "f"}
            detail = f"{_where(task, sizes)} with {dists}: outputs as declared ({time.perf_counter() - t0:.3f} s)"
            status = "ok"
            if any(nonfinite.values()):
                status = "note"
                detail += "; non-finite values: " + ", ".join(f"{n} {c}" for n, c in nonfinite.items() if c)
            findings.append(Finding(check=check, status=status, detail=detail))
            expected[label] = (sizes, trial, outs)
    return expected, findings


def _confined_reference(task: Task, trials: int) -> list[Finding]:
    from ..pytorch.confined import ProblemCodeError, call

    problem = task.folder / task.spec.torch.problem
    out = call("sandbox.host.check_task:reference_findings", str(task.folder), trials, label=str(problem),
               read=[task.folder])
    try:
        return [Finding.model_validate(f) for f in out.result]
    except (TypeError, ValueError):
        raise ProblemCodeError(f"{problem}: its process sent an unreadable reply") from None


def reference_findings(folder: str, trials: int) -> list[dict]:
    """The reference checks of the task in ``folder``; runs in the confined process (sandbox.pytorch.confined)."""
    task = load_task(folder)
    return [f.model_dump() for f in _reference(task, task.reference_module(), trials)[1]]


def _vendor(task: Task, module, expected: dict[str, tuple]) -> list[Finding]:
    """vendor() with NumPy on every trial's inputs, in the task's dtypes, against the reference; skipped where it
    needs CuPy."""
    findings = []
    scalars = {s.name: s.value for s in task.spec.scalars}
    for label, (sizes, trial, ref) in expected.items():
        check = f"vendor {label}"
        _, ins = _inputs(task, sizes, trial)
        try:
            with np.errstate(all="ignore"):
                returned = module.vendor(np, **ins, **task.env(sizes), **scalars)
        except Exception as exc:
            return findings + [Finding(check=check, status="skipped",
                                       detail=f"not checked with NumPy: vendor() {_raised(exc, task.reference_path)} "
                                              f"(it may need CuPy; it runs on the GPU)")]
        try:
            got = checked_outputs(np, returned, output_specs(task, sizes), "vendor()", exact_dtype=True)
        except ReferenceOutputError as exc:
            return findings + [Finding(check=check, status="failed", detail=f"{_where(task, sizes)}: {exc}")]
        for name, array in got.items():
            tol = task.output_tolerance(name)
            with np.errstate(all="ignore"):
                found = compare(np, array, ref[name], tol.atol, tol.rtol)
            if not found["passed"]:
                first = found["first_mismatch"] or {}
                return findings + [Finding(check=check, status="failed", detail=(
                    f"{_where(task, sizes)}: vendor() output {name!r} differs from the reference beyond the "
                    f"tolerance: {found['mismatches']} mismatches" + (f", first at {first['index']}: got {first['got']}, "
                                                                      f"expected {first['expected']}" if first else "")))]
        findings.append(Finding(check=check, status="ok", detail=f"{_where(task, sizes)}: agrees with the reference"))
    return findings


def _candidate(task: Task, path: Path, arch: str) -> Finding:
    """Compile a candidate for ``arch`` and resolve its plan at every size against the kernels as compiled."""
    check = "baseline" if path == task.baseline_path else f"candidate {path.name}"
    try:
        cand = load_candidate(path)
        validate_for_task(cand, task)
    except CandidateError as exc:
        return Finding(check=check, status="failed", detail=str(exc))
    with CompileOnlySandbox(SandboxConfig(arch=arch)) as sb:
        result = sb.compile(task, cand)
    if result.status.value != "compiled":
        return Finding(check=check, status="failed", detail=f"{result.status.value}: {result.error}")
    limit = shared_limit(sb.device, arch)
    for label, sizes in task.spec.all_sizes():
        try:
            resolve(task, cand, result.compile, sizes, limit)
        except PlanError as exc:
            return Finding(check=check, status="failed", detail=f"launch_error at {label}: {exc}")
    kernels = "; ".join(f"{k.name}: {k.registers} registers, spills {k.spill_stores}/{k.spill_loads} B, "
                        f"{len(result.compile.params.get(k.name, []))} parameters"
                        for k in result.compile.kernels.values())
    return Finding(check=check, status="ok", detail=f"compiles for {arch} (NVRTC {result.compile.nvrtc_version}); "
                                                    f"its plan launches at every size; {kernels}")
