"""What a run has spent so far, and the one place that decides whether it may go on."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import BudgetConfig
from ..protocols import Usage
from ..stops import Stop, StopReason


@dataclass
class Totals:
    usage: Usage = field(default_factory=Usage)
    gpu_s: float = 0.0
    wall_s: float = 0.0
    iterations: int = 0          # proposer requests answered in the model phase
    in_flight: int = 0           # requests sent and not yet answered
    evaluations: int = 0
    screened: int = 0            # configurations the built-in search screened (never entries)
    screen_gpu_s: float = 0.0    # their GPU time (also in gpu_s)
    duplicates: int = 0          # candidates skipped because an identical build was evaluated
    since_improvement: int = 0   # timed candidates since the best last improved by the plateau gain
    by_model: dict[str, Usage] = field(default_factory=dict)   # with [model.roles]: what each model spent

    def spent_by(self, model: str | None, usage: Usage) -> None:
        if model is not None:
            self.by_model[model] = self.by_model.get(model, Usage()) + usage

    @property
    def tokens(self) -> int:
        return self.usage.prompt_tokens + self.usage.completion_tokens

    def as_dict(self) -> dict:
        u = self.usage
        return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                "reasoning_tokens": u.reasoning_tokens, "cached_tokens": u.cached_tokens, "tokens": self.tokens,
                "usd": round(u.cost_usd, 6), "model_requests": u.requests, "model_seconds": round(u.seconds, 3),
                "gpu_s": round(self.gpu_s, 4), "wall_s": round(self.wall_s, 3), "iterations": self.iterations,
                "evaluations": self.evaluations, "screened": self.screened,
                "screen_gpu_s": round(self.screen_gpu_s, 4), "duplicates": self.duplicates,
                **({"models": {name: u.as_dict() for name, u in self.by_model.items()}} if self.by_model else {})}


class Budget:
    def __init__(self, config: BudgetConfig):
        self.config = config

    def exhausted(self, totals: Totals, phase: str) -> Stop | None:
        """Why the run must stop now, or None. ``phase`` is ``model``, ``search`` or ``tune``: the iteration
        limit applies to the model phase; the tuner's own evaluation limit governs the other two."""
        c = self.config
        if phase == "model" and c.iterations is not None and totals.iterations + totals.in_flight >= c.iterations:
            return StopReason.ITERATIONS.because(f"iterations: {c.iterations} reached")
        if c.tokens is not None and totals.tokens >= c.tokens:
            return StopReason.TOKENS.because(f"tokens: {totals.tokens} of {c.tokens} used")
        if c.usd is not None and totals.usage.cost_usd >= c.usd:
            return StopReason.MONEY.because(f"money: ${totals.usage.cost_usd:.4f} of ${c.usd:.4f} spent")
        if c.gpu_seconds is not None and totals.gpu_s >= c.gpu_seconds:
            return StopReason.GPU_TIME.because(f"GPU time: {totals.gpu_s:.2f} of {c.gpu_seconds:.2f} GPU-seconds used")
        if c.wall_seconds is not None and totals.wall_s >= c.wall_seconds:
            return StopReason.WALL_TIME.because(f"wall time: {totals.wall_s:.0f} of {c.wall_seconds:.0f} s used")
        if phase == "model" and c.plateau is not None and totals.since_improvement >= c.plateau:
            return StopReason.PLATEAU.because(f"plateau: {totals.since_improvement} timed candidates without a "
                                              f"{c.plateau_min_gain:.0%} gain")
        return None
