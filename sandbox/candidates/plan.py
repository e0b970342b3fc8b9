"""Resolve a candidate's launch plan at concrete sizes into plain data for the GPU worker.

The worker receives only numbers and names: which function, grid, block, dynamic shared memory,
and each argument as an array reference or a typed scalar. Nothing the candidate wrote is executed
on the host; its expressions are evaluated here by ``sandbox.tasks.expr``.
"""

from __future__ import annotations

import hashlib
import json

from ..judging.result import CompileInfo
from ..tasks import expr
from ..tasks.task import Task
from .candidate import Candidate, CandidateError, split_arg

MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
              "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}
# Shared memory one block may use (static + dynamic, after opting in), by compute capability: the CUDA
# programming guide's table of technical specifications. A device's own attribute takes precedence.
SHARED_PER_BLOCK_OPTIN = {70: 96 << 10, 72: 96 << 10, 75: 64 << 10, 80: 163 << 10, 86: 99 << 10, 87: 163 << 10,
                          89: 99 << 10, 90: 227 << 10, 100: 227 << 10, 101: 227 << 10, 103: 227 << 10,
                          120: 99 << 10, 121: 99 << 10}
ARG_BYTES = {"array": 8, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float32": 4, "float64": 8}


class PlanError(ValueError):
    """The plan cannot be launched at these sizes (the message says which launch and why)."""


def shared_limit(device: dict, arch: str | None) -> int | None:
    """Bytes of shared memory one block may use: the device's opt-in limit, else the arch's known one."""
    if device.get("shared_per_block_optin"):
        return int(device["shared_per_block_optin"])
    digits = "".join(ch for ch in (arch or "").removeprefix("sm_").removeprefix("compute_") if ch.isdigit())
    return SHARED_PER_BLOCK_OPTIN.get(int(digits)) if digits else None


def resolve(task: Task, candidate: Candidate, compile_info: CompileInfo, sizes: dict[str, int],
            shared_max: int | None = None) -> dict:
    """The plan at ``sizes``; PlanError when it cannot launch there (``shared_max``: the block's shared
    memory limit in bytes, checked against static plus dynamic shared memory when given)."""
    try:
        env = {**task.env(sizes), **candidate.defines()}
    except expr.ExprError as exc:
        raise PlanError(f"sizes {sizes}: {exc}") from None
    arrays = {t.name for t in task.spec.inputs + task.spec.outputs}
    scalars = {s.name: s for s in task.spec.scalars}
    scratch = []
    for s in candidate.scratch:
        count = _eval(s.size, env, f"scratch {s.name!r} size")
        if count < 1:
            raise PlanError(f"scratch {s.name!r}: size {s.size!r} = {count} at {sizes}, expected >= 1")
        scratch.append(dict(name=s.name, dtype=s.dtype, count=count, init=s.init))
    scratch_names = {s["name"] for s in scratch}
    launches = []
    for i, launch in enumerate(candidate.launches):
        where = f"launch[{i}] ({launch.kernel})"
        grid = _dims(launch.grid, env, f"{where} grid")
        block = _dims(launch.block, env, f"{where} block")
        for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
            if not 1 <= g <= limit:
                raise PlanError(f"{where}: grid dimension {axis} = {g} at {sizes}, expected 1..{limit}")
        threads = block[0] * block[1] * block[2]
        if min(block) < 1 or threads > MAX_THREADS_PER_BLOCK:
            raise PlanError(f"{where}: block {block} at {sizes} has {threads} threads, expected 1..{MAX_THREADS_PER_BLOCK}")
        shared = _eval(launch.shared, env, f"{where} shared")
        if shared < 0:
            raise PlanError(f"{where}: shared memory {shared} bytes at {sizes}")
        resources = compile_info.kernels.get(launch.kernel)
        static = resources.static_shared if resources else 0
        if shared_max is not None and shared + static > shared_max:
            raise PlanError(f"{where}: {shared} bytes of dynamic shared memory at {sizes}"
                            + (f" plus {static} static" if static else "")
                            + f" exceed the {shared_max} bytes ({shared_max / 1024:g} KiB) one block may use on "
                            f"{compile_info.arch}")
        args = []
        for arg in launch.args:
            text, typed = split_arg(arg)
            if typed is None and (text in arrays or text in scratch_names):
                args.append(["array", text])
            elif typed is None and text in scalars:
                args.append([scalars[text].dtype, scalars[text].value])
            else:
                kind = typed or "int32"
                value = _eval(text, env, f"{where} argument {arg!r}")
                lo, hi = INT_RANGES[kind]
                if not lo <= value <= hi:
                    raise PlanError(f"{where}: argument {arg!r} = {value} does not fit {kind}; write '{text}:i64'")
                args.append([kind, value])
        _check_params(where, launch.args, args, compile_info.params.get(launch.kernel))
        func = compile_info.lowered_names.get(launch.kernel, launch.kernel)
        launches.append(dict(kernel=launch.kernel, func=func, grid=grid, block=block, shared=shared, args=args))
    return dict(launches=launches, scratch=scratch)


def _check_params(where: str, texts: tuple[str, ...], args: list, params: list[int] | None) -> None:
    """The plan's arguments against the kernel's parameters as compiled (count and size of each)."""
    if params is None:
        return
    if len(args) != len(params):
        raise PlanError(f"{where}: the plan passes {len(args)} arguments, the kernel takes {len(params)} parameters")
    for k, ((kind, _), text, size) in enumerate(zip(args, texts, params)):
        given = ARG_BYTES.get(kind)
        if given is not None and given != size:
            what = "an array (an 8-byte pointer)" if kind == "array" else f"{kind} ({given} bytes)"
            hint = f"; write '{split_arg(text)[0]}:i64' for a 64-bit integer" if kind == "int32" and size == 8 else ""
            raise PlanError(f"{where}: argument {k} {text!r} is passed as {what}, but parameter {k} of the "
                            f"kernel takes {size} bytes{hint}")


def identity(task: Task, candidate: Candidate, info: CompileInfo) -> str | None:
    """What would run on the GPU: the machine code and the launch plan at every size of the task.

    Two candidates with the same identity are one experiment (knob values can give one binary but
    different launch geometry; flags can give different binaries with the same code). None when the
    candidate did not compile or its plan cannot launch at some size.
    """
    if not info.ok or not (info.code_hash or info.cubin_sha256):
        return None
    if getattr(candidate, "format", "cuda") == "modelnew":   # a module: what runs is its source, at every size
        return hashlib.sha256(f"modelnew:{info.code_hash}".encode()).hexdigest()[:24]
    try:
        plans = [resolve(task, candidate, info, sizes) for _, sizes in task.spec.all_sizes()]
    except PlanError:
        return None
    blob = json.dumps([info.code_hash or info.cubin_sha256, plans], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _eval(text: str, env: dict[str, int], where: str) -> int:
    try:
        return expr.evaluate(text, env)
    except expr.ExprError as exc:
        raise PlanError(f"{where}: {exc}") from None


def _dims(dims: tuple[str, ...], env: dict[str, int], where: str) -> list[int]:
    values = [_eval(d, env, where) for d in dims]
    return values + [1] * (3 - len(values))


__all__ = ["resolve", "identity", "PlanError", "CandidateError"]
