"""check_task validates a task on a CPU machine: the five example tasks pass it, and each way a reference, a
vendor implementation or a plan can be wrong is one failed finding naming what and where."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sandbox.host.check_task import check_task
from sandbox.tasks.inputs import input_specs, output_specs
from sandbox.tasks.task import TaskError, load_task
from sandbox.wire import tolerances

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
NAMES = ["argmax", "conv1d_bias_relu", "cross_entropy", "gemm_nt", "maxpool2d"]


@pytest.mark.parametrize("name", NAMES)
def test_every_example_task_passes(name):
    report = check_task(EXAMPLES / name)
    assert report.ok, [f for f in report.findings if f.status == "failed"]
    checks = {f.check: f for f in report.findings}
    task = load_task(EXAMPLES / name)
    for i in range(len(task.spec.sizes.check)):
        assert checks[f"reference check[{i}]#0"].status == "ok" and checks[f"reference check[{i}]#1"].status == "ok"
        assert checks[f"vendor check[{i}]#0"].status == "ok", checks[f"vendor check[{i}]#0"].detail
        assert checks[f"vendor check[{i}]#1"].status == "ok", checks[f"vendor check[{i}]#1"].detail
    assert checks["baseline"].status == "ok" and "its plan launches at every size" in checks["baseline"].detail
    assert [r.label for r in report.sizes][:2] == ["benchmark", "check[0]"]
    assert json.loads(report.model_dump_json())["ok"] is True


def _copy(tmp_path: Path, name: str) -> Path:
    shutil.copytree(EXAMPLES / name, tmp_path / name)
    return tmp_path / name


def _edit(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _failed(report) -> list:
    return [f for f in report.findings if f.status == "failed"]


@pytest.mark.parametrize("body, message", [
    ("    return None", "reference() returned NoneType, expected a dict {output name: array} with 'idx'"),
    ("    return {'index': xp.argmax(x, axis=1)}", "reference() returned outputs ['index'], the task declares ['idx'] "
                                                  "(missing: ['idx']) (unknown: ['index'])"),
    ("    return {'idx': xp.argmax(x, axis=0)}", "reference() output 'idx' has shape (1,), the task says (1,)"),
    ("    return {'idx': x.max(axis=1)}", "reference() output 'idx' is float32, expected an integer type"),
    ("    return {'idx': xp.argmax(x, axis=1) + 2**40}", "beyond int32's range: no kernel could match it"),
    ("    return {'idx': None}", "reference() output 'idx' is None, expected an array"),
    ("    return {'idx': rows / 0}", "reference() raised ZeroDivisionError at reference.py:5: division by zero"),
])
def test_a_reference_that_does_not_return_the_outputs_is_a_failed_finding(tmp_path, body, message):
    folder = _copy(tmp_path, "argmax")
    _edit(folder, "reference.py", '    return {"idx": xp.argmax(x, axis=1)}', body)
    report = check_task(folder)
    failed = _failed(report)
    assert not report.ok and failed[0].check.startswith("reference check[")
    if "shape (1,), the task says (1,)" in message:   # axis=0 is only wrong where rows != cols
        assert any("has shape (" in f.detail and "the task says" in f.detail for f in failed)
    else:
        assert message in failed[0].detail


def test_a_reference_in_lower_precision_than_its_output_fails(tmp_path):
    folder = _copy(tmp_path, "gemm_nt")
    _edit(folder, "reference.py", '{"C": A.astype(xp.float64) @ B.astype(xp.float64).T}', '{"C": (A @ B.T).astype(xp.float16)}')
    failed = _failed(check_task(folder))
    assert "reference() output 'C' is float16, expected a floating type at least as precise as float32" in failed[0].detail


def test_a_vendor_that_disagrees_with_the_reference_or_returns_another_dtype_fails(tmp_path):
    folder = _copy(tmp_path, "maxpool2d")
    _edit(folder, "reference.py", "windows.max(axis=(4, 5))", "windows.mean(axis=(4, 5))")
    failed = _failed(check_task(folder))
    assert failed[0].check == "vendor check[0]#0"
    assert "vendor() output 'y' differs from the reference beyond the tolerance: 1 mismatches, first at [0, 0, 0, 0]" in failed[0].detail
    _edit(folder, "reference.py", "windows.mean(axis=(4, 5))", "windows.max(axis=(4, 5)).astype(xp.float64)")
    failed = _failed(check_task(folder))
    assert "vendor() output 'y' is float64, expected float32" in failed[0].detail


def test_a_vendor_that_needs_cupy_is_skipped_not_failed(tmp_path):
    folder = _copy(tmp_path, "argmax")
    _edit(folder, "reference.py", 'return {"idx": xp.argmax(x, axis=1).astype(xp.int32)}', 'return {"idx": xp.fuse(xp.argmax)(x)}')
    report = check_task(folder)
    skipped = [f for f in report.findings if f.status == "skipped"]
    assert report.ok and skipped[0].check == "vendor check[0]#0"
    assert "not checked with NumPy: vendor() raised AttributeError at reference.py:9" in skipped[0].detail


def test_a_plan_that_misses_an_argument_fails_before_any_gpu_run(tmp_path):
    folder = _copy(tmp_path, "argmax")
    _edit(folder, "baseline.cu", 'args = ["x", "idx", "cols"]', 'args = ["x", "idx"]')
    failed = _failed(check_task(folder))
    assert failed[0].check == "baseline"
    assert "launch_error: launch[0] (argmax_rows): the plan passes 2 arguments, the kernel takes 3 parameters" in failed[0].detail


def test_a_plan_that_cannot_launch_at_a_heldout_size_fails(tmp_path):
    folder = _copy(tmp_path, "conv1d_bias_relu")
    _edit(folder, "task.toml", "{ N = 7, CI = 100, CO = 200, L = 1001, KW = 11 }", "{ N = 7, CI = 100, CO = 70000, L = 1001, KW = 11 }")
    failed = _failed(check_task(folder))
    assert failed[0].check == "baseline" and "launch_error at heldout[2]" in failed[0].detail
    assert "grid dimension 1 = 70000" in failed[0].detail


def test_another_candidate_is_checked_against_the_task_too(tmp_path):
    other = tmp_path / "mine.cu"
    other.write_text((EXAMPLES / "argmax" / "baseline.cu").read_text().replace('"rows"', '"rows * 0"'))
    report = check_task(EXAMPLES / "argmax", candidates=[other])
    failed = _failed(report)
    assert failed[0].check == "candidate mine.cu" and "grid dimension 0 = 0" in failed[0].detail


def test_a_task_that_does_not_load_is_a_task_error(tmp_path):
    folder = _copy(tmp_path, "argmax")
    (folder / "task.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(TaskError, match="not UTF-8"):
        check_task(folder)


def test_the_reference_worker_reports_a_bad_reference_as_a_task_error(tmp_path):
    import dataclasses

    from sandbox.wire import CompareTask, CompareTrial, RunOutputs, WorkerError
    from sandbox.worker.reference import run_compare

    folder = _copy(tmp_path, "cross_entropy")
    ref = folder / "reference.py"
    _edit(folder, "reference.py", 'return {"loss": (lse - picked).mean()}', "return None")
    task = load_task(folder)
    sizes = {"N": 3, "C": 5}
    shared = CompareTask(task_folder=str(folder), scalars={}, tolerance=tolerances(task), backend="numpy")
    trial = CompareTrial(label="t", sizes=task.env(sizes), inputs=input_specs(task, sizes, 0),
                         outputs=output_specs(task, sizes), seed=1, runs=[])
    reply = run_compare(shared, trial)
    assert isinstance(reply, WorkerError) and reply.task_error is True
    assert "reference() returned NoneType, expected a dict" in reply.error
    ref.write_text(ref.read_text().replace("return None", 'return {"loss": xp.zeros(1)}'))
    assert "output 'loss' has shape (1,), the task says ()" in run_compare(shared, trial).error
    ref.write_text(ref.read_text().replace('return {"loss": xp.zeros(1)}', 'return {"loss": xp.float64(N)}'))
    saved = _saved(tmp_path, np.float32(3.0))
    reply = run_compare(shared, dataclasses.replace(trial, runs=[RunOutputs("run1", {"loss": saved})]))
    assert reply.ok and reply.checks[0].passed and reply.checks[0].output == "loss"


def _saved(tmp_path: Path, value) -> str:
    path = tmp_path / "loss.npy"
    np.save(path, np.asarray(value))
    return str(path)
