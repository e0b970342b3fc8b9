"""Task loading: the suite loads, and each malformed task gets one clear error naming file, key and expectation."""

import shutil
from pathlib import Path

import pytest

from sandbox.tasks.task import TaskError, load_task, suite_dir, suite_names

SUITE = Path(suite_dir())


def test_the_first_three_tasks_load_with_their_sizes():
    for name in ("vector_add", "softmax", "sgemm"):
        task = load_task(name)
        assert task.name == name
        assert task.spec.sizes.check and task.spec.sizes.heldout
        assert task.flops(task.spec.sizes.benchmark) > 0 and task.bytes(task.spec.sizes.benchmark) > 0
    assert {"vector_add", "softmax", "sgemm"} <= set(suite_names())


def test_a_task_loads_by_path_too():
    assert load_task(SUITE / "softmax").name == "softmax"
    assert load_task(SUITE / "softmax" / "task.toml").name == "softmax"


def _copy(tmp_path: Path, name: str = "vector_add") -> Path:
    folder = tmp_path / name
    shutil.copytree(SUITE / name, folder)
    return folder


@pytest.mark.parametrize("old, new, message", [
    ('dtype = "float32"\nshape = ["n"]\ndistributions = ["normal", "uniform"]',
     'dtype = "float33"\nshape = ["n"]\ndistributions = ["normal", "uniform"]', "inputs.0.dtype: expected one of"),
    ('category = "elementwise"', 'category = "elementwise"\ncolour = "blue"', "colour: unknown key"),
    ('shape = ["n"]\ndistributions = ["normal", "uniform"]\n\n[[inputs]]', 'shape = ["m"]\ndistributions = ["normal", "uniform"]\n\n[[inputs]]', "unknown symbols ['m']"),
    ("check = [ { n = 1 },", "check = [ { n = 1, m = 2 },", "sizes.check[0] defines ['m', 'n']"),
    ('bytes = "12 * n"', 'bytes = "12 * n +"', "roofline.bytes"),
    ("float32 = { atol = 0.0, rtol = 1e-7 }", "float16 = { atol = 0.0, rtol = 1e-3 }", "tolerance has no entry for output dtype 'float32'"),
    ('name = "vector_add"', 'name = "other"', "name: expected the folder name"),
    ("[sizes]", "[sizes\n", "invalid TOML"),
])
def test_malformed_task_names_file_key_and_expectation(tmp_path, old, new, message):
    folder = _copy(tmp_path)
    toml = folder / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert str(toml) in str(info.value) or "task.toml" in str(info.value)
    assert message in str(info.value)


def test_missing_files_and_unknown_tasks_are_named(tmp_path):
    folder = _copy(tmp_path)
    (folder / "baseline.cu").unlink()
    with pytest.raises(TaskError, match="baseline.cu: file is missing"):
        load_task(folder)
    with pytest.raises(TaskError, match="no such task"):
        load_task("no_such_task_anywhere")


def test_broken_reference_module_is_a_task_error(tmp_path):
    folder = _copy(tmp_path)
    (folder / "reference.py").write_text("def not_reference():\n    pass\n")
    with pytest.raises(TaskError, match="reference: expected a function"):
        load_task(folder).reference_module()


def test_fingerprint_changes_with_any_task_file(tmp_path):
    folder = _copy(tmp_path)
    before = load_task(folder).fingerprint
    (folder / "reference.py").write_text((folder / "reference.py").read_text() + "\n# edit\n")
    assert load_task(folder).fingerprint != before
