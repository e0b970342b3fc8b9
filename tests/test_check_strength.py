"""Checks that catch wrong kernels: tolerances that cannot accept a wrong answer, impostor outputs (zeros, a
constant, an input passed through, noise, one operation skipped) rejected by every task's own comparison, and
inputs beyond a problem's own get_inputs()."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

from sandbox.host.check_task import check_task
from sandbox.pytorch import confined
from sandbox.tasks.task import TaskError, load_task, suite_dir

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "tests" / "fixtures" / "kernelbench" / "checks"
EXAMPLES = ROOT / "examples" / "tasks"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def confined_session():
    """One confined process for the module's imports and check-task runs: torch is imported once, not per call."""
    with confined.Session() as session:
        yield session


def _verdicts(report) -> dict[tuple[str, str], str]:
    return {(r.impostor, r.output): r.verdict for r in report.strength}


@pytest.mark.parametrize("folder", sorted(p.parent for p in suite_dir().glob("*/task.toml"))
                         + sorted(p.parent for p in EXAMPLES.glob("*/task.toml")), ids=lambda p: p.name)
def test_every_suite_task_rejects_zeros_a_constant_and_each_input_passed_through(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    report = check_task(folder)
    assert report.ok, [f for f in report.findings if f.status == "failed"]
    verdicts = _verdicts(report)
    for out in load_task(folder).spec.outputs:
        assert verdicts[("zeros", out.name)] == "rejected"
        assert verdicts[("constant", out.name)] == "rejected"
        assert verdicts[(f"noise x10", out.name)] == "rejected"
        for (impostor, output), verdict in verdicts.items():
            if output == out.name and impostor.startswith("identity:"):
                assert verdict == "rejected", impostor
    assert not any(v == "passes" for v in verdicts.values())


def test_check_task_json_carries_the_check_strength(tmp_path):
    from typer.testing import CliRunner

    from agent.cli import app

    result = CliRunner().invoke(app, ["check-task", str(EXAMPLES / "argmax"), "--json"],
                                env={"KERNELWRIGHT_CACHE_DIR": str(tmp_path)})
    import json

    data = json.loads(result.stdout)
    assert {"impostor": "zeros", "output": "idx", "verdict": "rejected"}.items() <= data["strength"][0].items()
    assert any(f["check"] == "check strength" for f in data["findings"])


def _loose_copy(tmp_path: Path, atol: float) -> Path:
    folder = tmp_path / "softmax"
    shutil.copytree(suite_dir() / "softmax", folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    toml.write_text(re.sub(r"(?m)^float32 = \{ *atol = [^,]+,", f"float32 = {{ atol = {atol!r},", text))
    assert tomllib.loads(toml.read_text())["tolerance"]["float32"]["atol"] == atol
    return folder


def test_a_tolerance_that_lets_zeros_through_fails_check_task_naming_the_impostor(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    report = check_task(_loose_copy(tmp_path, 10.0))
    assert not report.ok
    strength = next(f for f in report.findings if f.check == "check strength")
    assert strength.status == "failed" and strength.detail.startswith("PASSES: zeros (y), constant (y)")
    assert _verdicts(report)[("zeros", "y")] == "passes"


torch = pytest.importorskip("torch")
from sandbox.pytorch.importer import import_problem  # noqa: E402


def _vet(folder: Path) -> None:
    report = check_task(folder)
    failed = [f for f in report.findings if f.status == "failed"]
    if failed:
        raise TaskError(f"refused: {failed[0].check}: {failed[0].detail}")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("checks")
    return {p.stem: import_problem(p, out, vet=_vet) for p in sorted(CHECKS.glob("*.py"))}


@pytest.mark.parametrize("stem", ["7_relu_rand", "8_hardtanh_rand"])
def test_the_identity_is_rejected_on_relu_like_problems_whose_own_inputs_are_never_negative(imported, stem):
    task = load_task(imported[stem].folder)
    assert task.spec.inputs[0].distributions == ["module", "normal", "wide", "kinks"]
    verdicts = _verdicts(check_task(task.folder))
    assert verdicts[("identity:x", "out")] == "rejected"
    assert verdicts[("zeros", "out")] == verdicts[("constant", "out")] == "rejected"
    assert any(k[0].startswith("skip-op:") and v == "rejected" for k, v in verdicts.items())


def test_a_task_kept_to_the_problems_own_inputs_where_the_identity_is_right_is_refused(imported, tmp_path):
    folder = tmp_path / "7_relu_rand"
    shutil.copytree(imported["7_relu_rand"].folder, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('distributions = ["module", "normal", "wide", "kinks"]',
                                             'distributions = ["module"]'))
    report = check_task(folder)
    assert not report.ok and _verdicts(report)[("identity:x", "out")] == "passes"
    with pytest.raises(TaskError, match=r"refused: check strength: PASSES: identity:x \(out\)"):
        _vet(folder)


def test_an_output_flat_at_small_sizes_gets_a_tolerance_below_a_hundredth_of_its_spread(imported):
    """level2/27's shape: a group norm over one feature is flat; the tolerance must not divide by that."""
    done = imported["9_linear_groupnorm_mean"]
    task = load_task(done.folder)
    atol, rtol, spread = done.summary.tolerance["out0"]
    assert task.output_tolerance("out").atol == atol and rtol == 1e-4
    assert task.output_tolerance("out").spread == spread == 2e-4   # grown with the spread, never past a hundredth
    ref = task.reference_module()
    from sandbox.tasks.inputs import generate_all, input_specs

    for _, sizes in task.spec.all_sizes():
        ins = generate_all(np, input_specs(task, sizes, 0), 11)
        out = ref.reference(np, **ins, **sizes)["out"]
        if out.size > 1 and out.std() > 1e-6:
            assert atol <= 1e-2 * out.std(), (sizes, atol, out.std())
    report = check_task(task.folder)
    assert report.ok and _verdicts(report)[("zeros", "out")] == "rejected"


def test_an_output_zero_at_every_size_is_marked_constant_and_zeros_are_its_right_answer(imported):
    task = load_task(imported["10_gemm_max_subtract"].folder)
    out = task.spec.outputs[0]
    assert out.constant and "is 0 at every size and input" in task.spec.description
    report = check_task(task.folder)
    verdicts = _verdicts(report)
    assert verdicts[("zeros", "out")] == "right_answer" and verdicts[("noise x10", "out")] == "rejected"
    finding = next(f for f in report.findings if f.check == "check strength")
    assert finding.status == "note" and "right answers: zeros (out)" in finding.detail


def test_variants_outside_the_problems_domain_are_left_out_and_the_task_says_why(imported):
    task = load_task(imported["11_log_positive"].folder)
    assert task.spec.inputs[0].distributions == ["module"]
    text = (task.folder / "task.toml").read_text()
    assert "input variant 'normal' left out: outside the problem's domain" in text
    assert _verdicts(check_task(task.folder))[("identity:x", "out")] == "rejected"


def test_a_bfloat16_problem_imports_with_bit_pattern_inputs_and_its_module_passes_its_own_task(imported):
    from sandbox.tasks.inputs import generate_all, input_specs

    task = load_task(imported["12_gelu_bf16"].folder)
    assert [t.dtype for t in task.spec.inputs + task.spec.outputs] == ["bfloat16", "bfloat16"]
    sizes = task.spec.sizes.check[-1]
    ins = generate_all(np, input_specs(task, sizes, 0), 3)
    assert ins["x"].dtype == np.uint16          # the bits a __nv_bfloat16 buffer holds
    report = check_task(task.folder)
    assert report.ok and next(f for f in report.findings if f.check == "float32 module").status == "ok"
    assert _verdicts(report)[("identity:x", "out")] == "rejected"
