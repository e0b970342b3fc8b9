"""`kernelwright export --torch` writes data only as Python literals: run ids, task names, folder paths and input
names from a run folder or a task never become code, keyword-named inputs give a working module, and sizes that
only a derived size holds are solved for and checked."""

from __future__ import annotations

import importlib.util
import json
import keyword
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agent.report.export_torch import literal, render  # noqa: E402
from sandbox.candidates.candidate import parse_candidate  # noqa: E402
from sandbox.tasks.task import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)

CANARY = "KW_EXPORT_CANARY"
PAYLOAD = f"__import__('os').environ.__setitem__('{CANARY}', '1')"
# Texts that would run PAYLOAD if pasted into a docstring, a string literal, a comment or a line of code.
HOSTILE = [
    f'x"""\n{PAYLOAD}\n"""', f"x'''\n{PAYLOAD}\n'''", f'"; {PAYLOAD}; "', f"'; {PAYLOAD}; '", f"\\\n{PAYLOAD}",
    f"\r{PAYLOAD}", f"\x00\x1b[31m{PAYLOAD}", f"\ud800{PAYLOAD}", f"{{{{ {PAYLOAD} }}}}", f"\\N{{{PAYLOAD}",
    f"é\u2028{PAYLOAD}", f"#\n{PAYLOAD}",
]
# Task names the task format accepts, and input names it accepts, that clash with Python or with the module.
TASK_NAMES = ["in", "class", "def", "1x", "check", "torch", "plan", "sizes_of", "print", "match", "kernel", "sizes",
              "forward", "derive", "copy_1"]
INPUT_NAMES = ["in", "def", "lambda", "sizes", "self", "tensors", "plan", "torch", "_value", "match", "cupy", "zip",
               "dict", "in_", "x", "_DTYPES", "FUNCTION", "SOURCE", "device", "_solve"]


def _task(root: Path, name: str, a: str, b: str, out: str = "out", derived: bool = False):
    """A task adding two vectors whose names are ``a`` and ``b``; with ``derived``, the size symbol h only
    appears through the derived size n = 2 * h."""
    folder = root / name
    folder.mkdir(parents=True)
    sizes = ('benchmark = { h = 512 }\ncheck = [ { h = 1 }, { h = 7 } ]\nderived = { n = "2 * h" }' if derived
             else 'benchmark = { n = 1024 }\ncheck = [ { n = 1 }, { n = 7 } ]')
    toml = f'''name = "{name}"
category = "elementwise"
description = "Element-wise sum of two vectors, named to test the export."
[sizes]
{sizes}
[[inputs]]
name = "{a}"
dtype = "float32"
shape = ["n"]
[[inputs]]
name = "{b}"
dtype = "float32"
shape = ["n"]
[[outputs]]
name = "{out}"
dtype = "float32"
shape = ["n"]
[tolerance]
float32 = {{ atol = 0.0, rtol = 1e-7 }}
[roofline]
flops = "n"
bytes = "12 * n"
'''
    (folder / "task.toml").write_text(toml)
    (folder / "reference.py").write_text(
        f"def reference(xp, **kw):\n    assert 'n' in kw{' and kw[chr(104)] * 2 == kw[chr(110)]' if derived else ''}\n"
        f"    return {{{out!r}: kw[{a!r}] + kw[{b!r}]}}\n")
    cu = f'''/*@kernelwright
[[launch]]
kernel = "add"
grid = "ceil_div(n, 256)"
block = 256
args = ["{a}", "{b}", "{out}", "n"]
@*/
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}}
'''
    (folder / "baseline.cu").write_text(cu)
    return load_task(folder)


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _meta(*shapes):
    return [torch.empty(s, dtype=torch.float32, device="meta") for s in shapes]


@pytest.fixture(autouse=True)
def _no_canary(monkeypatch):
    monkeypatch.delenv(CANARY, raising=False)
    yield
    assert CANARY not in os.environ, "code from the data ran"


def test_hostile_run_ids_task_names_folders_and_input_names_stay_data_in_the_exported_module(tmp_path):
    rng = random.Random(27)
    for i in range(24):
        name = TASK_NAMES[i % len(TASK_NAMES)]
        a, b = rng.sample(INPUT_NAMES, 2)
        parent = tmp_path / f"p{i}" / rng.choice(['a"""b', "c'''d", "e\\f", "g h #", "{{j}}"])
        task = _task(parent, name, a, b)
        origin, claim = rng.choice(HOSTILE), rng.choice(HOSTILE)
        path = tmp_path / f"m{i}.py"
        path.write_text(render(task, parse_candidate((task.folder / "baseline.cu").read_text(), label="c"), origin,
                               claim, path.stem), encoding="utf-8")
        mod = _import(path)
        assert mod.TASK == name and mod.TASK_FOLDER == str(task.folder.resolve())
        assert origin in mod.__doc__ and claim in mod.__doc__
        fn = getattr(mod, mod.FUNCTION)
        assert mod.FUNCTION.isidentifier() and not keyword.iskeyword(mod.FUNCTION)
        assert fn.__code__.co_argcount == 2, "one parameter per input"
        assert mod.sizes_of(_meta(5, 5)) == {"n": 5}
        assert [x[0] for x in mod.INPUTS] == [a, b]
        with pytest.raises(ValueError, match="expected a contiguous CUDA tensor"):
            fn(torch.zeros(5), torch.zeros(5))


