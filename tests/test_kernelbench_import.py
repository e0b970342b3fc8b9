"""`kernelwright import`: KernelBench-format PyTorch problems become task folders whose sizes, shapes,
tolerance and reference come from running the problem; what cannot be imported is one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sandbox.judging.compare import compare  # noqa: E402
from sandbox.pytorch import confined  # noqa: E402
from sandbox.pytorch.importer import import_problem  # noqa: E402
from sandbox.pytorch.problem import ProblemError, run_forward  # noqa: E402
from sandbox.pytorch.runtime import runtime_for  # noqa: E402
from sandbox.tasks.inputs import generate_all as reference_inputs  # noqa: E402
from sandbox.tasks.inputs import input_specs  # noqa: E402
from sandbox.tasks.task import TaskError, load_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "tests" / "fixtures" / "kernelbench"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def confined_session():
    """One confined process for the module's imports and check-task runs: torch is imported once, not per call."""
    with confined.Session() as session:
        yield session


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported")
    return {p.stem: import_problem(p, out) for p in sorted(PROBLEMS.glob("*.py"))}


def _float32_forward(task, sizes, ins):
    rt = runtime_for(task.folder)
    model, _ = rt._model(sizes, "cpu")
    params, args = rt._call_args(np, ins, rt._state(model), False)
    return run_forward(model, args, params)


def test_every_kind_of_problem_imports_with_its_sizes_as_symbols(imported):
    expect = {"1_swish_clamp": ("elementwise", ["rows", "cols"]),
              "2_mean_over_dim": ("reduction", ["batch", "rows", "cols"]),
              "3_matmul": ("compute", ["M", "K", "N"]),
              "4_conv2d": ("compute", ["batch_size", "in_channels", "out_channels", "height", "width"]),
              "5_gemm_bias_gelu_scale": ("fusion", ["batch_size", "in_features", "out_features"]),
              "6_mse_loss": ("reduction", ["batch_size", "features"])}
    for stem, (category, symbols) in expect.items():
        task = load_task(imported[stem].folder)
        assert task.spec.category == category and task.symbols == symbols
        assert not task.has_baseline and task.baselines == ["eager", "compile"]
        assert sorted(p.name for p in task.folder.iterdir()) == ["problem.py", "reference.py", "task.toml"]
        assert (task.folder / "problem.py").read_text() == (PROBLEMS / f"{stem}.py").read_text()
        forward = set(task.spec.torch.arguments)
        for t in task.spec.inputs:   # parameters from the module; forward arguments also from the variants
            assert t.distributions[0] == "module"
            assert set(t.distributions[1:]) <= {"normal", "wide", "kinks"} and (t.name in forward or len(t.distributions) == 1)


def test_shapes_are_expressions_of_the_symbols_and_fixed_constants_say_why(imported):
    conv = load_task(imported["4_conv2d"].folder)
    assert conv.tensor("out").shape == ["batch_size", "out_channels", "height - 2", "width - 2"]
    assert conv.tensor("conv_weight").shape == ["out_channels", "in_channels", 3, 3]
    assert conv.spec.torch.parameters == {"conv_weight": "conv.weight", "conv_bias": "conv.bias"}
    assert "kernel_size" in conv.spec.torch.fixed and "kernel_size = 3" in conv.spec.description
    assert conv.spec.roofline.flops == "18 * batch_size * out_channels * (height - 2) * (width - 2) * in_channels"
    mean = load_task(imported["2_mean_over_dim"].folder)
    assert mean.tensor("out").shape == ["batch", 1, "cols"]
    assert "axis" in mean.spec.torch.fixed["reduce_dim"]
    assert load_task(imported["3_matmul"].folder).spec.roofline.flops == "2 * M * N * K"
    loss = load_task(imported["6_mse_loss"].folder)
    assert loss.tensor("out").shape == [] and loss.spec.torch.arguments == ["predictions", "targets"]


def test_check_sizes_are_tiny_and_odd_and_heldout_sizes_are_near_the_benchmark(imported):
    conv = load_task(imported["4_conv2d"].folder).spec.sizes
    assert conv.check[0] == {"batch_size": 1, "in_channels": 1, "out_channels": 1, "height": 3, "width": 3}
    assert all(v % 2 == 1 for v in conv.check[1].values())
    mm = load_task(imported["3_matmul"].folder).spec.sizes
    assert mm.benchmark == {"M": 1024, "K": 2048, "N": 1536}
    assert mm.check[0] == {"M": 1, "K": 1, "N": 1} and mm.check[-1] == {"M": 257, "K": 257, "N": 257}
    assert {"M": 1023, "K": 2047, "N": 1535} in mm.heldout


