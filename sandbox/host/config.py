"""The sandbox's settings: which kind of sandbox to open, and the limits and budgets of one (``SandboxConfig``)."""

from __future__ import annotations

import os
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

SandboxKind = Literal["auto", "gpu", "compile-only", "fake"]
SANDBOX_KINDS: tuple[str, ...] = get_args(SandboxKind)
TorchTf32 = Literal["off", "default", "on"]
TORCH_TF32_MODES: tuple[str, ...] = get_args(TorchTf32)


class SandboxConfig(BaseModel):
    """Limits and budgets of one sandbox. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    arch: str | None = Field(None, description="Target arch (e.g. sm_90a); default: the device's, or sm_90 without one.")
    compile_workers: int = Field(default_factory=lambda: min(16, _cpus()), ge=1, le=128,
                                 description="Compile worker processes at most (default: the CPUs this process may use, "
                                 "up to 16), started as compiles run side by side (a search compiles ahead of the GPU).")
    compile_timeout_s: float = Field(120.0, gt=0, description="Wall-clock limit of one compile.")
    check_timeout_s: float = Field(120.0, gt=0, description="Wall-clock limit of the correctness stage on the GPU.")
    time_timeout_s: float = Field(240.0, gt=0, description="Wall-clock limit of the timing stage.")
    compare_timeout_s: float = Field(600.0, gt=0, description="Wall-clock limit of one reference comparison.")
    trials_per_check_size: int = Field(2, ge=1, description="Trials (fresh seeds, rotating distributions) per check size.")
    timing_budget_s: float = Field(0.25, gt=0, description="GPU time of the candidate after which rounds may stop; also "
                                   "fixes the round cap: this budget over the baseline's warm-up time, within "
                                   "[min_rounds, max_rounds], before the first round (a noisy candidate cannot extend it).")
    min_rounds: int = Field(10, ge=10, description="At least this many A/B rounds (samples per implementation).")
    max_rounds: int = Field(60, ge=10, description="At most this many A/B rounds.")
    target_ci: float = Field(0.005, ge=0, lt=1, description="After min_rounds, stop once the 95% intervals of the candidate's "
                             "and the baseline's medians are each within +-this fraction of them (0: run to the budget).")
    wall_cap_s: float = Field(60.0, gt=0, description="Stop adding rounds after this much wall time.")
    min_launches: int = Field(64, ge=0, description="The candidate is launched at least this many times in the timing stage "
                              "and at most twice as many: the count is drawn at random for each evaluation, and untimed "
                              "launches after the rounds make it up, so no count of launches tells a kernel the stage is over. "
                              "Every launch is compared with the baseline's output for the same inputs, or found to repeat, bit for "
                              "bit, an output so compared.")
    full_checks: int = Field(3, ge=0, description="Launches of the candidate in the timing stage whose outputs are also "
                             "compared in full with the reference, drawn after each launch per kind: one of the warm-up, one "
                             "of the untimed launches, the rest (at least one) of the timed rounds.")
    roofline_reject_factor: float = Field(1.5, ge=1.0, description="Reject times below the roofline floor divided by this.")
    vendor: bool = Field(True, description="Time the task's vendor implementation side by side.")
    torch_tf32: TorchTf32 = Field("off", description="TF32 in the PyTorch baselines (eager and torch.compile) of a task "
                                  "imported from PyTorch, as they are timed: off (float32 arithmetic, as the candidate "
                                  "computes); default (this PyTorch's defaults: convolutions through cuDNN in TF32, "
                                  "matmuls not; how KernelBench times eager); on (matmuls and convolutions in TF32). The "
                                  "candidate is held to the same tolerance in every mode: it is compared with the "
                                  "float64 reference, and in the timing stage with eager's outputs computed with TF32 off.")


def _cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1
