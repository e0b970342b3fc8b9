"""Random inputs from a seed. Both GPU processes regenerate the same bits from the same seed, so
inputs never travel between them, and the reference never shares a process with a candidate.

Inputs of the ``module`` distribution (tasks with a ``[torch]`` table) are generated together by the
task's PyTorch problem: its ``get_inputs()`` and its module's initialisation, seeded on the device.

Beside ``normal``, ``uniform``, ``int`` and ``ones``, three kinds reach the values where wrong kernels
differ from right ones: ``wide`` (N(0, 100^2): exp() and tanh() past float32's and float16's overflow,
saturated activations), ``kinks`` (values at and just beside the kinks of the common activations: 0,
+-0.5, +-1, +-3, +-6) and ``special`` (signed zeros, +-1, the smallest normal and subnormal numbers,
the largest finite ones, or a task's own list); ``constant`` fills an input with one value.
A generated array is computed in float64 by the backend's own generator (NumPy or CuPy, same code
path on every process of one backend) and rounded once to the input's dtype; bfloat16 inputs are
kept as their uint16 bit patterns (``dtypes.to_bfloat16``). On a GPU, a float32 input of the ``normal``, ``wide``
or ``uniform`` kind is drawn in float32 directly (cuRAND's float32 draws, the offset added in float32): a 1 GiB
input then moves a quarter of the bytes that its float64 temporaries did."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def sub_seed(seed: int, i: int) -> int:
    return (seed * 1_000_003 + i * 7919) % (2**32 - 1)


def generate_all(xp, specs: list[dict], seed: int) -> dict:
    """Every input of one trial, deterministic in ``seed`` for a given backend (and device)."""
    out = {}
    module = [s for s in specs if s["dist"] == "module"]
    if module:
        from ..pytorch.runtime import runtime_for

        runtime = runtime_for(module[0]["task_folder"])
        out.update(runtime.generate(xp, module[0]["sizes"], [s["name"] for s in module], seed))
    for i, spec in enumerate(specs):
        if spec["dist"] != "module":
            out[spec["name"]] = generate(xp, spec, sub_seed(seed, i))
    return out


def output_specs(task: Task, sizes: dict[str, int]) -> list[dict]:
    return [dict(name=t.name, dtype=t.dtype, shape=list(task.shape(t, sizes))) for t in task.spec.outputs]


WIDE_SCALE = 100.0
KINKS = (-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0)
KINK_NUDGE = 1e-3


CHUNK = 1 << 25  # elements drawn at once: a draw's float64 temporaries stay a few GiB at any input size


def generate(xp, spec: dict, seed: int):
    """One input array (NumPy or CuPy, by ``xp``), deterministic in ``seed`` for a given backend. An array of more
    than ``CHUNK`` elements is drawn a chunk at a time, each with a seed of its own (``sub_seed``), so that its
    temporaries never hold several times the array (a 7.5 GB input once took over 100 GB to draw)."""
    shape = tuple(spec["shape"])
    n = 1
    for d in shape:
        n *= int(d)
    rs = random_state(xp, seed)
    if n <= CHUNK:
        return _draw(xp, spec, rs, shape)
    out = None
    for i, start in enumerate(range(0, n, CHUNK)):
        rs.seed(sub_seed(seed, i + 1))
        part = _draw(xp, spec, rs, (min(CHUNK, n - start),))
        if out is None:
            out = xp.empty(n, dtype=part.dtype)
        out[start:start + part.size] = part
        del part
    return out.reshape(shape)


def random_state(xp, seed: int):
    """The backend's generator seeded with ``seed``. On a GPU, cuRAND's Philox: a counter-based generator whose
    seeding costs nothing on the device (the default XORWOW sets up a state per thread on every seeding, which took
    13 ms of every 1 GiB input drawn)."""
    if not is_cupy(xp):
        return xp.random.RandomState(seed)
    from cupy_backends.cuda.libs import curand

    return xp.random.RandomState(seed, method=curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)


def _draw(xp, spec: dict, rs, shape: tuple[int, ...]):
    dtype = spec["dtype"]
    dist = spec.get("kind", spec["dist"])
    if dtype == "float32" and dist in ("normal", "wide", "uniform") and is_cupy(xp):
        return _draw_float32(xp, spec, rs, shape, dist)
    if dist == "ones":
        values = xp.ones(shape, dtype=xp.float64)
    elif dist == "constant":
        values = xp.full(shape, float(spec["value"]), dtype=xp.float64)
    elif dist == "int":
        lo, hi = int(spec["low"]), int(spec["high"])
        values = rs.randint(lo, max(hi, lo + 1), size=shape)
        if not DTYPES[dtype].is_float:
            return values.astype(storage_dtype(dtype))
        values = values.astype(xp.float64)
    elif dist == "normal":
        values = rs.normal(0.0, spec["scale"], size=shape)
    elif dist == "wide":
        values = rs.normal(0.0, WIDE_SCALE, size=shape)
    elif dist == "uniform":
        values = rs.uniform(spec["low"], spec["high"], size=shape)
    elif dist == "kinks":
        # a third exactly on a kink, a third a hair beside one, a third spread around one
        points = xp.asarray(KINKS, dtype=xp.float64)[rs.randint(0, len(KINKS), size=shape)]
        which = rs.randint(0, 3, size=shape)
        nudge = rs.normal(0.0, 1.0, size=shape)
        values = points + xp.where(which == 1, KINK_NUDGE * nudge, xp.where(which == 2, 0.25 * nudge, 0.0))
    elif dist == "special":
        table = xp.asarray(spec.get("values") or special_values(dtype), dtype=xp.float64)
        values = table[rs.randint(0, int(table.size), size=shape)]
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    if spec.get("offset"):
        values = values + spec["offset"]
    return from_float64(xp, values, dtype)


def _draw_float32(xp, spec: dict, rs, shape: tuple[int, ...], dist: str):
    """A float32 ``normal``, ``wide`` or ``uniform`` input drawn in float32 (``_draw`` on a GPU)."""
    f = xp.float32
    if dist == "uniform":
        values = rs.uniform(spec["low"], spec["high"], size=shape, dtype=f)
    else:
        values = rs.normal(0.0, WIDE_SCALE if dist == "wide" else spec["scale"], size=shape, dtype=f)
    if spec.get("offset"):
        values += f(spec["offset"])
    return values


def describe(spec: TensorSpec) -> str:
    return f"{spec.name}: {spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"
