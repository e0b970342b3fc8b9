"""Validate a task on a machine without a GPU: everything that can be known before a GPU run.

``check_task(path)`` loads the task (every size, derived size, constraint, shape, integer range and
roofline expression is evaluated at load time), runs ``reference()`` with NumPy at every check size
for each input-distribution trial and checks what it returns (a dict of the declared outputs, their
shapes, float64 for floating-point outputs), runs ``vendor()`` with NumPy where it can and compares
it with the reference under the task's tolerance, and compiles the baseline (and any other
candidates given) with NVRTC, resolving its plan at every size against the kernels as compiled:
argument count and sizes, grid and block limits, shared memory against the target's limit.

It then measures the task's check strength (``sandbox.tasks.strength``): zeros, a constant, each input passed
through, the reference plus noise at ten times the tolerance and, for a PyTorch task, the float32 module
with one operation skipped, each run through the task's own comparison on every check; a task that lets one
of them pass fails. For a PyTorch task the float32 module itself must pass (the tolerance is not too tight).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, computed_field

from ..candidates.candidate import CandidateError, load_candidate, validate_for_task
from ..candidates.compiler import DEFAULT_ARCH
from ..candidates.plan import PlanError, resolve, shared_limit
from ..judging.compare import compare
from ..tasks import strength as impostors
from ..tasks.dtypes import itemsize
from ..tasks.dtypes import to_compute
from ..tasks.inputs import distribution_count, generate_all, input_specs, output_specs
from ..tasks.task import Task, describe_sizes, load_task
from ..tasks.task_reference import ReferenceOutputError, checked_outputs
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


class ImpostorRow(BaseModel):
    """One wrong answer run through the task's comparison on every check."""

    impostor: str = Field(description="zeros, constant, identity:<input>, noise x10, skip-op:<operation>.")
    output: str
    verdict: Literal["rejected", "passes", "right_answer", "not_applicable"]
    detail: str = ""


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
    strength: list[ImpostorRow] = Field(default_factory=list, description="The check strength: each impostor's verdict.")

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
    size_rows, findings = _sizes(task)
    if task.spec.torch is not None:  # its reference runs problem.py: only in the confined process
        found, rows = _confined_judgement(task, trials)
        findings += found
    else:
        module = task.reference_module()
        found, rows, expected = _judgement(task, module, trials)
        findings += found
        if callable(getattr(module, "vendor", None)):
            findings += _vendor(task, module, expected)
    for cand in [*([task.baseline_path] if task.has_baseline else []), *map(Path, candidates)]:
        findings.append(_candidate(task, cand, arch))
    return TaskCheck(task=task.name, folder=str(task.folder), version=task.spec.version, fingerprint=task.fingerprint,
                     arch=arch, sizes=size_rows, findings=findings, strength=rows)


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
    """The inputs as generated (bfloat16 as its bits): what a kernel reads."""
    specs = input_specs(task, sizes, trial)
    return specs, generate_all(np, specs, 1000 * trial + 1)


def _values(task: Task, ins: dict) -> dict:
    """The inputs as the reference computes with them (bfloat16 bits read as float32)."""
    return {name: to_compute(np, a, task.tensor(name).dtype) for name, a in ins.items()}


def _module_passes(task: Task, cases: list, expected: dict) -> Finding:
    """The float32 module (the eager baseline, on the CPU) against the reference on every check."""
    from ..pytorch.runtime import runtime_for

    rt = runtime_for(task.folder)
    scalars = {s.name: s.value for s in task.spec.scalars}
    for case in cases:
        sizes = expected[case.label][0]
        got = rt.baseline("eager", sizes, device="cpu")(np, **case.inputs, **task.env(sizes), **scalars)
        for name, array in got.items():
            tol = task.output_tolerance(name)
            with np.errstate(all="ignore"):
                found = compare(np, to_compute(np, array, task.tensor(name).dtype), case.expected[name], tol.atol, tol.rtol,
                                tol.spread)
            if not found["passed"]:
                return Finding(check="float32 module", status="failed", detail=(
                    f"{case.label} {_where(task, sizes)}: the module's own float32 result misses the tolerance on "
                    f"{name!r} (max error {found['max_abs_error']:.3g}, atol {tol.atol:g}, rtol {tol.rtol:g}): the "
                    "tolerance is too tight for float32 arithmetic"))
    return Finding(check="float32 module", status="ok", detail=f"passes the reference on all {len(cases)} checks")


