"""A kernelwright candidate tuned live by Kernel Tuner (https://github.com/KernelTuner/kernel_tuner), in this
process with its CuPy backend, over the very same knob space: for bench/vs_kernel_tuner.py.

``spec(task, candidate)`` turns the candidate's knobs and launch plan into Kernel Tuner's terms: every knob is a
tunable parameter (Kernel Tuner writes it as a ``#define``, as our compile writes ``-D``); the plan's grid,
evaluated at the benchmark size for each configuration, is Kernel Tuner's problem size with a divisor of 1; a
block dimension that is one knob is named as a block size, and one that is an expression of knobs becomes a
parameter of its own, tied to the expression by a restriction, so that Kernel Tuner's restricted space holds
one configuration per configuration of ours (``configurations`` counts both). Supported: one launch, arrays
and integer scalars as arguments, no dynamic shared memory, no scratch buffers, no template-id kernel names.

Needs the optional extra: ``pip install -e ".[kerneltuner]"``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
import time
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from sandbox.candidates.candidate import Candidate, split_arg
from sandbox.tasks import expr
from sandbox.tasks.task import Task

AXES = ("x", "y", "z")


class Unsupported(ValueError):
    """A candidate whose plan Kernel Tuner cannot be given as it is (the message says why)."""


@dataclass
class KTSpec:
    kernel_name: str
    source: str
    tune_params: dict[str, list]
    block_size_names: list[str]
    restrictions: Callable[[dict], bool] | None   # params -> allowed (the ties of block sizes to their knobs)
    problem_size: Callable[[dict], tuple[int, ...]]
    args: list[tuple[str, object]]        # ("array", name), or (numpy dtype, the scalar's value)
    knobs: tuple[str, ...]

    def knob_values(self, params: dict) -> dict[str, int]:
        return {k: int(params[k]) for k in self.knobs}


def spec(task: Task, candidate: Candidate) -> KTSpec:
    if len(candidate.launches) != 1:
        raise Unsupported("Kernel Tuner tunes one kernel: the plan has several launches")
    if candidate.scratch:
        raise Unsupported("the plan has scratch buffers")
    launch = candidate.launches[0]
    if "<" in launch.kernel:
        raise Unsupported("a template-id kernel name")
    sizes = task.env(task.spec.sizes.benchmark)
    if _eval(launch.shared, sizes, candidate.knob_values) != 0:
        raise Unsupported("dynamic shared memory")
    knobs = tuple(candidate.knobs)
    tune_params = {k: list(v) for k, v in candidate.knobs.items()}
    block_names, restrictions = [], []
    for axis, text in zip(AXES, launch.block):
        if text.strip() in knobs:
            block_names.append(text.strip())
            continue
        name = f"block_size_{axis}"
        values = sorted({_eval(text, sizes, dict(zip(knobs, combo)))
                         for combo in itertools.product(*(candidate.knobs[k] for k in knobs))})
        tune_params[name] = values
        block_names.append(name)
        restrictions.append((name, text))
    arrays = {s.name for s in (*task.spec.inputs, *task.spec.outputs)}
    scalars = {s.name: s for s in task.spec.scalars}
    args = []
    for arg in launch.args:
        text, kind = split_arg(arg)
        if text in arrays:
            args.append(("array", text))
        elif text in scalars:
            args.append((scalars[text].dtype, scalars[text].value))
        elif any(re.search(rf"\b{k}\b", text) for k in knobs):
            raise Unsupported(f"argument {arg!r} depends on a knob")
        else:
            args.append((kind or "int32", _eval(text, sizes, {})))

    def problem_size(params: dict) -> tuple[int, ...]:
        env = {k: int(params[k]) for k in knobs}
        return tuple(_eval(g, sizes, env) for g in launch.grid)

    def allowed(params: dict) -> bool:
        env = {k: int(params[k]) for k in knobs}
        return all(params[name] == _eval(text, sizes, env) for name, text in restrictions)

    return KTSpec(launch.kernel, candidate.source, tune_params, block_names, allowed if restrictions else None,
                  problem_size, args, knobs)


def restricted(s: KTSpec, valid: Callable[[dict], bool] | None) -> KTSpec:
    """``s`` with a further restriction (the configurations a kernel's static_asserts reject, which Kernel
    Tuner would otherwise compile and stop on)."""
    if valid is None:
        return s
    ties = s.restrictions

    def allowed(params: dict) -> bool:  # a def, not a lambda: Kernel Tuner parses a lambda's source
        return valid(params) and (ties is None or ties(params))

    return replace(s, restrictions=allowed)


def _eval(text: str, sizes: dict, knobs: dict) -> int:
    return expr.evaluate(text, {**sizes, **knobs})


def configurations(s: KTSpec, max_threads: int = 1024) -> int:
    """Configurations in Kernel Tuner's restricted space (built on the CPU, as tune_kernel builds it)."""
    from kernel_tuner.searchspace import Searchspace

    return Searchspace(s.tune_params, s.restrictions, max_threads, block_size_names=s.block_size_names).size


