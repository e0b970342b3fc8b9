"""Why a phase of a run stopped, as a value: a ``StopReason`` that code branches on, and the sentence people read.

    stop = StopReason.ITERATIONS.because("iterations: 10 reached")
    stop.reason.failed, stop.message
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class StopReason(str, Enum):
    """Why a phase of a run stopped (``Stop.reason``)."""

    ITERATIONS = "iterations"            # the model phase's request limit
    TOKENS = "tokens"
    MONEY = "money"
    GPU_TIME = "gpu_time"
    WALL_TIME = "wall_time"
    PLATEAU = "plateau"                  # timed candidates in a row without a gain
    NOTHING_LEFT = "nothing_left"        # the proposer has nothing more to propose
    MODEL_ENDPOINT = "model_endpoint"    # the model server failed for good
    SANDBOX = "sandbox"                  # the sandbox itself failed twice on one candidate
    BASELINE = "baseline"                # the task's starting kernel is not ok: nothing to compare with
    INTERRUPTED = "interrupted"          # Ctrl-C

    def because(self, message: str) -> "Stop":
        return Stop(self, message)

    @property
    def final(self) -> bool:
        """The phase is done for good: resuming with larger limits does not re-enter it."""
        return self is StopReason.NOTHING_LEFT

    @property
    def failed(self) -> bool:
        """The run ended on a failure, not on a limit (the command exits with 1)."""
        return self in (StopReason.MODEL_ENDPOINT, StopReason.SANDBOX, StopReason.BASELINE)

    @property
    def blocks_evaluation(self) -> bool:
        """A limit that also stops evaluating proposals already received (their tokens are spent either way)."""
        return self in (StopReason.GPU_TIME, StopReason.WALL_TIME)

    @property
    def skips_tuning(self) -> bool:
        """After a model phase that stopped so, the winner's knobs are not swept."""
        return self in (StopReason.INTERRUPTED, StopReason.GPU_TIME, StopReason.WALL_TIME, StopReason.SANDBOX,
                        StopReason.BASELINE)


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    message: str                         # e.g. "iterations: 10 reached", "sandbox: the gpu worker died"

    def __str__(self) -> str:
        return self.message


INTERRUPTED = StopReason.INTERRUPTED.because("interrupted")
NOTHING_LEFT = StopReason.NOTHING_LEFT.because("the proposer has nothing more to propose")
