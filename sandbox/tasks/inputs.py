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
or ``uniform`` kind is drawn in float32 straight into the array it fills, in one pass (normals by cuRAND's Philox,
uniforms by a counter-based hash; the offset and the bounds applied in the same pass): a 1 GiB input is written
once, with no temporaries and no copies."""

from __future__ import annotations

import functools
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


def generate_all(xp, specs: list[dict], seed: int, into: dict | None = None) -> dict:
    """Every input of one trial, deterministic in ``seed`` for a given backend (and device). ``into``: arrays by
    input name (contiguous, of the input's shape and storage dtype) to draw the inputs in, in place; the same bits
    as new arrays get."""
    out = {}
    module = [s for s in specs if s["dist"] == "module"]
    if module:
        from ..pytorch.runtime import runtime_for

        runtime = runtime_for(module[0]["task_folder"])
        for name, value in runtime.generate(xp, module[0]["sizes"], [s["name"] for s in module], seed).items():
            if into is not None:
                into[name][...] = value
            out[name] = value if into is None else into[name]
    for i, spec in enumerate(specs):
        if spec["dist"] != "module":
            target = into[spec["name"]] if into is not None else None
            out[spec["name"]] = generate(xp, spec, sub_seed(seed, i), target)
    return out


def output_specs(task: Task, sizes: dict[str, int]) -> list[dict]:
    return [dict(name=t.name, dtype=t.dtype, shape=list(task.shape(t, sizes))) for t in task.spec.outputs]


WIDE_SCALE = 100.0
KINKS = (-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0)
KINK_NUDGE = 1e-3


CHUNK = 1 << 25  # elements drawn at once: a draw's float64 temporaries stay a few GiB at any input size


def generate(xp, spec: dict, seed: int, out=None):
    """One input array (NumPy or CuPy, by ``xp``), deterministic in ``seed`` for a given backend; drawn into
    ``out`` where given (contiguous, the input's shape and storage dtype), else into a new array. An array of
    more than ``CHUNK`` elements is drawn a chunk at a time, each with a seed of its own (``sub_seed``), so that
    its temporaries never hold several times the array (a 7.5 GB input once took over 100 GB to draw)."""
    shape = tuple(int(d) for d in spec["shape"])
    if out is None:
        out = xp.empty(shape, dtype=storage_dtype(spec["dtype"]))
    elif out.shape != shape or out.dtype != storage_dtype(spec["dtype"]):
        raise ValueError(f"input {spec.get('name')!r} is {spec['dtype']} {list(shape)}: cannot draw it into an "
                         f"array of {out.dtype} {list(out.shape)}")
    if not out.flags.c_contiguous:
        raise ValueError(f"input {spec.get('name')!r}: the array to draw it into is not contiguous")
    flat = out.reshape(-1)
    single = flat.size <= CHUNK
    if spec["dtype"] == "float32" and spec.get("kind", spec["dist"]) in DEVICE_KINDS and is_cupy(xp):
        with _DeviceDraws() as draws:
            for i, start in enumerate(range(0, flat.size, CHUNK)):
                draws.float32(xp, spec, seed if single else sub_seed(seed, i + 1), flat[start:start + CHUNK])
        return out
    rs = random_state(xp, seed)
    for i, start in enumerate(range(0, flat.size, CHUNK)):
        if not single:
            rs.seed(sub_seed(seed, i + 1))
        part = flat[start:start + CHUNK]
        part[...] = _draw(xp, spec, rs, part.shape)
    return out


def random_state(xp, seed: int):
    """The backend's generator seeded with ``seed``. On a GPU, cuRAND's Philox: a counter-based generator whose
    seeding costs nothing on the device (the default XORWOW sets up a state per thread on every seeding, which took
    13 ms of every 1 GiB input drawn)."""
    if not is_cupy(xp):
        return xp.random.RandomState(seed)
    from cupy_backends.cuda.libs import curand

    return xp.random.RandomState(seed, method=curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)


DEVICE_KINDS = ("normal", "wide", "uniform")   # float32 kinds drawn on a GPU in place, one pass each


class _DeviceDraws:
    """The in-place float32 draws of one input on a GPU (``with``: its cuRAND generator, made at the first normal
    draw, destroyed after the last). Both write on the current stream."""

    gen = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.gen is not None:
            self.curand.destroyGenerator(self.gen)

    def float32(self, xp, spec: dict, seed: int, dst) -> None:
        """``dst`` (flat, contiguous float32 on the device) drawn from ``seed``: a ``uniform`` draw by one
        counter-based pass (SplitMix64 of the seed and the index: 24 random bits an element, [low, high) + offset);
        a ``normal`` or ``wide`` one by cuRAND's Philox, with the offset as its mean."""
        n = dst.size
        if n == 0:
            return
        offset = float(spec.get("offset") or 0.0)
        kind = spec.get("kind", spec["dist"])
        if kind == "uniform":
            low, high = float(spec["low"]), float(spec["high"])
            key = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64
            _uniform_kernel(xp)(xp.uint64(key), xp.float32(low + offset), xp.float32(high - low), dst)
            return
        if self.gen is None:
            from cupy_backends.cuda.libs import curand

            self.curand = curand
            self.gen = curand.createGenerator(curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        curand, gen = self.curand, self.gen
        curand.setPseudoRandomGeneratorSeed(gen, seed)
        curand.setGeneratorOffset(gen, 0)
        scale = WIDE_SCALE if kind == "wide" else float(spec["scale"])
        even = n - n % 2   # cuRAND draws normals in pairs
        if even:
            curand.generateNormal(gen, dst.data.ptr, even, offset, scale)
        if n % 2:
            pair = xp.empty(2, dtype=xp.float32)
            curand.generateNormal(gen, pair.data.ptr, 2, offset, scale)
            dst[n - 1:] = pair[:1]


@functools.cache
def _uniform_kernel(xp):
    """u[i] = low + span * (the top 24 bits of SplitMix64's output for (key, i)) / 2^24, in [low, low + span)."""
    return xp.ElementwiseKernel(
        "uint64 key, float32 low, float32 span", "float32 u",
        """unsigned long long x = key + (unsigned long long)i * 0x9E3779B97F4A7C15ULL;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
        x ^= x >> 31;
        u = low + span * ((float)(x >> 40) * 5.9604644775390625e-08f);""",
        "kernelwright_uniform")


def _draw(xp, spec: dict, rs, shape: tuple[int, ...]):
    dtype = spec["dtype"]
    dist = spec.get("kind", spec["dist"])
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


def describe(spec: TensorSpec) -> str:
    return f"{spec.name}: {spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"
