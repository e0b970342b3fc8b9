"""An imported task is fair to honest kernels and strong against wrong ones: parameters initialised to one value
are drawn too (a LayerNorm that hard-codes weight 1 and bias 0 fails), an output that is one value per input (a
loss) gets no wider tolerance (a hinge with margin 0.5 fails), buffers that forward updates in place (running
statistics in training mode) are the baselines' own state, and a problem whose float32 and float64 paths disagree,
or whose reference is not finite, is refused with the reason."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sandbox.judging.compare import compare  # noqa: E402
from sandbox.pytorch import confined  # noqa: E402
from sandbox.pytorch.importer import import_problem  # noqa: E402
from sandbox.pytorch.problem import ProblemError  # noqa: E402
from sandbox.pytorch.runtime import runtime_for  # noqa: E402
from sandbox.tasks.inputs import distribution_count, generate_all, input_specs  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAIR = ROOT / "tests" / "fixtures" / "kernelbench" / "fair"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def confined_session():
    with confined.Session() as session:
        yield session


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("fair")
    return {stem: load_task(import_problem(FAIR / f"{stem}.py", out).folder)
            for stem in ("100_hinge_loss", "40_layer_norm", "13_transition_layer")}


def _trials(task):
    """(sizes, inputs, reference outputs) of every check size and every distribution, as check-task draws them."""
    ref = task.reference_module()
    for sizes in task.spec.sizes.check:
        for k in range(distribution_count(task)):
            ins = generate_all(np, input_specs(task, sizes, k), 1000 + k)
            yield sizes, ins, ref.reference(np, **ins, **task.env(sizes))


def _passes_everywhere(task, impostor) -> bool:
    """``impostor(ins) -> {output: array}`` passes the task's comparison on every check and distribution."""
    for sizes, ins, expected in _trials(task):
        got = impostor(ins)
        for name, e in expected.items():
            tol = task.output_tolerance(name)
            if not compare(np, np.asarray(got[name], dtype=np.float64), e, tol.atol, tol.rtol, tol.spread)["passed"]:
                return False
    return True


def test_a_hinge_loss_is_not_constant_and_a_margin_of_one_half_fails(imported):
    task = imported["100_hinge_loss"]
    out = task.spec.outputs[0]
    assert not out.constant and task.output_tolerance(out).atol < 1e-3
    assert task.tensor("targets").distributions == ["module", "normal", "wide", "kinks"]   # drawn too

    def hinge(margin):
        return lambda ins: {"out": np.mean(np.maximum(margin - ins["predictions"].astype(np.float64)
                                                      * ins["targets"].astype(np.float64), 0.0))}
    assert _passes_everywhere(task, hinge(1.0))
    assert not _passes_everywhere(task, hinge(0.5))
    assert not _passes_everywhere(task, lambda ins: {"out": np.float64(1.0)})


def test_a_layer_norm_draws_its_weight_and_bias_and_one_that_hard_codes_them_fails(imported):
    task = imported["40_layer_norm"]
    weight, bias = task.tensor("ln_weight"), task.tensor("ln_bias")
    assert weight.distributions[0] == "module" and weight.distributions[1].kind == "uniform"
    assert (weight.distributions[1].low, weight.distributions[1].high) == (0.5, 1.5)
    assert bias.distributions[1].kind == "normal" and "are also drawn" in task.spec.description

    def layer_norm(affine):
        def run(ins):
            x = ins["x"].astype(np.float64)
            axes = tuple(range(1, x.ndim))
            y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
            return {"out": y * ins["ln_weight"] + ins["ln_bias"] if affine else y}
        return run
    assert _passes_everywhere(task, layer_norm(True))
    assert not _passes_everywhere(task, layer_norm(False))


def _digest(arrays: dict) -> dict:
    return {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() for k, v in arrays.items()}


def test_running_statistics_are_the_baselines_own_state_never_the_candidates_inputs(imported):
    task = imported["13_transition_layer"]
    spec = task.spec.torch
    assert spec.mutated == ["transition_0_running_mean", "transition_0_running_var",
                            "transition_0_num_batches_tracked"] and spec.updated == {}
    assert "a kernel need not update them" in task.spec.description
    sizes = task.spec.sizes.check[-1]
    ins = generate_all(np, input_specs(task, sizes, 0), 7)
    before = _digest(ins)
    rt = runtime_for(task.folder)
    eager = rt.baseline("eager", sizes, device="cpu")
    first = eager(np, **ins, **task.env(sizes))["out"]
    second = eager(np, **ins, **task.env(sizes))["out"]
    expected = task.reference_module().reference(np, **ins, **task.env(sizes))["out"]
    assert _digest(ins) == before   # neither the baseline nor the reference wrote into the inputs
    tol = task.output_tolerance("out")
    assert np.array_equal(first, second) and compare(np, first, expected, tol.atol, tol.rtol, tol.spread)["passed"]


