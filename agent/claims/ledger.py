"""The cost ledger: what a run spent (GPU-seconds per stage, compile seconds, tokens, money, wall
time), what its winner saves per call at the benchmark size, and how many calls pay the run back.

    ledger = Ledger()
    ledger.add_result(result)        # every evaluation (compile, check, time, profile seconds)
    ledger.add_compile(result)       # compiles run outside evaluations (the tuner's dedupe)
    ledger.add_screening(n, gpu_s)   # configurations screened (the built-in search), their GPU-seconds
    ledger.add_usage(usage)          # every model request
    ledger.record_winner(best.result)
    ledger.break_even_calls()        # GPU-seconds spent / GPU-seconds saved per call
    print(ledger.summary()); trace["ledger"] = ledger.to_dict()

Break-even is ``None`` while no winner was timed, and ``inf`` when the winner saves nothing. The
conservative variant uses the low end of the winner's speedup interval instead of its median.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields

from sandbox.judging.result import Result

from ..protocols import Usage

BASES = ("gpu", "wall")


@dataclass
class Saving:
    """Time per call at the benchmark size: the winner against what it is compared with."""

    over: str
    sizes: dict[str, int]
    reference_ms: float
    winner_ms: float
    speedup: float
    speedup_low: float

    @property
    def per_call_s(self) -> float:
        return (self.reference_ms - self.winner_ms) / 1e3

    @property
    def conservative_per_call_s(self) -> float:
        """What a call saves if the true speedup is the interval's low end (negative below 1.0)."""
        if self.speedup_low <= 0:
            return -math.inf
        return self.reference_ms * (1 - 1 / self.speedup_low) / 1e3