def test_the_reference_is_the_module_in_float64_and_the_float32_module_passes_it(imported):
    for stem, done in imported.items():
        task = load_task(done.folder)
        assert task.spec.torch.reference_dtype == "float64"
        ref_module = task.reference_module()
        for _, sizes in task.spec.all_sizes()[1:]:
            if max(np.prod(task.shape(t, sizes)) for t in task.spec.inputs) > 1 << 22:
                continue  # held-out sizes: too large for a CPU test
            ins = reference_inputs(np, input_specs(task, sizes, 0), 7)
            expected = ref_module.reference(np, **ins, **sizes)
            got = _float32_forward(task, sizes, ins)
            for out, o in zip(task.spec.outputs, got):
                assert expected[out.name].dtype == np.float64
                tol = task.output_tolerance(out)
                found = compare(np, o.numpy().reshape(expected[out.name].shape), expected[out.name], tol.atol, tol.rtol)
                assert found["passed"], (stem, sizes, found)


def test_an_imported_task_passes_check_task_with_its_answer_compiled(imported):
    from sandbox.host.check_task import check_task

    done = check_task(imported["5_gemm_bias_gelu_scale"].folder,
                      candidates=[PROBLEMS / "answers" / "5_gemm_bias_gelu_scale.cu"])
    assert done.ok, [f for f in done.findings if f.status == "failed"]
    assert any(f.check.startswith("reference") and f.status == "ok" for f in done.findings)
    assert any(f.check.startswith("candidate") and f.status == "ok" for f in done.findings)


def test_the_eager_baseline_takes_the_sandboxs_arrays_and_passes_the_reference(imported):
    task = load_task(imported["4_conv2d"].folder)
    sizes = task.spec.sizes.check[-1]
    ins = reference_inputs(np, input_specs(task, sizes, 0), 9)
    produced = runtime_for(task.folder).baseline("eager", sizes, device="cpu")(np, **ins, **sizes)
    expected = task.reference_module().reference(np, **ins, **sizes)["out"]
    tol = task.output_tolerance(task.spec.outputs[0])
    assert produced["out"].dtype == np.float32 and produced["out"].shape == expected.shape
    assert compare(np, produced["out"], expected, tol.atol, tol.rtol)["passed"]


@pytest.mark.timeout(300)
def test_the_compile_baseline_runs_the_module_through_torch_compile(imported):
    """torch.compile (dynamo) imports the module a function was defined in: the problem's must be importable."""
    task = load_task(imported["1_swish_clamp"].folder)
    sizes = task.spec.sizes.check[-1]
    ins = reference_inputs(np, input_specs(task, sizes, 0), 5)
    runtime = runtime_for(task.folder)
    eager = runtime.baseline("eager", sizes, device="cpu")(np, **ins, **sizes)["out"]
    compiled = runtime.baseline("compile", sizes, device="cpu")(np, **ins, **sizes)["out"]
    tol = task.output_tolerance(task.spec.outputs[0])
    assert compiled.shape == eager.shape and compare(np, compiled, eager, tol.atol, tol.rtol)["passed"]


def test_a_precision_downgrade_fails_the_tolerance(imported):
    task = load_task(imported["3_matmul"].folder)
    sizes = task.spec.sizes.check[-1]
    ins = reference_inputs(np, input_specs(task, sizes, 0), 3)
    expected = task.reference_module().reference(np, **ins, **sizes)["out"]
    half = (torch.from_numpy(ins["A"]).half().float() @ torch.from_numpy(ins["B"]).half().float()).numpy()
    tol = task.output_tolerance(task.spec.outputs[0])
    assert not compare(np, half, expected, tol.atol, tol.rtol)["passed"]


def test_inputs_and_parameters_come_from_the_problem_and_follow_the_seed(imported):
    task = load_task(imported["5_gemm_bias_gelu_scale"].folder)
    sizes = task.spec.sizes.check[1]
    specs = input_specs(task, sizes, 0)
    a, b, c = (reference_inputs(np, specs, s) for s in (11, 11, 12))
    assert set(a) == {"x", "bias", "linear_weight", "linear_bias"}
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["x"], c["x"])
    bound = 1 / np.sqrt(sizes["in_features"])  # nn.Linear's own initialisation
    assert np.abs(a["linear_weight"]).max() <= bound and a["linear_weight"].shape == (5, 5)


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(body)
    return path


def _problem(init: str, forward: str, init_inputs: str = "[]", base: str = "nn.Module") -> str:
    """A problem file: ``Model`` with the given __init__ body and forward expression, over ``x`` of n elements."""
    return (f"import torch\nimport torch.nn as nn\n\nclass Model({base}):\n    def __init__(self, *args):\n"
            f"        super().__init__()\n{init}\n    def forward(self, x):\n        return {forward}\n\nn = 64\n\n"
            f"def get_inputs():\n    return [torch.randn(n)]\n\ndef get_init_inputs():\n    return {init_inputs}\n")


