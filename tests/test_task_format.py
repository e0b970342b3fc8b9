"""What the task format can say (scalar outputs, size-dependent integer ranges, derived sizes, constraints,
open categories, per-output tolerances), and every malformed size or file found at load time with one error."""

import shutil
from pathlib import Path

import pytest

from sandbox.tasks.inputs import input_specs
from sandbox.tasks.task import TaskError, load_task, shadowed, suite_dir, task_folders

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


def _copy(tmp_path: Path, name: str, root: Path = EXAMPLES) -> Path:
    folder = tmp_path / name
    shutil.copytree(root / name, folder)
    return folder


def _edit(folder: Path, old: str, new: str, file: str = "task.toml") -> Path:
    path = folder / file
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_scalar_output_and_a_size_dependent_class_range():
    task = load_task(EXAMPLES / "cross_entropy")
    loss = task.tensor("loss")
    assert loss.shape == [] and task.shape(loss, {"N": 3, "C": 5}) == () and task.numel(loss, {"N": 3, "C": 5}) == 1
    assert task.output_tolerance("loss").rtol == 5e-5 and task.spec.tolerance == {}
    assert task.spec.category == "loss"
    target = next(s for s in input_specs(task, {"N": 17, "C": 1000}, 0) if s["name"] == "target")
    assert (target["low"], target["high"], target["dist"]) == (0, 1000, "int")


def test_derived_sizes_reach_shapes_the_roofline_and_the_reference():
    task = load_task(EXAMPLES / "maxpool2d")
    sizes = {"N": 2, "C": 3, "H": 7, "W": 9}
    assert task.env(sizes) == {**sizes, "OH": 3, "OW": 4}
    assert task.shape(task.tensor("y"), sizes) == (2, 3, 3, 4)
    assert task.bytes(sizes) == 4 * 2 * 3 * 7 * 9 + 4 * 2 * 3 * 3 * 4
    assert task.all_symbols == ["N", "C", "H", "W", "OH", "OW"] and task.symbols == ["N", "C", "H", "W"]


@pytest.mark.parametrize("old, new, message", [
    # a constraint broken by a check size names the size and the constraint
    ("check = [ { N = 1, C = 1, H = 3, W = 3 },", "check = [ { N = 1, C = 1, H = 2, W = 3 },",
     "sizes.check[0] (N=1,C=1,H=2,W=3): the constraint 'H >= 3' does not hold"),
    # without the constraint, the zero-length output is found instead of being blamed on a kernel
    ('constraints = ["H >= 3", "W >= 3"]\n', "",
     None),
    ('derived = { OH = "(H - 3) // 2 + 1"', 'derived = { OH = "(H - 3) // (W - W) + 1"', "division by zero"),
    ('derived = { OH = "(H - 3) // 2 + 1"', 'derived = { N = "(H - 3) // 2 + 1"', "sizes.derived redefines size symbols ['N']"),
    ('derived = { OH = "(H - 3) // 2 + 1"', 'derived = { OH = "(Q - 3) // 2 + 1"', "sizes.derived.OH uses unknown symbols ['Q']"),
    ('constraints = ["H >= 3"', 'constraints = ["H + 3"', "expected a comparison"),
    ('bytes = "4 * N * C * H * W', 'bytes = "4 * N * C * H * W // (H - H)', "roofline.bytes at sizes.benchmark"),
    ('shape = ["N", "C", "OH", "OW"]', 'shape = ["N", "C", "OH // (W - W)", "OW"]', "outputs.y at sizes.benchmark"),
    ("benchmark = { N = 16,", "benchmark = { N = 99999999999999999999,", "sizes.benchmark"),
    ('category = "pooling"', 'category = "Max Pooling"', "category: String should match pattern"),
    ('[tolerance]\nfloat32 = { atol = 0, rtol = 0 }', '[tolerance]\nfloat16 = { atol = 0, rtol = 0 }',
     "tolerance has no entry for output dtype 'float32'"),
    ('distributions = ["normal", "uniform"]', 'distributions = ["normal", "uniform"]\ntolerance = { atol = 0, rtol = 0 }',
     "inputs.x.tolerance: a tolerance applies to outputs only"),
    ('shape = ["N", "C", "OH", "OW"]', 'shape = ["N", "C", "OH", "OW"]\nscale = 2.0', "outputs.y: scale apply to inputs only"),
])
def test_malformed_sizes_are_found_when_the_task_loads(tmp_path, old, new, message):
    folder = _copy(tmp_path, "maxpool2d")
    toml = _edit(folder, old, new)
    if message is None:  # the zero-length case: H = 1 makes OH = 0
        _edit(folder, "check = [ { N = 1, C = 1, H = 3, W = 3 },", "check = [ { N = 1, C = 1, H = 1, W = 3 },")
        message = "outputs.y.shape is [1, 1, 0, 1] at sizes.check[0] (N=1,C=1,H=1,W=3): every dimension must be >= 1"
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert str(toml) in str(info.value)
    assert message in str(info.value)


