"""`kernelwright export RUN --torch`: the generated module is valid Python, checks tensors against the task,
resolves the same launch plan as the sandbox at every size, and its kernel source compiles with NVRTC."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agent.report.export_torch import python_expr, render  # noqa: E402
from sandbox.candidates.candidate import load_candidate  # noqa: E402
from sandbox.candidates.compiler import DEFAULT_ARCH, nvrtc_compile, compile_source, include_dirs  # noqa: E402
from sandbox.candidates.plan import resolve  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "fixtures" / "kernelbench"
pytestmark = pytest.mark.timeout(300)


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module   # as `import` leaves it: torch.compile looks the module up by name
    spec.loader.exec_module(module)
    return module


def _export(task, cand, tmp_path, name="mykernel"):
    path = tmp_path / f"{name}.py"
    path.write_text(render(task, cand, "a test", "claim text", name))
    return _load(path)


@pytest.fixture(scope="module")
def gemm(kernelbench_task):
    return load_task(kernelbench_task("5_gemm_bias_gelu_scale"))


def _meta(task, sizes):
    return [torch.empty(task.shape(t, sizes), dtype=getattr(torch, t.dtype), device="meta") for t in task.spec.inputs]


@pytest.mark.parametrize("name", ["softmax", "bias_gelu_residual", "prefix_sum", "layernorm"])
def test_the_exported_plan_is_the_sandbox_plan_at_every_size(name, tmp_path):
    task = load_task(name)
    cand = load_candidate(task.baseline_path)
    if cand.knobs:
        first = next(iter(cand.knobs))
        cand = cand.with_knobs({first: cand.knobs[first][-1]})
    mod = _export(task, cand, tmp_path)
    info, _ = compile_source(cand)
    assert info.ok, info.log
    for _, sizes in task.spec.all_sizes():
        bound = mod.sizes_of(_meta(task, sizes))
        assert bound == sizes
        launches, scratch = mod.plan(bound)
        expected = resolve(task, cand, info, sizes)
        assert [(s["name"], s["dtype"], s["count"], s["init"]) for s in expected["scratch"]] == scratch
        for got, want in zip(launches, expected["launches"]):
            kernel, grid, block, shared, args = got
            assert (list(grid), list(block), shared) == (want["grid"], want["block"], want["shared"])
            assert [list(a) for a in args] == [list(a) for a in want["args"]]


def test_the_exported_source_compiles_with_nvrtc_with_the_runs_flags_and_knobs(tmp_path):
    task = load_task("softmax")
    cand = load_candidate(task.baseline_path).with_flags(["--extra-device-vectorization"])
    mod = _export(task, cand, tmp_path)
    assert "--extra-device-vectorization" in mod.OPTIONS and any(o.startswith("-D") for o in mod.OPTIONS)
    options = [f"-arch={DEFAULT_ARCH}", *mod.OPTIONS, *[f"-I{d}" for d in include_dirs()]]
    info, cubin = nvrtc_compile(mod.SOURCE, options, DEFAULT_ARCH, mod.KERNELS)
    assert info.ok and cubin, info.log
    assert set(info.lowered_names) == set(mod.KERNELS)


def test_shapes_and_dtypes_are_checked_against_the_task(gemm, tmp_path):
    mod = _export(gemm, load_candidate(KB / "answers" / "5_gemm_bias_gelu_scale.cu"), tmp_path)
    sizes = gemm.spec.sizes.benchmark
    good = _meta(gemm, sizes)
    assert mod.sizes_of(good) == sizes
    wrong_dim = list(good)
    wrong_dim[2] = torch.empty(sizes["out_features"] + 1, sizes["in_features"], device="meta")
    with pytest.raises(ValueError, match="linear_weight: dimension out_features is 769 here and 768 elsewhere"):
        mod.sizes_of(wrong_dim)
    with pytest.raises(ValueError, match="x: expected dtype float32"):
        mod.sizes_of([good[0].half(), *good[1:]])
    with pytest.raises(ValueError, match="x: expected 2 dimensions"):
        mod.sizes_of([good[0].reshape(-1), *good[1:]])
    with pytest.raises(ValueError, match="expected a contiguous CUDA tensor"):
        getattr(mod, mod.FUNCTION)(
            *[torch.zeros(t.shape) for t in good])


def _problem(task):
    problem = {}
    exec(compile((task.folder / "problem.py").read_text(), "problem.py", "exec"), problem)
    return problem


def test_the_export_of_an_imported_task_replaces_forward_by_parameter_name(gemm, tmp_path):
    mod = _export(gemm, load_candidate(KB / "answers" / "5_gemm_bias_gelu_scale.cu"), tmp_path)
    problem = _problem(gemm)
    model = problem["Model"](*problem["get_init_inputs"]())
    assert mod.PARAMETERS == {"bias": "bias", "linear_weight": "linear.weight", "linear_bias": "linear.bias"}
    assert "mykernel.replace(model)" in mod.__doc__ and "fullgraph=True" in mod.__doc__
    with pytest.raises(ValueError, match="x: expected a contiguous CUDA tensor"):
        mod.forward(model, torch.zeros(4, problem["in_features"]))
    assert mod.replace(model) is model and model.forward.__func__ is mod.forward
    other = problem["Model"](*problem["get_init_inputs"]())
    assert other.forward.__func__ is not mod.forward   # only the instance given is changed
    with pytest.raises(ValueError, match="ReLU has no tensor bias, linear.weight, linear.bias"):
        mod.replace(torch.nn.ReLU())


def test_the_export_registers_a_custom_op_whose_fake_gives_the_tasks_shapes(gemm, tmp_path):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mod = _export(gemm, load_candidate(KB / "answers" / "5_gemm_bias_gelu_scale.cu"), tmp_path)
    namespace, name = mod.OP_NAME.split("::")
    assert namespace == "kernelwright" and getattr(torch.ops.kernelwright, name) is mod.OP
    assert str(mod.OP.default._schema).endswith("(Tensor t0, Tensor t1, Tensor t2, Tensor t3, int[] given) -> Tensor")
    again = _export(gemm, load_candidate(KB / "answers" / "5_gemm_bias_gelu_scale.cu"), tmp_path, "again")
    assert again.OP is mod.OP   # one build, one operator, however often it is imported
    sizes = {"batch_size": 37, "in_features": 64, "out_features": 48}
    with FakeTensorMode():
        ins = [torch.empty(gemm.shape(t, sizes), dtype=torch.float32, device="cuda") for t in gemm.spec.inputs]
        out = getattr(mod, mod.FUNCTION)(*ins)
        assert (tuple(out.shape), out.dtype, out.device.type) == ((37, 48), torch.float32, "cuda")
        with pytest.raises(ValueError, match="linear_weight: dimension out_features is 49 here and 48 elsewhere"):
            wrong = [torch.empty(49, 64, device="cuda") if t.name == "linear_weight" else i
                     for t, i in zip(gemm.spec.inputs, ins)]
            mod.OP(*wrong, [-1, -1, -1])
    meta = mod.OP(*_meta(gemm, sizes), [-1, -1, -1])
    assert (tuple(meta.shape), meta.device.type) == ((37, 48), "meta")


def test_torch_compile_traces_a_model_using_the_export_without_a_graph_break(gemm, tmp_path):
    mod = _export(gemm, load_candidate(KB / "answers" / "5_gemm_bias_gelu_scale.cu"), tmp_path, "gemm_kernel")
    problem = _problem(gemm)
    with torch.device("meta"):
        model = mod.replace(problem["Model"](*problem["get_init_inputs"]()))
    x = torch.empty(16, problem["in_features"], device="meta")
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")   # fullgraph: a graph break is an error
    dynamic = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    with torch.no_grad():   # forward only: the operator has no autograd formula
        assert tuple(compiled(x).shape) == (16, problem["out_features"])
        for rows in (33, 7):
            assert tuple(dynamic(x.new_empty(rows, x.shape[1])).shape) == (rows, problem["out_features"])

    def block(x, *weights):
        return torch.relu(getattr(mod, mod.FUNCTION)(x * 2, *weights)) + 1

    weights = [{"bias": model.bias, "linear_weight": model.linear.weight, "linear_bias": model.linear.bias}[t.name]
               for t in gemm.spec.inputs[1:]]
    with torch.no_grad():
        explained = torch._dynamo.explain(block)(x, *weights)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    assert any(mod.OP_NAME.replace("::", ".") in str(node.target) for graph in explained.graphs
               for node in graph.graph.nodes)


def test_the_module_form_of_an_export_replaces_a_submodule(tmp_path):
    task = load_task("softmax")
    mod = _export(task, load_candidate(task.baseline_path), tmp_path, "softmax_kernel")   # dynamo finds modules by name
    net = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Softmax(dim=-1))
    net[1] = mod.Module()
    x = torch.empty(8, 33, device="meta")
    torch._dynamo.reset()
    assert tuple(torch.compile(net, fullgraph=True, backend="eager")(x).shape) == (8, 33)
    with pytest.raises(ValueError, match="rows_: no size symbol of softmax"):
        mod.softmax(x, rows_=3)


def test_plan_expressions_are_python_with_knobs_written_in():
    assert python_expr("ceil_div(n, BLOCK) / 2", {"BLOCK": 256}) == "ceil_div(n, 256) // 2"
    assert python_expr("BLOCK * 4", {"BLOCK": 128}) == "128 * 4"
    assert python_expr("7", {}) == 7


def _kw(*args, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=240, cwd=ROOT, env=env)


def test_cli_exports_a_runs_candidate_as_a_cu_file_and_as_a_torch_module(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text("[tune]\nmax_evaluations = 2\n")
    run = _kw("optimize", "vector_add", "--sandbox", "fake", "--config", cfg, "--traces", tmp_path / "t",
              "--run-id", "r1", "--quiet", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    out = _kw("export", "r1", "--traces", tmp_path / "t", "--candidate", "c0000", "--torch", "-o", tmp_path / "vadd.py",
              tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "SIMULATED" in out.stdout
    mod = _load(tmp_path / "vadd.py")
    assert mod.TASK == "vector_add" and callable(mod.vector_add) and callable(mod.check)
    assert mod.sizes_of([torch.empty(5, device="meta")] * 2) == {"n": 5}
    cu = _kw("export", "r1", "--traces", tmp_path / "t", "--candidate", "c0000", "-o", tmp_path / "k.cu", tmp_path=tmp_path)
    assert cu.returncode == 0 and (tmp_path / "k.cu").read_text().startswith("/*@kernelwright")
    bad = _kw("export", "r1", "--traces", tmp_path / "t", "--candidate", "c0999", "-o", tmp_path / "x.py", tmp_path=tmp_path)
    assert bad.returncode == 2 and "no candidate 'c0999'" in bad.stderr
    missing = _kw("export", "nope", "--traces", tmp_path / "t", "--torch", "-o", tmp_path / "x.py", tmp_path=tmp_path)
    assert missing.returncode == 2 and "no such run" in missing.stderr