def test_a_task_may_require_the_update_and_then_checks_it_like_an_output(imported, tmp_path):
    import shutil

    folder = tmp_path / "13_transition_layer"
    shutil.copytree(imported["13_transition_layer"].folder, folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    data = tomllib.loads(text)
    mean = next(t for t in data["inputs"] if t["name"] == "transition_0_running_mean")
    text = text.replace("\n[tolerance]", '\n[[outputs]]\nname = "running_mean_after"\ndtype = "float32"\n'
                        f'shape = {mean["shape"]!r}\ntolerance = {{ atol = 1e-5, rtol = 1e-4 }}\n\n[tolerance]'.replace("'", '"'))
    text = text.replace("mutated = [", 'updated = { transition_0_running_mean = "running_mean_after" }\nmutated = [')
    toml.write_text(text)
    task = load_task(folder)
    sizes = task.spec.sizes.check[-1]
    ins = generate_all(np, input_specs(task, sizes, 0), 7)
    outs = task.reference_module().reference(np, **ins, **task.env(sizes))
    x = ins["x"].astype(np.float64)
    batch_mean = x.mean(axis=(0, 2, 3))
    assert np.allclose(outs["running_mean_after"], 0.9 * ins["transition_0_running_mean"] + 0.1 * batch_mean)
    eager = runtime_for(task.folder).baseline("eager", sizes, device="cpu")
    got = eager(np, **ins, **task.env(sizes))["running_mean_after"]
    assert np.allclose(got, outs["running_mean_after"], atol=1e-5)


@pytest.mark.parametrize("stem, needle", [
    ("f64_paths_disagree", "the float32 and float64 paths disagree"),
    ("nan_reference", "the reference is NaN or infinite on the problem's own inputs"),
])
def test_a_problem_whose_float_paths_disagree_or_whose_reference_is_not_finite_is_refused(tmp_path, stem, needle):
    out = tmp_path / "out"
    with pytest.raises(ProblemError, match=needle):
        import_problem(FAIR / f"{stem}.py", out)
    assert not out.exists() or list(out.iterdir()) == []


def test_only_an_impostor_that_writes_one_value_is_a_right_answer_of_a_constant_output():
    """A constant output with a tolerance far too loose (the import refuses such a task now; a hand-written one
    may still have it): an input copied passes it, and check strength says so instead of "right"."""
    from types import SimpleNamespace

    from sandbox.tasks.strength import Case, measure
    from sandbox.tasks.task_spec import Tolerance

    out = SimpleNamespace(name="out", dtype="float32", constant=True)
    x = SimpleNamespace(name="x", dtype="float32")
    task = SimpleNamespace(spec=SimpleNamespace(outputs=[out], inputs=[x]),
                           output_tolerance=lambda o: Tolerance(atol=759.0, rtol=1e-4))
    rng = np.random.default_rng(0)
    cases = [Case(f"check[{i}]", {"x": rng.normal(size=64).astype(np.float32)}, {"out": np.zeros(64)})
             for i in range(3)]
    verdicts = {r.impostor: r.verdict for r in measure(task, cases).results}
    assert verdicts["zeros"] == verdicts["constant"] == "right_answer"
    assert verdicts["identity:x"] == "passes" and verdicts["noise x10"] == "rejected"


def test_a_constant_outputs_right_answers_are_its_value_only():
    """Marked constant with a loose tolerance: zeros passing a reference of 5.0 everywhere is no right answer."""
    from types import SimpleNamespace

    from sandbox.tasks.strength import Case, measure
    from sandbox.tasks.task_spec import Tolerance

    out = SimpleNamespace(name="out", dtype="float32", constant=True)
    task = SimpleNamespace(spec=SimpleNamespace(outputs=[out], inputs=[]),
                           output_tolerance=lambda o: Tolerance(atol=6.0, rtol=0.0))
    cases = [Case(f"check[{i}]", {}, {"out": np.full(8, 5.0)}) for i in range(2)]
    verdicts = {r.impostor: r.verdict for r in measure(task, cases).results}
    assert verdicts["constant"] == "right_answer" and verdicts["zeros"] == "passes"