def test_an_int_range_that_is_empty_at_some_size_is_an_error(tmp_path):
    folder = _copy(tmp_path, "cross_entropy")
    _edit(folder, 'high = "C"', 'high = "C - 1"')
    with pytest.raises(TaskError, match=r"inputs.target: the int distribution needs high > low, got low = 0, high = 0 "
                                        r"at sizes.check\[0\] \(N=1,C=1\)"):
        load_task(folder)


def test_an_output_without_any_tolerance_is_an_error(tmp_path):
    folder = _copy(tmp_path, "cross_entropy")
    _edit(folder, "tolerance = { atol = 1e-5, rtol = 5e-5 }", "")
    with pytest.raises(TaskError, match="tolerance has no entry for output dtype 'float32' \\(of 'loss'\\), and the output "
                                        "has no tolerance of its own"):
        load_task(folder)


@pytest.mark.parametrize("file, payload, message", [
    ("task.toml", b'name = "argmax"\ndescription = "caf\xe9"\n', "task.toml: not UTF-8 text (byte 0xe9 at offset 34)"),
    ("reference.py", b"# caf\xe9\ndef reference(xp, **kw):\n    return {}\n", "reference.py: not UTF-8 text (byte 0xe9"),
    ("reference.py", b"def reference(xp, *, x, rows, cols)\n    return {}\n", "reference.py:1: invalid Python"),
    ("reference.py", b"def other(xp):\n    return {}\n", "reference: expected a function reference("),
    ("reference.py", b"def reference(xp, **kw):\n    return {}\n", "the task names a vendor"),
])
def test_task_files_are_checked_without_running_them(tmp_path, file, payload, message):
    folder = _copy(tmp_path, "argmax")
    (folder / file).write_bytes(payload)
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert message in str(info.value)


def test_a_task_folder_loads_from_inside_it(tmp_path, monkeypatch):
    folder = _copy(tmp_path, "argmax")
    monkeypatch.chdir(folder)
    assert load_task(".").name == "argmax"
    assert load_task("task.toml").name == "argmax"


def test_a_bare_suite_name_means_the_suite_task_and_a_local_namesake_is_reported(tmp_path, monkeypatch):
    local = _copy(tmp_path, "softmax", root=suite_dir())
    monkeypatch.chdir(tmp_path)
    assert load_task("softmax").folder == suite_dir() / "softmax"
    assert shadowed("softmax") == Path("softmax")
    assert load_task("./softmax").folder == local.resolve()
    assert shadowed("./softmax") is None and shadowed("vector_add") is None


def test_task_folders_lists_a_folder_of_tasks_or_one_task(tmp_path):
    assert [p.name for p in task_folders(EXAMPLES)] == ["add_rmsnorm_bf16", "argmax", "conv1d_bias_relu", "cross_entropy", "gemm_nt", "maxpool2d"]
    assert task_folders(EXAMPLES / "argmax") == [EXAMPLES / "argmax"]
    with pytest.raises(TaskError, match="holds no task"):
        task_folders(tmp_path)


def test_sizes_given_from_outside_are_checked_like_the_task_s_own():
    task = load_task(EXAMPLES / "conv1d_bias_relu")
    task.check_sizes({"N": 1, "CI": 2, "CO": 3, "L": 8, "KW": 3})
    with pytest.raises(TaskError, match="--sizes: .*the constraint 'KW <= L' does not hold"):
        task.check_sizes({"N": 1, "CI": 2, "CO": 3, "L": 2, "KW": 3}, "--sizes")
    with pytest.raises(TaskError, match=r"--sizes must set exactly N, CI, CO, L, KW \(got N\)"):
        task.check_sizes({"N": 1}, "--sizes")
    with pytest.raises(TaskError, match="expected 1..9223372036854775807"):
        task.check_sizes({"N": 2**64, "CI": 2, "CO": 3, "L": 8, "KW": 3}, "--sizes")
