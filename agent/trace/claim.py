"""The claim a run makes beside its table, as the summary stores it (``Summary.claim``): the held-out re-check
(the winner's rows and the leaders set aside), the compute-sanitizer's section, the cost ledger and what the
built-in search covered. Each section keeps its one-paragraph text beside its figures.

A ``kernelwright-summary-2`` (or ``-1``) file kept these as flat keys (``heldout``, ``heldout_text``,
``heldout_flagged``, ``sanitize``, ``sanitize_text``, ``ledger``, ``ledger_text``, ``tuning``, ``tuning_text``);
``Claim.from_flat`` reads them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from sandbox.judging.result import Interval


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class HeldoutRow(_Record):
    """The winner at one held-out size (``agent.claims.heldout``)."""

    sizes: dict[str, int]
    status: str
    error: str = ""
    speedup: Interval | None = None            # winner vs the task's primary baseline
    start_speedup: Interval | None = None      # the run's start vs the task's baseline (when distinct)
    vendor_speedup: Interval | None = None     # winner vs the vendor library (torch.compile for a PyTorch task)
    against: str = "baseline"                  # what speedup is over: "baseline", or "eager" for a PyTorch task
    winner_ms: float | None = None
    baseline_ms: float | None = None
    flagged: bool = False
    reason: str = ""
    measured_on: str | None = None             # the GPU that timed it, on a cluster (``Result.env.measured_on``)

    @computed_field
    @property
    def measured(self) -> bool:
        return self.speedup is not None

    @model_validator(mode="before")
    @classmethod
    def _computed_in(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if k != "measured"} if isinstance(data, dict) else data

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


class FlaggedWinner(_Record):
    """A candidate that led at the task's own sizes but failed a held-out size, so it is not the winner."""

    id: str
    speedup: Interval | None = None            # at the benchmark size, vs the baseline
    note: str                                  # where it fails ("REGRESSES at 1 of 3 held-out sizes: ...")
    rows: list[HeldoutRow]


class HeldoutSection(_Record):
    """The held-out re-check: the winner's row per size and the leaders it set aside."""

    rows: list[HeldoutRow] | None = None       # the winner's; None where no winner was re-checked
    set_aside: list[FlaggedWinner] = Field(default_factory=list)
    text: str | None = None                    # the rows as a plain-text table


class SanitizedEntry(_Record):
    id: str
    status: str                          # clean, errors, failed, unavailable, skipped
    text: str


class SanitizeSection(_Record):
    """What the run's compute-sanitizer reports say (``agent.claims.sanitize``)."""

    status: str                          # the winner's report status, "disabled", "not sanitized" or "none left"
    winner: str | None
    rejected: list[str]                  # candidates rejected for sanitizer errors
    checked: list[SanitizedEntry]
    text: str                            # one line


class SavingRecord(_Record):
    """Time per call at the benchmark size: the winner against what it is compared with (``Ledger.saving``)."""

    over: str
    sizes: dict[str, int] = Field(default_factory=dict)
    reference_ms: float
    winner_ms: float
    speedup: float
    speedup_low: float
    per_call_s: float
    conservative_per_call_s: float | None = None   # None: -inf (the interval's low end is not above 0)


class UsageRecord(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    requests: int = 0


class BreakEvenRecord(_Record):
    """Calls of the kernel whose savings repay the run, per cost basis; "inf" where a call saves nothing."""

    gpu: float | str | None = None
    gpu_conservative: float | str | None = None   # at the speedup interval's low end
    wall: float | str | None = None
    wall_conservative: float | str | None = None


class LedgerRecord(_Record):
    """What the run cost, stage by stage, and the calls that repay it (``agent.claims.ledger.Ledger``)."""

    compile_s: float = 0.0
    check_gpu_s: float = 0.0
    time_gpu_s: float = 0.0
    profile_gpu_s: float = 0.0
    sanitize_gpu_s: float = 0.0
    screen_gpu_s: float = 0.0
    evaluations: int = 0
    screened: int = 0
    compiles: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    usage: UsageRecord = Field(default_factory=UsageRecord)
    wall_before_s: float = 0.0
    saving: SavingRecord | None = None
    wall_s: float = 0.0
    gpu_s: float = 0.0
    break_even_calls: BreakEvenRecord = Field(default_factory=BreakEvenRecord)
    text: str = ""                             # a few lines for the end of a run


class FinalistRecord(_Record):
    config: str
    entry: str | None = None                   # the entry it became when evaluated in full
    status: str
    screened: float | None = None              # its screened time relative to the start
    value: float | None = None


class TuningRecord(_Record):
    """What the built-in search covered from one tuned source, and why it stopped (``SourceSearch.summary``)."""

    strategy: str
    space_points: int
    dimensions: dict[str, int]
    start: str | None = None
    budget: int | None = None
    evaluations: int = 0
    screened: int = 0
    screen_failed: int = 0
    evaluated_in_full: int = 0
    finalists: list[FinalistRecord] = Field(default_factory=list)
    duplicates: int = 0
    not_compiled: int = 0
    failed_before_running: int = 0
    compile_statuses: dict[str, int] = Field(default_factory=dict)
    best: str | None = None
    best_value: float | None = None
    finished: bool = False
    stop_reason: str | None = None


class TuningSection(_Record):
    searches: list[TuningRecord]
    text: str                                  # one line per search


class Claim(_Record):
    """Everything the run's claim rests on besides the table: held-out re-check, sanitizer, cost, search coverage.
    A section is None where that step did not run."""

    heldout: HeldoutSection | None = None
    sanitizer: SanitizeSection | None = None
    ledger: LedgerRecord | None = None
    tuning: TuningSection | None = None

    @classmethod
    def from_flat(cls, data: dict) -> "Claim":
        """From the flat keys of a version-1 or -2 summary."""
        heldout = None
        if data.get("heldout") is not None or data.get("heldout_flagged"):
            heldout = HeldoutSection(rows=data.get("heldout"), set_aside=data.get("heldout_flagged") or [],
                                     text=data.get("heldout_text"))
        ledger = data.get("ledger")
        if ledger is not None:
            ledger = {**_known(LedgerRecord, ledger), "text": data.get("ledger_text") or ""}
        tuning = [_known(TuningRecord, t) for t in data.get("tuning") or []]
        return cls(heldout=heldout, sanitizer=data.get("sanitize"), ledger=ledger,
                   tuning={"searches": tuning, "text": data.get("tuning_text") or ""} if tuning else None)

    @property
    def rows(self) -> list[HeldoutRow] | None:
        """The winner's held-out rows."""
        return self.heldout.rows if self.heldout else None

    @property
    def set_aside(self) -> list[FlaggedWinner]:
        return self.heldout.set_aside if self.heldout else []

    @property
    def searches(self) -> list[TuningRecord]:
        return self.tuning.searches if self.tuning else []


def _known(model: type[BaseModel], data: dict) -> dict:
    """An older record's fields that ``model`` still has (a field since dropped was written by no reader)."""
    return {k: v for k, v in data.items() if k in model.model_fields}


FLAT_KEYS = ("heldout", "heldout_text", "heldout_flagged", "sanitize", "sanitize_text", "ledger", "ledger_text",
             "tuning", "tuning_text")
