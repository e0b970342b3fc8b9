"""An exported winner as a PyTorch operator on a GPU: the problem's module with its forward replaced by the kernel
gives the module's own outputs eagerly, inside ``torch.compile(model, fullgraph=True)`` (at two batch sizes) and
inside a CUDA graph's capture and replay (with new inputs copied in); each is timed beside the module."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest

from agent.report.export_torch import render
from sandbox.candidates.candidate import load_candidate
from sandbox.tasks.task import load_task

KB = Path(__file__).resolve().parent / "fixtures" / "kernelbench"
STEM = "5_gemm_bias_gelu_scale"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _ms(torch, fn, repeats=50) -> float:
    """Median milliseconds of ``fn()`` by CUDA events, after warm-up."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_the_exported_op_matches_the_module_under_torch_compile_and_in_a_cuda_graph(kernelbench_task, tmp_path):
    torch = pytest.importorskip("torch")
    task = load_task(kernelbench_task(STEM))
    path = tmp_path / "gemm_op.py"
    path.write_text(render(task, load_candidate(KB / "answers" / f"{STEM}.cu"), "a test", "", "gemm_op"))
    mod = _load(path)
    tol = task.output_tolerance("out")
    ns: dict = {}
    exec(compile((task.folder / "problem.py").read_text(), "problem.py", "exec"), ns)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.device("cuda"):
        torch.manual_seed(0)
        module = ns["Model"](*ns["get_init_inputs"]()).eval()
        x = ns["get_inputs"]()[0]
        x_other = torch.randn(ns["batch_size"] // 2 + 3, ns["in_features"])
    kernel = mod.replace(copy.deepcopy(module))

    def close(got, want, what):
        torch.testing.assert_close(got, want, atol=tol.atol, rtol=tol.rtol, msg=lambda m: f"{what}: {m}")

    with torch.no_grad():
        expected, expected_other = module(x), module(x_other)
        close(kernel(x), expected, "eager")

        torch._dynamo.reset()
        compiled = torch.compile(kernel, fullgraph=True)
        close(compiled(x), expected, "torch.compile")
        close(compiled(x_other), expected_other, "torch.compile, another batch size")

        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):   # warm-up on a side stream, as torch.cuda.graphs asks
            for _ in range(3):
                kernel(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = kernel(static_x)
        torch.manual_seed(1)
        fresh = torch.randn_like(x)
        static_x.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        close(static_out, module(fresh), "CUDA graph replay")
        assert not torch.equal(static_out, expected)   # the replay computed from the new input

        compiled_module = torch.compile(module, fullgraph=True)
        times = {
            "module (eager)": _ms(torch, lambda: module(x)),
            "module (torch.compile)": _ms(torch, lambda: compiled_module(x)),
            "exported op (eager)": _ms(torch, lambda: kernel(x)),
            "exported op (torch.compile, fullgraph)": _ms(torch, lambda: compiled(x)),
            "exported op (CUDA graph replay)": _ms(torch, graph.replay),
        }
    print(f"\n{STEM} at batch {x.shape[0]}, median ms of 50 calls (CUDA events):")
    for name, ms in times.items():
        print(f"  {name:<40} {ms:.4f} ms")
    assert all(ms > 0 for ms in times.values())