@pytest.mark.parametrize("body, needle", [
    ("def get_inputs(:\n", "cannot parse"),
    ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "no get_inputs, get_init_inputs defined"),
    (_problem("        pass", "x.bool()"), "dtype bool is not supported"),
    (_problem("        self.w = args[0]", "x * self.w", "[torch.ones(n)]"), "get_init_inputs() item 0 is a tensor"),
    (_problem("        self.drop = nn.Dropout(0.5)", "self.drop(x)"), "forward is not deterministic"),
    (_problem("        pass", "x.to(torch.complex64)"), "dtype complex64 is not supported"),
    (_problem("        pass", "x[x > 0]"), "cannot run it on PyTorch's meta device"),
    (_problem("        pass", "x", base="object"), "Model is not a subclass of torch.nn.Module"),
])
def test_what_cannot_be_imported_is_one_error_naming_the_construct_and_leaves_nothing(tmp_path, body, needle):
    out = tmp_path / "out"
    with pytest.raises(ProblemError) as err:
        import_problem(_write(tmp_path, "bad.py", body), out)
    assert needle in str(err.value) and "bad.py" in str(err.value)
    assert isinstance(err.value, TaskError)
    assert not out.exists() or list(out.iterdir()) == []


def test_constants_that_must_stay_equal_vary_together_and_literal_arithmetic_is_a_constant(tmp_path):
    body = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, w):\n"
            "        return x * w\n\nn = 32 * 4\nm = 128\n\ndef get_inputs():\n"
            "    return [torch.randn(n, m), torch.randn(n)]\n\ndef get_init_inputs():\n    return []\n")
    task = load_task(import_problem(_write(tmp_path, "tied.py", body), tmp_path / "out").folder)
    assert task.symbols == ["n"] and task.spec.torch.tied == {"n": ["m"]}
    assert task.tensor("x").shape == ["n", "n"] and task.tensor("out").shape == ["n", "n"]
    assert "m always equals n" in task.spec.description
    sizes = task.spec.sizes.check[-1]
    ins = reference_inputs(np, input_specs(task, sizes, 0), 5)
    assert ins["x"].shape == (sizes["n"], sizes["n"])
    expected = task.reference_module().reference(np, **ins, **sizes)["out"]
    assert np.allclose(expected, ins["x"] * ins["w"])


def test_an_existing_task_is_kept_unless_replaced(tmp_path):
    out = tmp_path / "out"
    first = import_problem(PROBLEMS / "1_swish_clamp.py", out)
    with pytest.raises(ProblemError, match="already exists"):
        import_problem(PROBLEMS / "1_swish_clamp.py", out)
    again = import_problem(PROBLEMS / "1_swish_clamp.py", out, name=first.folder.name, replace=True)
    assert sorted(p.name for p in out.iterdir()) == ["1_swish_clamp"] and again.folder == first.folder


def test_a_module_input_without_a_torch_table_is_a_task_error(tmp_path, imported):
    folder = tmp_path / "broken"
    folder.mkdir()
    text = (imported["1_swish_clamp"].folder / "task.toml").read_text()
    (folder / "task.toml").write_text(text.split("\n[torch]")[0].replace('name = "1_swish_clamp"', 'name = "broken"'))
    (folder / "reference.py").write_text("def reference(xp, **kw):\n    return {}\n")
    (folder / "baseline.cu").write_text("")
    with pytest.raises(TaskError, match="'module' distribution, which needs a \\[torch\\] table"):
        load_task(folder)


def _cli(*args, tmp_path):
    env = {**os.environ, "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=240, cwd=ROOT, env=env)


def test_cli_imports_a_folder_reports_each_problem_and_exits_2_when_one_fails(tmp_path):
    src = tmp_path / "level"
    src.mkdir()
    (src / "1_swish_clamp.py").write_text((PROBLEMS / "1_swish_clamp.py").read_text())
    (src / "9_bad.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    out = _cli("import", src, "-o", tmp_path / "tasks", tmp_path=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "imported 1_swish_clamp.py" in out.stdout and "check: rows=1,cols=1" in out.stdout
    assert "9_bad.py: no get_inputs, get_init_inputs defined" in out.stderr
    assert "1 of 2 problems imported, 1 refused" in out.stdout and "  refused: " in out.stdout
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["1_swish_clamp"]
    missing = _cli("import", tmp_path / "nothing.py", tmp_path=tmp_path)
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_importing_kernelwright_does_not_import_torch_and_a_missing_torch_names_the_extra():
    probe = ("import sys, agent, agent.cli, sandbox, sandbox.tasks.task, sandbox.pytorch.importer; "
             "assert 'torch' not in sys.modules, 'torch imported'; "
             "sys.modules['torch'] = None\n"
             "from sandbox.pytorch import require_torch, TorchMissing\n"
             "try:\n    require_torch()\nexcept TorchMissing as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert 'pip install "kernelwright[torch]"' in out.stdout