@dataclass
class KTRun:
    seconds: float          # tune_kernel's wall time
    tried: int              # configurations it compiled or tried (compile failures included)
    failed: int
    best: dict | None       # knob values of the fastest
    best_ms: float | None   # its mean time over Kernel Tuner's iterations


@contextlib.contextmanager
def _whole_uuid():
    """CuPy reads a GPU's 16-byte UUID as a C string, so a UUID with a zero byte comes back cut short, and Kernel
    Tuner's CuPy backend (which only records it) then fails with "bytes is not a 16-char string". While Kernel
    Tuner starts, the device properties it reads carry the UUID padded back to 16 bytes (the bytes after the
    first zero are lost: a record, not an identity)."""
    import cupy

    runtime = cupy.cuda.runtime
    real = runtime.getDeviceProperties

    def padded(device):
        props = real(device)
        uuid = props.get("uuid")
        if isinstance(uuid, bytes) and len(uuid) < 16:
            props = {**props, "uuid": uuid.ljust(16, b"\0")}
        return props

    runtime.getDeviceProperties = padded
    try:
        yield
    finally:
        runtime.getDeviceProperties = real


def tune(task: Task, s: KTSpec, strategy: str = "brute_force", iterations: int = 7,
         inputs: Callable[[], dict[str, np.ndarray]] | None = None) -> KTRun:
    """``tune_kernel`` with the CuPy backend over ``s``; ``inputs()`` gives the host arrays of the inputs and
    outputs by name (default: zeros)."""
    from kernel_tuner import tune_kernel

    sizes = task.env(task.spec.sizes.benchmark)
    arrays = inputs() if inputs else {}
    for spec_ in (*task.spec.inputs, *task.spec.outputs):
        if spec_.name not in arrays:
            shape = tuple(expr.evaluate(d, sizes) for d in spec_.shape)
            arrays[spec_.name] = np.zeros(shape, dtype=spec_.dtype)
    arguments = [arrays[v] if kind == "array" else np.dtype(kind).type(v) for kind, v in s.args]
    t0 = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _whole_uuid():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(s.kernel_name, s.source, s.problem_size, arguments, s.tune_params,
                                 grid_div_x=[1], grid_div_y=[1], grid_div_z=[1], restrictions=s.restrictions,
                                 block_size_names=s.block_size_names, lang="CUPY", compiler_options=["-std=c++17"],
                                 iterations=iterations, strategy=strategy, quiet=True, verbose=False)
    seconds = time.perf_counter() - t0
    timed = [r for r in results if isinstance(r.get("time"), (int, float)) and math.isfinite(r["time"])]
    best = min(timed, key=lambda r: r["time"]) if timed else None
    return KTRun(seconds, len(results), len(results) - len(timed), s.knob_values(best) if best else None,
                 best["time"] if best else None)