def _skip_op(task: Task, expected: dict, cases: list) -> dict:
    """The skip-one-operation impostor of a PyTorch task, keyed by its name: the last operation (among the last
    few that keep the outputs' shapes, at every check size) whose skipping changes some output bit."""
    from ..pytorch.runtime import runtime_for, skip_one_op

    scalars = {s.name: s.value for s in task.spec.scalars}
    made: dict[tuple, dict] = {}
    size_of = {}
    for label, (sizes, trial, _) in expected.items():
        key = tuple(sorted(sizes.items()))
        if key not in made:
            made[key] = dict(skip_one_op(task.folder, sizes))
        size_of[label] = (sizes, key)
    common = [op for op in next(iter(made.values()), {}) if all(op in m for m in made.values())]
    if not common:
        return {"skip-op": (lambda case: None, "the module cannot be traced, or no operation can be skipped with "
                                               "every output's shape kept")}
    runtime = runtime_for(task.folder)

    def producer(op):
        def produce(case):
            sizes, key = size_of[case.label]
            return made[key][op](np, **case.inputs, **task.env(sizes), **scalars)
        return produce

    def same(case, produce) -> bool:
        sizes = size_of[case.label][0]
        eager = runtime.baseline("eager", sizes, device="cpu")(np, **case.inputs, **task.env(sizes), **scalars)
        skipped = produce(case)
        return all(np.array_equal(eager[k], skipped[k], equal_nan=eager[k].dtype.kind == "f") for k in eager)

    for op in common:   # e.g. a clamp to [-1, 1] after tanh changes nothing: a right answer, so try the one before
        produce = producer(op)
        if not all(same(case, produce) for case in cases):
            return {f"skip-op:{op.split('#')[0]}": (produce, "")}
    names = "/".join(op.split("#")[0] for op in common)
    return {f"skip-op:{names}": (lambda case: None, "skipping it changes no output bit on the task's inputs: the "
                                                    "operation is redundant there, so this is a right answer")}


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
                    outs = checked_outputs(np, module.reference(np, **_values(task, ins), **task.env(sizes), **scalars),
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


def _judgement(task: Task, module, trials: int) -> tuple[list[Finding], list[ImpostorRow], dict]:
    """The reference at every check, then the check strength: every impostor through the task's comparison.
    Returns the findings, the impostors' rows and the first trial's outputs per size (for ``vendor()``)."""
    expected, findings = _reference(task, module, trials)
    rows = []
    if expected and not any(f.status == "failed" for f in findings):
        cases = [impostors.Case(label, _inputs(task, sizes, trial)[1], outs) for label, (sizes, trial, outs) in expected.items()]
        extra = {}
        if task.spec.torch is not None:
            findings.append(_module_passes(task, cases, expected))
            extra = _skip_op(task, expected, cases)
        measured = impostors.measure(task, cases, extra)
        rows = [ImpostorRow(**vars(r)) for r in measured.results]
        right = any(r.verdict == "right_answer" for r in measured.results)
        findings.append(Finding(check="check strength", status="failed" if measured.passing else "note" if right else "ok",
                                detail=measured.summary()))
    return findings, rows, expected


def _confined_judgement(task: Task, trials: int) -> tuple[list[Finding], list[ImpostorRow]]:
    from ..pytorch.confined import ProblemCodeError, call

    problem = task.folder / task.spec.torch.problem
    out = call("sandbox.host.check_task:judgement", str(task.folder), trials, label=str(problem), read=[task.folder])
    try:
        return ([Finding.model_validate(f) for f in out.result["findings"]],
                [ImpostorRow.model_validate(r) for r in out.result["strength"]])
    except (TypeError, KeyError, ValueError):
        raise ProblemCodeError(f"{problem}: its process sent an unreadable reply") from None


def judgement(folder: str, trials: int) -> dict:
    """The reference checks and the check strength of the task in ``folder``, as JSON-ready data; runs in the
    confined process (sandbox.pytorch.confined), since a PyTorch task's reference and impostors run problem.py."""
    task = load_task(folder)
    findings, rows, _ = _judgement(task, task.reference_module(), trials)
    return {"findings": [f.model_dump() for f in findings], "strength": [r.model_dump() for r in rows]}


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
                found = compare(np, array, ref[name], tol.atol, tol.rtol, tol.spread)
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
