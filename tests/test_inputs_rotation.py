"""Which inputs the evaluator draws: every listed distribution of every input at every size, named
distributions with their own parameters, and what a malformed one is told."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from sandbox.host.gpu import trial_count
from sandbox.tasks.inputs import distribution_count, drawn_parameters, generate, input_specs
from sandbox.tasks.task import TaskError, load_task, suite_dir, suite_names


@pytest.mark.parametrize("name", suite_names())
def test_the_trials_of_one_size_draw_every_listed_distribution_of_every_input(name):
    task = load_task(name)
    sizes = task.spec.sizes.check[0]
    for label in ("check[0]", "benchmark"):
        trials = [input_specs(task, sizes, t) for t in range(trial_count(task, label, 2))]
        for i, t in enumerate(task.spec.inputs):
            listed = {d if isinstance(d, str) else d.name for d in t.distributions} or {s[i]["dist"] for s in trials}
            assert {s[i]["dist"] for s in trials} == listed, (label, t.name)


def test_trial_counts_cover_the_longest_list_and_keep_the_configured_minimum():
    softmax, vector_add, histogram = (load_task(n) for n in ("softmax", "vector_add", "histogram"))
    assert distribution_count(softmax) == 4 and trial_count(softmax, "benchmark", 2) == 4
    assert trial_count(softmax, "check[1]", 2) == 4 and trial_count(softmax, "check[1]", 5) == 5
    assert trial_count(vector_add, "size", 2) == 2 and trial_count(histogram, "benchmark", 2) == 1


def test_a_named_distribution_draws_with_its_own_offset_and_scale():
    task = load_task("softmax")
    large = input_specs(task, {"rows": 64, "cols": 4096}, 2)[0]
    assert (large["dist"], large["kind"], large["offset"], large["scale"]) == ("large", "normal", 100.0, 3.0)
    x = generate(np, large, 7)
    factor = drawn_parameters(large, 7)["factor"]   # one factor on both, drawn per draw
    assert 1.0 <= factor <= 1.25 and factor != drawn_parameters(large, 8)["factor"]
    assert x.dtype == np.float32 and abs(float(x.mean()) / factor - 100.0) < 0.1
    assert abs(float(x.std()) / factor - 3.0) < 0.1
    assert float(x.max()) > 88.8, "float32 exp() must overflow without the max subtraction"
    plain = input_specs(task, {"rows": 64, "cols": 4096}, 0)[0]
    assert plain["offset"] == 0.0 and abs(float(generate(np, plain, 7).mean())) < 0.1


@pytest.mark.parametrize("entry, message", [
    ('{ name = "normal", kind = "normal" }', "is a built-in distribution"),
    ('{ name = "wide", kind = "cauchy" }', "kind"),
    ('{ name = "wide", kind = "normal", scale = -1.0 }', "scale"),
    ('{ name = "wide", kind = "normal", spread = 1.0 }', "spread: unknown key"),
    ('"normal"', "listed twice"),
])
def test_a_malformed_named_distribution_is_named_in_the_error(tmp_path, entry, message):
    folder = tmp_path / "vector_add"
    shutil.copytree(Path(suite_dir()) / "vector_add", folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    old = 'distributions = ["normal", "uniform"]'
    assert old in text
    toml.write_text(text.replace(old, f'distributions = ["normal", "uniform", {entry}]', 1))
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert "inputs.0" in str(info.value) and message in str(info.value), str(info.value)


def _float32_cheats(task_name: str, x, params: dict):
    """NumPy float32 versions of the kernels in tests/cheats/ whose bug only a stressing distribution shows."""
    f32 = np.float32
    if task_name == "softmax":  # softmax_no_max.cu
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            return {"y": (e * (f32(1) / e.sum(axis=1, keepdims=True, dtype=f32))).astype(f32)}
    if task_name == "layernorm":  # layernorm_one_pass.cu
        mean = x.mean(axis=1, keepdims=True, dtype=f32)
        var = np.maximum((x * x).mean(axis=1, keepdims=True, dtype=f32) - mean * mean, f32(0))
        y = (x - mean) * (f32(1) / np.sqrt(var + f32(params["eps"]))) * params["gamma"] + params["beta"]
        return {"y": y.astype(f32)}
    ms = (x * x).mean(axis=1, keepdims=True, dtype=f32)  # rmsnorm_eps_outside.cu
    return {"y": (x * (f32(1) / (np.sqrt(ms) + f32(params["eps"]))) * params["weight"]).astype(f32)}


@pytest.mark.parametrize("task_name, stressing", [("softmax", ("large", "rows")), ("layernorm", ("large", "rows")),
                                                   ("rmsnorm", ("small",))])
def test_only_the_stressing_distribution_exposes_the_bug_it_was_added_for(task_name, stressing):
    from sandbox.judging.compare import compare
    from sandbox.worker.harness import reference_inputs

    task = load_task(task_name)
    sizes = {"rows": 64, "cols": 4099}
    scalars = {s.name: s.value for s in task.spec.scalars}
    tol = task.tolerance("float32")
    failed = {}
    for trial in range(distribution_count(task)):
        specs = input_specs(task, sizes, trial)
        ins = reference_inputs(np, specs, 11 + trial)
        ref = task.reference_module().reference(np, **ins, **sizes, **scalars)["y"]
        got = _float32_cheats(task_name, ins["x"], {**ins, **scalars})["y"]
        failed[specs[0]["dist"]] = not compare(np, got, ref, tol.atol, tol.rtol)["passed"]
    assert failed == {d: d in stressing for d in failed}, failed
