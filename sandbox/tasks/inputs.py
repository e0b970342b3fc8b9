"""Random inputs from a seed. Both GPU processes regenerate the same bits from the same seed, so
inputs never travel between them, and the reference never shares a process with a candidate.

Inputs of the ``module`` distribution (tasks with a ``[torch]`` table) are generated together by the
task's PyTorch problem: its ``get_inputs()`` and its module's initialisation, seeded on the device.

Beside ``normal``, ``uniform``, ``int`` and ``ones``, three kinds reach the values where wrong kernels
differ from right ones: ``wide`` (N(0, 100^2): exp() and tanh() past float32's and float16's overflow,
saturated activations), ``kinks`` (values at and just beside the kinks of the common activations: 0,
+-0.5, +-1, +-3, +-6) and ``special`` (signed zeros, +-1, the smallest normal and subnormal numbers,
the largest finite ones, or a task's own list); ``constant`` fills an input with one value.
Three more break the structure i.i.d. rows never break: ``rows`` (each row its own centre and spread, amplitudes
mixed within a row), ``ties`` (few levels: ties and clustered maxima) and ``near_one`` (a long product's factors).
A generated array is computed in float64 by ``keyed``'s generator (the same bits from NumPy and CuPy, from a seed
of 128 bits a kernel cannot reach) and rounded to the input's dtype; bfloat16 inputs are kept as their uint16 bit
patterns (``dtypes.to_bfloat16``). A normal draw's offset and scale are multiplied by one factor drawn from the
seed (``drawn_parameters``). On a GPU, a float32 input of the ``normal``, ``wide`` or ``uniform`` kind is drawn
straight into the array it fills, in one pass (``keyed.device_float32``): a 1 GiB input is written once, with no
temporaries and no copies."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import keyed
from .dtypes import DTYPES, from_float64, is_cupy, special_values, storage_dtype

if TYPE_CHECKING:  # annotations only: a worker process that generates inputs needs no task model
    from .task import Task, TensorSpec


def _distributions(t: TensorSpec) -> list:
    return t.distributions or (["normal", "uniform"] if DTYPES[t.dtype].is_float else ["int"])


def distribution_count(task: Task) -> int:
    """Trials that draw every listed distribution of every input at least once (the longest list)."""
    return max(len(_distributions(t)) for t in task.spec.inputs)


def input_specs(task: Task, sizes: dict[str, int], trial: int) -> list[dict]:
    """Per-input generation recipe for one trial. Input number i takes entry (trial + i) mod len of its
    list, so any ``distribution_count(task)`` consecutive trials draw every entry of every input."""
    specs = []
    for i, t in enumerate(task.spec.inputs):
        dists = _distributions(t)
        d = dists[(trial + i) % len(dists)]
        low, high = task.bounds(t, sizes)
        params = dict(dist=d, kind=d, low=low, high=high, scale=t.scale, offset=0.0)
        if not isinstance(d, str):
            params = dict(dist=d.name, kind=d.kind, offset=d.offset, scale=t.scale if d.scale is None else d.scale,
                          low=low if d.low is None else d.low, high=high if d.high is None else d.high)
            if d.value is not None:
                params["value"] = d.value
            if d.values:
                params["values"] = list(d.values)
        if d == "module":
            params.update(task_folder=str(task.folder.resolve()), sizes=dict(sizes))
        specs.append(dict(name=t.name, dtype=t.dtype, shape=list(task.shape(t, sizes)), **params))
    return specs


STRUCTURAL = ("rows", "ties", "near_one")   # kinds drawn at check and held-out sizes, never in timed rounds


def structural(specs: list[dict]) -> bool:
    """Whether a trial draws a structure-adversarial kind (``STRUCTURAL``) for any input."""
    return any(s.get("kind", s["dist"]) in STRUCTURAL for s in specs)


def timed_variants(task: Task, sizes: dict[str, int]) -> list[dict]:
    """The input variants the timing stage rotates through: every trial of ``distribution_count`` but those that
    draw a structure-adversarial kind (checked at every check and held-out size; a timed round draws its inputs in
    one device pass, which those kinds have not)."""
    trials = [input_specs(task, sizes, k) for k in range(distribution_count(task))]
    return [t for t in trials if not structural(t)] or trials[:1]


def input_seed(seed: int, i: int) -> int:
    """The seed of input number ``i`` of a trial drawn from ``seed`` (128 bits, ``keyed.derive``)."""
    k = keyed.derive(seed, "input", i)
    return k[0] | k[1] << 32 | k[2] << 64 | k[3] << 96


def round_seed(seed: int, r: int) -> int:
    """The seed of timed round ``r``'s inputs under the stage's ``seed``: 128 bits, unrelated to round ``r - 1``'s
    (``keyed.derive``), so that no round's inputs follow from an earlier round's."""
    k = keyed.derive(seed, "round", r)
    return k[0] | k[1] << 32 | k[2] << 64 | k[3] << 96


def generate_all(xp, specs: list[dict], seed: int, into: dict | None = None) -> dict:
    """Every input of one trial, the same bits from ``seed`` on every backend (``keyed``; a ``module`` input is
    generated by the task's PyTorch problem, reproducible per device). ``into``: arrays by input name (contiguous,
    of the input's shape and storage dtype) to draw the inputs in, in place; the same bits as new arrays get."""
    out = {}
    module = [s for s in specs if s["dist"] == "module"]
    if module:
        from ..pytorch.runtime import runtime_for

        runtime = runtime_for(module[0]["task_folder"])
        names = [s["name"] for s in module]
        for name, value in runtime.generate(xp, module[0]["sizes"], names, keyed.torch_seed(seed, "module")).items():
            if into is not None:
                into[name][...] = value
            out[name] = value if into is None else into[name]
    for i, spec in enumerate(specs):
        if spec["dist"] != "module":
            target = into[spec["name"]] if into is not None else None
            out[spec["name"]] = generate(xp, spec, input_seed(seed, i), target)
    return out


def output_specs(task: Task, sizes: dict[str, int]) -> list[dict]:
    return [dict(name=t.name, dtype=t.dtype, shape=list(task.shape(t, sizes))) for t in task.spec.outputs]


WIDE_SCALE = 100.0
KINKS = (-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0)
KINK_NUDGE = 1e-3
RESCALE = (1.0, 1.25)      # a normal draw's offset and scale are both multiplied by one factor in U(RESCALE), per draw
ROW_CENTRE = 16.0          # rows: a row's centre is offset + scale * U(-ROW_CENTRE, ROW_CENTRE)
ROW_SPREAD = (-4, 1)       # rows: a row's spread is scale * (1 + u) 2^k, k an integer in [-4, 1), u in [0, 1)
ROW_MIX = (-2, 2)          # rows: an element's amplitude is its row's spread * (1 + u) 2^k, k in [-2, 2)
TIE_LEVELS = 9             # ties: offset + scale * k / 2 for k in [-4, 4]: a ninth of a row sits on its maximum
NEAR_ONE = 1e-3            # near_one: 1 + offset + scale * NEAR_ONE * N(0, 1), a cumulative product's factors


CHUNK = 1 << 25  # elements drawn at once: a draw's temporaries stay a few GiB at any input size


def generate(xp, spec: dict, seed: int, out=None):
    """One input array (NumPy or CuPy, by ``xp``), the same bits from ``seed`` on every backend; drawn into
    ``out`` where given (contiguous, the input's shape and storage dtype), else into a new array. An array of
    more than ``CHUNK`` elements is drawn a chunk at a time, each chunk under a key of its own (``keyed.derive``),
    so that its temporaries never hold several times the array."""
    shape = tuple(int(d) for d in spec["shape"])
    if out is None:
        out = xp.empty(shape, dtype=storage_dtype(spec["dtype"]))
    elif out.shape != shape or out.dtype != storage_dtype(spec["dtype"]):
        raise ValueError(f"input {spec.get('name')!r} is {spec['dtype']} {list(shape)}: cannot draw it into an "
                         f"array of {out.dtype} {list(out.shape)}")
    if not out.flags.c_contiguous:
        raise ValueError(f"input {spec.get('name')!r}: the array to draw it into is not contiguous")
    flat = out.reshape(-1)
    kind = spec.get("kind", spec["dist"])
    params = drawn_parameters(spec, seed)
    row = int(shape[-1]) if shape else 1
    chunk = CHUNK - CHUNK % max(1, min(row, CHUNK))   # whole rows per chunk where a row fits in one
    for c, start in enumerate(range(0, flat.size, chunk)):
        part = flat[start:start + chunk]
        if spec["dtype"] == "float32" and kind in DEVICE_KINDS and is_cupy(xp):
            a, b = ((params["low"] + params["offset"], params["high"] - params["low"]) if kind == "uniform"
                    else (params["offset"], params["scale"]))
            keyed.device_float32(xp, part, "uniform" if kind == "uniform" else "normal", keyed.derive(seed, c, kind),
                                 a, b)
        else:
            part[...] = _draw(xp, spec, params, seed, c, part.size, start)
    return out


def drawn_parameters(spec: dict, seed: int) -> dict:
    """The parameters a draw of ``spec`` under ``seed`` uses: the spec's, with a normal draw's offset and scale
    multiplied by one factor in U(RESCALE) drawn from the seed (their ratio, what an honest kernel's accuracy
    depends on, is the spec's; an offset only grows). Replays a logged draw: the same seed gives the same
    parameters."""
    params = dict(offset=float(spec.get("offset") or 0.0), scale=float(spec.get("scale") or 1.0),
                  low=spec.get("low"), high=spec.get("high"))
    kind = spec.get("kind", spec["dist"])
    if kind in ("normal", "wide", "rows", "ties"):
        if kind == "wide":
            params["scale"] = WIDE_SCALE
        u = float(keyed.uniform01(np, keyed.derive(seed, "rescale"), 1)[0])
        factor = RESCALE[0] + (RESCALE[1] - RESCALE[0]) * u
        params.update(offset=params["offset"] * factor, scale=params["scale"] * factor, factor=factor)
    return params


DEVICE_KINDS = ("normal", "wide", "uniform")   # float32 kinds drawn on a GPU in place, one pass each


def _draw(xp, spec: dict, params: dict, seed: int, c: int, n: int, start: int):
    """Chunk ``c`` of the draw (``n`` elements from flat index ``start``), in its storage dtype."""
    dtype = spec["dtype"]
    dist = spec.get("kind", spec["dist"])
    key = lambda part: keyed.derive(seed, c, part)  # noqa: E731
    offset, scale = params["offset"], params["scale"]
    if dist == "ones":
        values = _shift(xp.ones(n, dtype=xp.float64), offset)
    elif dist == "constant":
        values = _shift(xp.full(n, float(spec["value"]), dtype=xp.float64), offset)
    elif dist == "int":
        lo, hi = int(spec["low"]), int(spec["high"])
        values = keyed.integers(xp, key("int"), n, lo, max(hi, lo + 1))
        if not DTYPES[dtype].is_float:
            return values.astype(storage_dtype(dtype))
        values = _shift(values.astype(xp.float64), offset)
    elif dist in ("normal", "wide"):
        values = keyed.normal(xp, key(dist), n, scale, offset)
    elif dist == "uniform":
        values = keyed.uniform(xp, key("uniform"), n, params["low"], params["high"], offset)
    elif dist == "kinks":
        # a third exactly on a kink, a third a hair beside one, a third spread around one
        points = xp.asarray(KINKS, dtype=xp.float64)[keyed.integers(xp, key("kink"), n, 0, len(KINKS))]
        which = keyed.integers(xp, key("which"), n, 0, 3)
        nudge = keyed.normal32(xp, key("nudge"), n).astype(xp.float64)
        values = _shift(points + xp.where(which == 1, KINK_NUDGE * nudge, xp.where(which == 2, 0.25 * nudge, 0.0)), offset)
    elif dist == "special":
        table = xp.asarray(spec.get("values") or special_values(dtype), dtype=xp.float64)
        values = _shift(table[keyed.integers(xp, key("special"), n, 0, int(table.size))], offset)
    elif dist == "rows":
        values = _rows(xp, spec, seed, c, n, start, offset, scale)
    elif dist == "ties":
        values = offset + scale * 0.5 * (keyed.integers(xp, key("ties"), n, 0, TIE_LEVELS) - TIE_LEVELS // 2)
    elif dist == "near_one":
        values = 1.0 + offset + scale * NEAR_ONE * keyed.normal32(xp, key("near_one"), n).astype(xp.float64)
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return from_float64(xp, values, dtype)


def _shift(values, offset: float):
    """``values`` + ``offset``, left as they are where it is 0 (a signed zero keeps its sign)."""
    return values + offset if offset else values


def _pow2(xp, u, k):
    """(1 + u) 2^k, exactly (``ldexp``): a log-uniform-like factor with no library power function, so the same
    bits on every backend."""
    return xp.ldexp(1.0 + u, k.astype(xp.int32))


def _rows(xp, spec: dict, seed: int, c: int, n: int, start: int, offset: float, scale: float):
    """Rows (the last dimension) that share no centre and no spread: each row's centre and spread drawn on its own
    (``ROW_CENTRE``, ``ROW_SPREAD``) from its index, and amplitudes mixed within a row (``ROW_MIX``)."""
    shape = [int(d) for d in spec["shape"]]
    row = max(1, shape[-1] if shape else 1)
    which = (xp.arange(n, dtype=xp.int64) + start) // row
    first = int(start // row)
    ids = xp.arange(first, int(which[-1]) + 1 if n else first, dtype=xp.uint64)
    w = keyed.philox(xp, ids & xp.uint64(0xFFFFFFFF), ids >> xp.uint64(32), keyed.derive(seed, "rows"))
    u0, u1 = ((x >> xp.uint32(8)).astype(xp.float64) * 2.0**-24 for x in w[:2])
    centre = offset + scale * ROW_CENTRE * (2.0 * u0 - 1.0)
    spread = scale * _pow2(xp, u1, (w[2] % xp.uint32(ROW_SPREAD[1] - ROW_SPREAD[0])).astype(xp.int64) + ROW_SPREAD[0])
    octave = keyed.integers(xp, keyed.derive(seed, c, "octave"), n, *ROW_MIX)
    mix = _pow2(xp, keyed.uniform01(xp, keyed.derive(seed, c, "mix"), n), octave)
    z = keyed.normal32(xp, keyed.derive(seed, c, "rows"), n).astype(xp.float64)
    local = which - first
    return centre[local] + spread[local] * mix * z


def describe(spec: TensorSpec) -> str:
    return f"{spec.name}: {spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"