@dataclass
class Ledger:
    compile_s: float = 0.0
    check_gpu_s: float = 0.0
    time_gpu_s: float = 0.0
    profile_gpu_s: float = 0.0
    sanitize_gpu_s: float = 0.0
    screen_gpu_s: float = 0.0
    evaluations: int = 0
    screened: int = 0
    compiles: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    wall_before_s: float = 0.0          # wall time of earlier sessions of a resumed run
    saving: Saving | None = None
    _started: float = field(default_factory=time.monotonic, repr=False)
    _stopped: float | None = field(default=None, repr=False)

    # ---- recording ---------------------------------------------------------------------------

    def add_result(self, result: Result) -> None:
        c = result.cost
        self.compile_s += c.compile_s
        self.check_gpu_s += c.check_gpu_s
        self.time_gpu_s += c.time_gpu_s
        self.profile_gpu_s += c.profile_gpu_s
        self.sanitize_gpu_s += c.sanitize_gpu_s
        self.evaluations += 1
        self.statuses[result.status.value] = self.statuses.get(result.status.value, 0) + 1

    def add_compile(self, result: Result) -> None:
        """A compile outside an evaluation: only its compile seconds count."""
        self.compile_s += result.cost.compile_s
        self.compiles += 1

    def add_screening(self, configurations: int, gpu_s: float) -> None:
        """Configurations screened (measured cheaply in batches, never results) and the GPU time it took."""
        self.screened += configurations
        self.screen_gpu_s += gpu_s

    def add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    def record_winner(self, result: Result, over: str = "baseline") -> Saving | None:
        """Take the saving per call from the winner's A/B timing against ``over``; None if untimed."""
        t = result.timing
        s = result.speedup(over)
        if t is not None and over == "baseline":
            over = t.primary  # the task's starting kernel, or PyTorch eager
        if t is None or s is None or over not in t.impls or "candidate" not in t.impls:
            self.saving = None
            return None
        self.saving = Saving(over=over, sizes=dict(t.sizes), reference_ms=t.impls[over].median_ms,
                             winner_ms=t.impls["candidate"].median_ms, speedup=s.value, speedup_low=s.low)
        return self.saving

    def stop(self) -> None:
        """Freeze the wall clock (the run is over)."""
        if self._stopped is None:
            self._stopped = time.monotonic()

    # ---- totals ------------------------------------------------------------------------------

    @property
    def gpu_s(self) -> float:
        return self.screen_gpu_s + self.check_gpu_s + self.time_gpu_s + self.profile_gpu_s + self.sanitize_gpu_s

    @property
    def wall_s(self) -> float:
        end = self._stopped if self._stopped is not None else time.monotonic()
        return self.wall_before_s + end - self._started

    def cost_s(self, basis: str = "gpu") -> float:
        if basis not in BASES:
            raise ValueError(f"unknown cost basis {basis!r} (expected one of: {', '.join(BASES)})")
        return self.gpu_s if basis == "gpu" else self.wall_s

    def break_even_calls(self, basis: str = "gpu", conservative: bool = False,
                         cost_s: float | None = None, saving_s: float | None = None) -> float | None:
        """Calls of the kernel whose savings repay the tuning: cost / saving per call.

        ``cost_s`` defaults to this ledger's cost on ``basis`` (GPU-seconds or wall seconds);
        ``saving_s`` to the recorded winner's saving (its interval's low end if ``conservative``).
        None when there is no saving to divide by; inf when the saving is zero or negative.
        """
        cost = self.cost_s(basis) if cost_s is None else cost_s
        if saving_s is None:
            if self.saving is None:
                return None
            saving_s = self.saving.conservative_per_call_s if conservative else self.saving.per_call_s
        if saving_s <= 0:
            return math.inf
        return cost / saving_s

    # ---- output ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        out["usage"] = asdict(self.usage)
        out["saving"] = asdict(self.saving) if self.saving else None
        out["wall_s"] = self.wall_s
        out["gpu_s"] = self.gpu_s
        if self.saving:
            out["saving"].update(per_call_s=self.saving.per_call_s,
                                 conservative_per_call_s=self.saving.conservative_per_call_s)
        out["break_even_calls"] = {f"{basis}{'_conservative' if cons else ''}": _json_number(
            self.break_even_calls(basis, cons)) for basis in BASES for cons in (False, True)}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Ledger":
        """Resume from ``to_dict`` output: the earlier wall time carries over."""
        known = {f.name for f in fields(cls) if not f.name.startswith("_")}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["usage"] = Usage(**data.get("usage", {}))
        kwargs["saving"] = Saving(**{k: v for k, v in data["saving"].items() if k in {f.name for f in fields(Saving)}}) \
            if data.get("saving") else None
        kwargs["wall_before_s"] = data.get("wall_s", data.get("wall_before_s", 0.0))
        return cls(**kwargs)

    def summary(self) -> str:
        """A few lines for the end of a run."""
        screen = f"screen {self.screen_gpu_s:.1f}, " if self.screened else ""
        lines = [f"cost: GPU {self.gpu_s:.1f} s ({screen}check {self.check_gpu_s:.1f}, time {self.time_gpu_s:.1f}, "
                 f"profile {self.profile_gpu_s:.1f}" + (f", sanitize {self.sanitize_gpu_s:.1f}" if self.sanitize_gpu_s else "")
                 + f"), compile {self.compile_s:.1f} s, wall {self.wall_s:.1f} s, "
                 + (f"{self.screened} configurations screened, " if self.screened else "")
                 + f"{self.evaluations} evaluations" + (f" + {self.compiles} compiles" if self.compiles else "")]
        u = self.usage
        if u.requests:
            lines.append(f"model: {u.requests} requests, {u.prompt_tokens} prompt + {u.completion_tokens} completion "
                         f"tokens, ${u.cost_usd:.4f}")
        s = self.saving
        if s is None:
            lines.append("saving per call: unknown (no timed winner)")
            return "\n".join(lines)
        size = ",".join(f"{k}={v}" for k, v in s.sizes.items())
        lines.append(f"saving per call at {size}: {s.per_call_s * 1e6:.2f} us ({s.reference_ms:.4g} ms {s.over} -> "
                     f"{s.winner_ms:.4g} ms winner, {s.speedup:.3f}x, low end {s.speedup_low:.3f}x)")
        lines.append(f"break-even: {_calls(self.break_even_calls('gpu'))} calls to repay the GPU time "
                     f"({_calls(self.break_even_calls('gpu', True))} at the interval's low end), "
                     f"{_calls(self.break_even_calls('wall'))} calls to repay the wall time")
        return "\n".join(lines)


def _calls(n: float | None) -> str:
    if n is None:
        return "unknown"
    if math.isinf(n):
        return "never (no saving)"
    return f"{math.ceil(round(n, 6)):,}"   # round first: 90 / 4e-4 is 225000.00000000003


def _json_number(x: float | None):
    """JSON has no infinity: inf becomes the string "inf"."""
    return "inf" if x is not None and math.isinf(x) else x
