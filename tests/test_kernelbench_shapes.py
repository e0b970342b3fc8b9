"""KernelBench's problems as they are written: constants from tuple unpacking and chained assignment, check sizes
that run on data (not only on the meta device), FLOPs of transposed, 3-D and recurrent layers, roofline
expressions that stay short for deep models, and one clear refusal for a missing package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from sandbox.pytorch.importer import _bytes_expression  # noqa: E402
from sandbox.pytorch.problem import Problem, ProblemError  # noqa: E402
from sandbox.pytorch.shapes import analyse, probe  # noqa: E402
from sandbox.pytorch.sizes import plan_sizes, runs_on_cpu  # noqa: E402
from sandbox.tasks import expr  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _problem(tmp_path: Path, text: str, name: str = "p.py") -> Problem:
    path = tmp_path / name
    path.write_text(text)
    return Problem(path)


CONV_T = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, cin, cout, k, pad):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, k, padding=pad)
    def forward(self, x):
        return torch.tanh(self.conv(x))

batch_size = 2
cin = cout = 4
depth, height, width = 6, 8, 10
kernel_size = 3
padding = 1

def get_inputs():
    return [torch.rand(batch_size, cin, depth, height, width)]

def get_init_inputs():
    return [cin, cout, kernel_size, padding]
'''


def test_tuple_unpacked_and_chained_constants_are_sizes(tmp_path):
    p = _problem(tmp_path, CONV_T)
    assert {"depth", "height", "width", "cin", "cout"} <= set(p.constants)
    assert p.values()["height"] == 8 and p.values()["cout"] == 4
    a = analyse(p)
    assert {"depth", "height", "width", "batch_size"} <= set(a.symbols)
    assert a.dims["in0"][2:] == ["depth", "height", "width"]
    # the changed value reaches the module: height 13 gives an input 13 high
    assert probe(p, {"height": 13}).shapes["in0"][3] == 13


def test_transposed_3d_convolution_flops_fit_and_hold_at_other_sizes(tmp_path):
    p = _problem(tmp_path, CONV_T)
    a = analyse(p)
    assert a.flops != "0"
    for values in ({}, {"depth": 9, "width": 5}, {"batch_size": 3, "height": 11}):
        env = {**a.benchmark, **values}
        assert expr.evaluate(a.flops, env) == probe(p, values).flops


def test_every_check_size_runs_on_the_cpu_not_only_on_meta(tmp_path):
    p = _problem(tmp_path, CONV_T)
    a = analyse(p)
    plan = plan_sizes(p, a)
    assert plan.check
    for values in plan.check:  # kernel 1 with padding 1 is fine on meta and an empty output on data
        assert runs_on_cpu(p, {s: v for s, v in values.items() if v != a.benchmark[s]}), values


GRU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
    def forward(self, x, h0):
        out, h = self.gru(x, h0)
        return out, h

batch_size = 3
seq_len = 4096
input_size = 8
hidden_size = 16
num_layers = 2

def get_inputs():
    return [torch.rand(batch_size, seq_len, input_size), torch.rand(2 * num_layers, batch_size, hidden_size)]

def get_init_inputs():
    return [input_size, hidden_size, num_layers]
'''


def test_recurrent_layers_get_their_shapes_and_flops_on_meta_without_stepping(tmp_path):
    p = _problem(tmp_path, GRU)
    found = probe(p, {"seq_len": 7})
    model, args = p.build({"seq_len": 7}, "cpu", seed=1)
    with torch.no_grad():
        real = model(*args)
    assert found.shapes["out0"] == tuple(real[0].shape) and found.shapes["out1"] == tuple(real[1].shape)
    weights = sum(2 * w.numel() for n, w in model.named_parameters() if w.dim() == 2)
    assert found.flops == weights * 7 * 3
    a = analyse(p)  # 4096 steps would take minutes stepped in Python on meta
    assert "seq_len" in a.symbols and a.dims["out0"][1] == "seq_len"


def test_a_deep_models_bytes_collect_into_a_short_expression():
    layers = [(4, [str(64 * (i % 7 + 1)), str(3 * (i % 5 + 1)), "3", "3"]) for i in range(150)]
    text = _bytes_expression([(4, ["batch_size", "3", "height", "width"]), *layers, (4, ["batch_size", "num_classes"]),
                              (4, ["num_classes", "4096"]), (4, ["num_classes"])])
    assert len(text) < 120, text
    env = {"batch_size": 2, "height": 5, "width": 7, "num_classes": 11}
    expected = (4 * 2 * 3 * 5 * 7 + sum(4 * int(d[0]) * int(d[1]) * 9 for _, d in layers) + 4 * 2 * 11 + 4 * 11 * 4096
                + 4 * 11)
    assert expr.evaluate(text, env) == expected


def test_a_missing_package_is_one_line_naming_it(tmp_path):
    p = _problem(tmp_path, "import torch\nimport kw_no_such_package\n" + CONV_T, "needs_pkg.py")
    with pytest.raises(ProblemError) as err:
        analyse(p)
    assert "needs_pkg.py: it imports 'kw_no_such_package', which is not installed" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_init_that_reads_data_still_runs_on_meta(tmp_path):
    text = CONV_T.replace("        super().__init__()\n",
                          "        super().__init__()\n        self.rates = [x.item() for x in torch.linspace(0, 1, 3)]\n")
    a = analyse(_problem(tmp_path, text))
    assert "depth" in a.symbols and re.search(r"\bdepth\b", a.flops)


def test_bytes_that_stay_long_expand_into_one_polynomial_of_the_symbols():
    from sandbox.pytorch.importer import _bytes_polynomial

    # a dense block: layer i's weight is (growth, in_channels + i * growth, 3, 3), each its own term at first
    layers = [(4, ["32", f"in_channels + {32 * i}", "3", "3"]) for i in range(40)]
    layers += [(4, ["batch_size", f"in_channels + {32 * i}", "height", "width"]) for i in range(40)]
    long = _bytes_expression(layers)
    text = _bytes_polynomial(long, ["batch_size", "in_channels", "height", "width"])
    assert len(long) > 500 and text and len(text) < 200, text
    env = {"batch_size": 3, "in_channels": 7, "height": 5, "width": 11}
    c = env["in_channels"]
    expected = sum(4 * 32 * (c + 32 * i) * 9 + 4 * 3 * (c + 32 * i) * 5 * 11 for i in range(40))
    assert expr.evaluate(text, env) == expected


MLP = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_out))
    def forward(self, x):
        return self.net(x)

batch_size = 4
n_in = 32
hidden = 64
n_out = 10

def get_inputs():
    return [torch.rand(batch_size, n_in)]

def get_init_inputs():
    return [n_in, hidden, n_out]
'''


def test_a_deep_models_flops_are_a_sum_over_its_layers_and_hold_at_other_sizes(tmp_path):
    p = _problem(tmp_path, MLP)
    a = analyse(p)
    assert a.flops.count("+") == 2, a.flops  # three layers: in*hidden, hidden*hidden, hidden*out terms
    for values in ({}, {"hidden": 7, "n_out": 3}, {"batch_size": 9, "n_in": 5}):
        assert expr.evaluate(a.flops, {**a.benchmark, **values}) == probe(p, values).flops
