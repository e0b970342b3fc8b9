"""Shared by the tuner, ledger, best-store and held-out tests: simulated objectives, Results with
timing written by hand, and a sandbox that answers with scripted Results."""

from __future__ import annotations

import hashlib
import math

from agent.tune.search import Space
from sandbox.candidates.candidate import Candidate
from sandbox.judging.result import CompileInfo, Cost, ImplTiming, Interval, Result, Status, Timing
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task

H200_ENV = {"gpu": "NVIDIA H200", "driver": "570.86", "cuda_runtime": "13.0", "nvrtc": "13.0", "arch": "sm_90"}


def _jitter(key, amp: float) -> float:
    h = int(hashlib.sha256(repr(key).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 1 + amp * (2 * h - 1)


def gemm_space() -> Space:
    """Tile knobs with interactions, an infeasible region, and a register cap that spills."""
    dims = [("BM", (32, 64, 128, 256)), ("BN", (32, 64, 128, 256)), ("BK", (8, 16, 32)), ("TM", (2, 4, 8)),
            ("TN", (2, 4, 8)), ("maxreg", (0, 32, 64, 128))]
    return Space(tuple(n for n, _ in dims), tuple(c for _, c in dims))


def gemm_time(space: Space, point) -> float:
    v = space.decode(point)
    threads = (v["BM"] // v["TM"]) * (v["BN"] // v["TN"])
    if threads > 1024 or threads < 32 or (v["BM"] + v["BN"]) * v["BK"] * 4 > 48 * 1024:
        return math.inf
    t = 10.0
    t *= 1 + 0.6 * abs(math.log2(v["BM"] * v["BN"] / (128 * 128))) / 4
    t *= 1 + 0.15 * abs(math.log2(v["BK"] / 16))
    t *= 1 + 0.3 * abs(math.log2(v["TM"] * v["TN"] / 32)) / 2
    t *= 1 + 0.2 * abs(math.log2(threads / 256)) / 2
    regs = v["TM"] * v["TN"] + v["TM"] + v["TN"] + 20
    if v["maxreg"] and regs > v["maxreg"]:
        t *= 1 + 0.5 * (regs - v["maxreg"]) / v["maxreg"]
    return t * _jitter(point, 0.01)


def basins_space() -> Space:
    return Space(tuple(f"k{i}" for i in range(5)), tuple(tuple(range(5)) for _ in range(5)))


def basins_time(space: Space, point) -> float:
    """Two basins; the better one is narrower and far from the start."""
    a = sum((x - 1) ** 2 for x in point)
    b = 1.5 * sum((x - 4) ** 2 for x in point)
    return min(10 + a, 9 + b) * _jitter(point, 0.02)


def timed_result(task: Task, candidate: Candidate, cand_ms: float, base_ms: float, low: float | None = None,
                 high: float | None = None, sizes: dict | None = None, env: dict | None = None,
                 vendor: tuple[float, float, float] | None = None, gpu_s: float = 0.0) -> Result:
    """An ``ok`` Result whose A/B timing says ``candidate`` took ``cand_ms`` and the baseline ``base_ms``."""
    value = base_ms / cand_ms
    low = value * 0.99 if low is None else low
    high = value * 1.01 if high is None else high
    impls = {"candidate": ImplTiming(samples_ms=[cand_ms] * 10, median_ms=cand_ms,
                                     ci_ms=Interval(value=cand_ms, low=cand_ms, high=cand_ms), pct_of_roofline=50.0),
             "baseline": ImplTiming(samples_ms=[base_ms] * 10, median_ms=base_ms,
                                    ci_ms=Interval(value=base_ms, low=base_ms, high=base_ms))}
    speedup = {"baseline": Interval(value=value, low=low, high=high)}
    if vendor:
        speedup["vendor"] = Interval(value=vendor[0], low=vendor[1], high=vendor[2])
    timing = Timing(sizes=dict(sizes or task.spec.sizes.benchmark), rounds=10, l2_flush_bytes=0, rotating_sets=2,
                    impls=impls, speedup=speedup, faster_than={k: s.low > 1.0 for k, s in speedup.items()})
    return Result(status=Status.ok, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                  candidate_key=candidate.key, knobs=candidate.defines(), flags=list(candidate.flags),
                  compile=CompileInfo(ok=True, arch="sm_90", nvrtc_version="13.0", options=[]), timing=timing,
                  env=dict(H200_ENV if env is None else env), cost=Cost(time_gpu_s=gpu_s))


def failed_result(task: Task, candidate: Candidate, status: Status, error: str = "scripted failure") -> Result:
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                  candidate_key=candidate.key, error=error, env=dict(H200_ENV))


class ScriptedSandbox(Sandbox):
    """A real sandbox implementation whose evaluations are answered by ``script(task, candidate, sizes)``; what it
    lacks (profiling, screening) it has from the protocol."""

    kind = "fake"

    def __init__(self, script):
        self.script = script
        self.device = dict(H200_ENV)
        self.calls: list[tuple[str, dict]] = []

    def compile(self, task: Task, candidate: Candidate) -> Result:
        return Result(status=Status.compiled, task=task.name, task_fingerprint=task.fingerprint,
                      candidate=candidate.label, candidate_key=candidate.key,
                      compile=CompileInfo(ok=True, arch="sm_90", nvrtc_version="13.0", options=[]))

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict | None = None, timing: bool = True) -> Result:
        sizes = dict(sizes or task.spec.sizes.benchmark)
        self.calls.append((candidate.label, sizes))
        return self.script(task, candidate, sizes)

    def close(self) -> None:
        pass
