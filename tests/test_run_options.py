"""The run options are declared once (``agent.run_options``): every one reaches a real run config field, both
commands take every one with the table's help, and their choices are the sandbox's own."""

from __future__ import annotations

import pytest

from agent.config import RunConfig, build
from agent.run_options import BY_NAME, OPTIONS, OptionError, RunOptions, given, on_a_cluster

pytestmark = pytest.mark.timeout(60)

SAMPLE = {str: "x", int: 3, float: 0.5}
URLS = {"base_url": "http://localhost:8000/v1", "ray_address": "auto"}


def _value(o):
    return o.choices[-1] if o.choices else URLS.get(o.name, SAMPLE[o.kind])


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.key is not None], ids=lambda o: o.flag)
def test_each_option_with_a_config_key_sets_that_field_and_nothing_else(option):
    value = True if option.kind is bool else _value(option)
    over = RunOptions(**{option.name: value}).overrides()
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    cfg = build({"model": {"name": "m"}, "prices": {"m": price, "x": price}}, over)
    *sections, last = option.key.split(".")
    node = cfg
    for s in sections:
        node = getattr(node, s)
    expected = option.sets if option.kind is bool else value
    got = getattr(node, last) if not isinstance(node, dict) else node[last]
    if isinstance(expected, dict):   # --ray: the section exists, with its defaults
        assert got is not None and over == {option.key: {}}
    else:
        assert got == expected and over == _nested(option.key, expected)


def _nested(key: str, value) -> dict:
    out = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


def test_options_not_given_set_nothing_and_the_prices_go_together():
    assert RunOptions().overrides() == {}
    both = RunOptions(model="m", price_in=1.0, price_out=2.0).overrides()
    assert both == {"model": {"name": "m"}, "prices": {"m": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}}
    assert RunOptions(price_in=1.0, price_out=2.0).overrides("from-file")["prices"] == {
        "from-file": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    with pytest.raises(OptionError, match="--price-in and --price-out go together"):
        RunOptions(model="m", price_in=1.0).overrides()
    with pytest.raises(OptionError, match=r"--sandbox: expected one of auto, gpu, compile-only, fake, got 'tpu'"):
        RunOptions(sandbox="tpu").overrides()
    assert RunOptions(ray_gpus=2, ray_address="auto").overrides() == {"cluster": {"address": "auto", "gpus": 2}}
    with pytest.raises(TypeError, match="not run options: colour"):
        RunOptions(colour="red")


def test_the_choices_are_the_sandboxs_own():
    from sandbox import SANDBOX_KINDS
    from sandbox.host.config import TORCH_TF32_MODES

    assert BY_NAME["sandbox"].choices == tuple(SANDBOX_KINDS)
    assert BY_NAME["torch_tf32"].choices == tuple(TORCH_TF32_MODES)
    assert all(o.key.split(".")[0] in RunConfig.model_fields for o in OPTIONS if o.key)


@pytest.mark.parametrize("command", ["optimize", "batch"])
def test_both_commands_take_every_run_option_with_the_tables_help(command):
    import typer

    from agent.cli import app

    cmd = typer.main.get_command(app).commands[command]
    params = {p.name: p for p in cmd.params}
    for o in OPTIONS:
        assert o.flag in params[o.name].opts and params[o.name].help.replace("\\[", "[") == o.help, o.name


def test_the_early_start_reads_the_tables_flags():
    assert given(["optimize", "t", "--sandbox=fake", "--sandbox", "gpu"], BY_NAME["sandbox"]) == "gpu"
    assert given(["optimize", "t", "--quiet"], BY_NAME["quiet"]) is True
    assert given(["optimize", "t"], BY_NAME["config"]) is None
    assert on_a_cluster(["batch", "a", "--ray-gpus", "2"]) and on_a_cluster(["optimize", "t", "--ray"])
    assert not on_a_cluster(["optimize", "t", "--sandbox", "gpu"])