def test_an_input_named_in_gives_a_module_that_takes_it_as_in_(tmp_path):
    task = _task(tmp_path, "add", "in", "lambda")
    path = tmp_path / "k.py"
    path.write_text(render(task, parse_candidate((task.folder / "baseline.cu").read_text(), label="c"), "r", "", "k"))
    mod = _import(path)
    assert mod.add.__code__.co_varnames[:2] == ("in_", "lambda_")
    assert "out = k.add(in_, lambda_)" in mod.__doc__
    with pytest.raises(ValueError, match="in: expected a contiguous CUDA tensor"):
        mod.add(in_=torch.zeros(3), lambda_=torch.zeros(3))


def test_a_symbol_only_a_derived_size_holds_is_solved_for_and_the_relation_checked(tmp_path):
    task = _task(tmp_path, "halves", "a", "b", derived=True)
    path = tmp_path / "k.py"
    path.write_text(render(task, parse_candidate((task.folder / "baseline.cu").read_text(), label="c"), "r", "", "k"))
    mod = _import(path)
    assert mod.sizes_of(_meta(8, 8)) == {"h": 4}
    launches, _ = mod.plan({"h": 4})
    assert launches[0][4][3] == ("int32", 8), "the plan sees the derived size n"
    with pytest.raises(ValueError, match=r"a: no h gives n = 7"):
        mod.sizes_of(_meta(7, 7))
    with pytest.raises(ValueError, match=r"b: dimension n is 6 here and 8 elsewhere"):
        mod.sizes_of(_meta(8, 6))
    with pytest.raises(ValueError, match=r"a: expected shape \(6,\)"):
        mod.sizes_of(_meta(8, 8), h=3)


def test_literals_are_exact_for_every_value_the_module_holds():
    for value in [("a'\"\n\x00\ud800", 1, -2.5, None, True), {"k": [1, (2,)]}, float("inf"), float("nan"), ()]:
        got = eval(literal(value), {"__builtins__": {"float": float}})
        assert repr(got) == repr(value)
    with pytest.raises(TypeError):
        literal(object())


def _kw(*args, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KERNELWRIGHT_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=100, cwd=ROOT, env=env)


def test_an_edited_run_id_in_run_json_is_exported_as_text(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text("[tune]\nmax_evaluations = 1\n")
    run = _kw("optimize", "vector_add", "--sandbox", "fake", "--config", cfg, "--traces", tmp_path / "t",
              "--run-id", "r1", "--quiet", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    info_path = tmp_path / "t" / "r1" / "run.json"
    info = json.loads(info_path.read_text())
    info["run_id"] = HOSTILE[0]
    info_path.write_text(json.dumps(info))
    out = _kw("export", "r1", "--traces", tmp_path / "t", "--candidate", "c0000", "--torch", "-o",
              tmp_path / "vadd.py", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    mod = _import(tmp_path / "vadd.py")
    assert HOSTILE[0] in mod.__doc__


@pytest.mark.gpu
def test_the_exported_check_passes_derived_sizes_to_the_reference(tmp_path):
    task = _task(tmp_path, "halves", "a", "b", derived=True)
    path = tmp_path / "k.py"
    path.write_text(render(task, parse_candidate((task.folder / "baseline.cu").read_text(), label="c"), "r", "", "k"))
    errors = _import(path).check()
    assert errors == {"out": 0.0}


def test_the_exported_check_gives_the_reference_its_derived_sizes_and_catches_a_wrong_function(tmp_path, monkeypatch):
    """check() on the CPU: NumPy stands in for CuPy and a torch function for the compiled kernel, so what runs is the
    module's own generation, reference call (which asserts n = 2 * h reached it) and comparison."""
    import numpy

    task = _task(tmp_path, "halves", "a", "b", derived=True)
    path = tmp_path / "k.py"
    path.write_text(render(task, parse_candidate((task.folder / "baseline.cu").read_text(), label="c"), "r", "", "k"))
    mod = _import(path)
    monkeypatch.setitem(sys.modules, "cupy", numpy)
    monkeypatch.setattr(mod, mod.FUNCTION, lambda a, b, **sizes: a + b)
    assert mod.check() == {"out": 0.0}
    assert mod.check(sizes={"h": 7}) == {"out": 0.0}
    monkeypatch.setattr(mod, mod.FUNCTION, lambda a, b, **sizes: a - b)
    with pytest.raises(AssertionError, match=r"out at \{'h': 7\}: \d+ mismatches"):
        mod.check(sizes={"h": 7})
