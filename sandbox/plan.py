"""Resolve a candidate's launch plan at concrete sizes into plain data for the GPU worker.

The worker receives only numbers and names: which function, grid, block, dynamic shared memory,
and each argument as an array reference or a typed scalar. Nothing the candidate wrote is executed
on the host; its expressions are evaluated here by ``sandbox.expr``.
"""

from __future__ import annotations

import hashlib
import json

from . import expr
from .candidate import Candidate, CandidateError, split_arg
from .result import CompileInfo
from .task import Task

MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
              "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}


class PlanError(ValueError):
    """The plan cannot be launched at these sizes (the message says which launch and why)."""


def resolve(task: Task, candidate: Candidate, compile_info: CompileInfo, sizes: dict[str, int]) -> dict:
    env = {**sizes, **candidate.defines()}
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
        func = compile_info.lowered_names.get(launch.kernel, launch.kernel)
        launches.append(dict(kernel=launch.kernel, func=func, grid=grid, block=block, shared=shared, args=args))
    return dict(launches=launches, scratch=scratch)


def identity(task: Task, candidate: Candidate, info: CompileInfo) -> str | None:
    """What would run on the GPU: the machine code and the launch plan at every size of the task.

    Two candidates with the same identity are one experiment (knob values can give one binary but
    different launch geometry; flags can give different binaries with the same code). None when the
    candidate did not compile or its plan cannot launch at some size.
    """
    if not info.ok or not (info.code_hash or info.cubin_sha256):
        return None
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
