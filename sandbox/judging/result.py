"""The result record of an evaluation: a status plus everything needed to explain it.

Expected failures are values (a status), never exceptions. The record is JSON-serializable and
carries ``schema_version``; bump it when a field changes meaning.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .environment import Environment, Number, Recorded
from .sanitizer_report import SanitizeReport

SCHEMA_VERSION = 1


class Status(str, Enum):
    """What became of a candidate: ``ok`` is correct everywhere it was checked, and timed."""

    ok = "ok"                        # correct everywhere it was checked, and timed
    compiled = "compiled"            # compile-only mode: compiled, never run
    compile_error = "compile_error"  # NVRTC refused the source; the log says why
    launch_error = "launch_error"    # the launch plan could not be launched (config, resources)
    crashed = "crashed"              # a sticky CUDA error (illegal address, trap...) or the worker died
    timeout = "timeout"              # a stage ran past its wall-clock limit; its process group was killed
    wrong = "wrong"                  # an output differs from the reference beyond tolerance
    rejected = "rejected"            # a rule was broken: input mutated, guard band hit, faster than physics...
    too_large = "too_large"          # the task's size does not fit in the device's free memory (the bytes in the error)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KernelResources(_Record):
    """What ptxas reports for one kernel."""

    name: str
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    static_shared: int = 0
    constant: int = 0
    barriers: int = 0


class ApproxInstruction(_Record):
    """An approximate instruction in the compiled code (``sandbox.candidates.approx_ptx``)."""

    function: str                        # the kernel or device function, as the candidate names it where known
    instruction: str                     # "ex2.approx.ftz.f32", ...
    line: int | None = None              # the candidate's source line, where -lineinfo gives one
    source: str | None = None            # traced (``approx_ptx.trace``): the library function holding it; None: own


class CompileInfo(_Record):
    ok: bool
    arch: str
    nvrtc_version: str
    options: list[str]
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    cubin_sha256: str | None = None      # the bytes NVRTC wrote (they include its command line)
    code_hash: str | None = None         # the machine code alone: equal for equal code from any compile
    global_bytes: int = 0
    kernels: dict[str, KernelResources] = Field(default_factory=dict)
    lowered_names: dict[str, str] = Field(default_factory=dict)
    params: dict[str, list[int]] = Field(default_factory=dict)  # plan kernel name -> bytes of each parameter
    approx: list[ApproxInstruction] | None = None  # approximate instructions in the PTX (None: not read)
    approx_traced: list[ApproxInstruction] | None = None  # the same traced to their functions (None: not traced)
    trace_error: str = ""                # why a compile with approximate instructions could not be traced

    def warnings(self) -> list[str]:
        """The compiler's warnings (NVRTC's and ptxas'), each with the source line and caret NVRTC prints under
        it: a compile that succeeded may still have ignored what the code asked for (``#pragma unroll 0``)."""
        out: list[str] = []
        lines = self.log.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if _WARNING.search(line):
                block = [line]
                while i + 1 < len(lines) and lines[i + 1].startswith((" ", "\t")) and lines[i + 1].strip():
                    i += 1
                    block.append(lines[i])
                out.append("\n".join(block))
            i += 1
        return out


_WARNING = re.compile(r"\bwarning\b( #\S+)?\s*:|^ptxas warning", re.IGNORECASE)


class Mismatch(_Record):
    index: list[int]
    got: float | str
    expected: float | str


class Bias(_Record):
    """The signed error of one output in one check, in units of each element's tolerance (atol + rtol |expected|),
    against the float64 reference: its mean with a 95% interval, the same signed toward the reference's magnitude
    (``away``: negative where the output errs toward zero), and the mean of its absolute value."""

    n: int
    mean: float
    low: float
    high: float
    away: float
    away_low: float
    away_high: float
    mean_abs: float

    @classmethod
    def of(cls, stats: dict) -> "Bias":
        """From ``compare.bias_stats``'s numbers."""
        z = 1.96
        return cls(n=stats["n"], mean=stats["mean"], low=stats["mean"] - z * stats["mean_se"],
                   high=stats["mean"] + z * stats["mean_se"], away=stats["away"],
                   away_low=stats["away"] - z * stats["away_se"], away_high=stats["away"] + z * stats["away_se"],
                   mean_abs=stats["mean_abs"])


class Check(_Record):
    """One correctness trial of one output at one size."""

    sizes: dict[str, int]
    label: str                           # "check[2]", "benchmark", "timed round 7", ...
    output: str
    distribution: str
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    first_mismatch: Mismatch | None = None
    note: str = ""
    seed: int | None = None              # the trial's input seed: its draw replays from it (``sandbox.tasks.inputs``)
    bias: Bias | None = None             # the signed error (None: an exact output, or none compared)


class Interval(_Record):
    """A value with its 95% interval [low, high]."""

    value: float
    low: float
    high: float


class CarryOver(_Record):
    """The primary baseline's time where it opened a round right after the candidate ended the round before, over
    its time where it opened one after anything else (itself, another baseline), with its 95% interval: above 1,
    the candidate left the device slower for the launch that follows it. ``flagged``: the interval lies above 1
    and the effect is at least ``CARRY_OVER_FLAG``."""

    value: float
    low: float
    high: float
    after_candidate: int      # rounds the baseline opened right after the candidate's launch
    after_other: int          # rounds it opened after another implementation's
    flagged: bool


CARRY_OVER_FLAG = 1.02


class ImplTiming(_Record):
    """Timing of one implementation (candidate, baseline or vendor) at the benchmark size."""

    samples_ms: list[float]
    median_ms: float
    ci_ms: Interval
    wall_median_ms: float | None = None
    pct_of_roofline: float | None = None


class BelowRoofline(_Record):
    """The flag of a candidate timed below the task's naive roofline floor (``sandbox.host.floor``): the evidence,
    and the stronger check it triggered. A flag, never a verdict: an algebraic rewrite does less work than the
    naive FLOP and byte counts assume."""

    median_ms: float                    # the candidate's median time
    floor_ms: float                     # the naive roofline floor: max(bytes / bandwidth, FLOPs / peak)
    factor: float                       # the time is below floor_ms / factor
    flops: int                          # the task's FLOP count at the benchmark size (naive computation)
    bytes: int                          # the task's byte count at the benchmark size
    bandwidth_bytes_per_s: float | None = None
    peak_flops_per_s: float | None = None
    written_floor_ms: float | None = None   # the bytes the outputs must be written with, at the copy bandwidth
    rechecked: list[str] = Field(default_factory=list)   # the stronger check's trials (labels), all passed
    note: str = ""

    def line(self) -> str:
        text = (f"below the naive roofline: {self.median_ms:.4g} ms < floor {self.floor_ms:.4g} ms / {self.factor:g} "
                f"({self.flops:,} FLOP, {self.bytes:,} bytes at the measured ceilings)")
        if self.rechecked:
            text += f"; a stronger check passed ({len(self.rechecked)} more trials, held-out sizes included)"
        return text


class Timing(_Record):
    """The timing stage at the benchmark size: each implementation's times and the speedups over them."""

    sizes: dict[str, int]
    rounds: int
    round_cap: int | None = None                          # rounds could not go past this (fixed before the first)
    candidate_launches: int | None = None                 # launches of the candidate in the stage, each checked
    repeated_launches: int | None = None                  # of them, those whose outputs repeated, bit for bit, ones
                                                          # compared with the baseline's on the same inputs (untimed)
    warm_up_launches: dict[str, int] | None = None        # each implementation's warm-up launches (a baseline or
                                                          # vendor timed by the worker just before: the minimum, 3)
    l2_flush_bytes: int
    rotating_sets: int
    set_of_round: list[int] | None = None                 # the rotating set of each round: intervals resample these
    impls: dict[str, ImplTiming]                         # "candidate", "baseline", "vendor"
    speedup: dict[str, Interval] = Field(default_factory=dict)   # baseline/vendor time over candidate time
    faster_than: dict[str, bool] = Field(default_factory=dict)   # the interval clears 1.0
    roofline_ms: float | None = None
    bound: str | None = None                              # "memory" or "compute" by the task's counts
    primary: str = "baseline"                             # what scores rank against: the task's starting kernel,
                                                          # or PyTorch "eager" for a task that has none
    unavailable: dict[str, str] = Field(default_factory=dict)  # baselines that could not be timed, and why
    torch_tf32: str | None = None                         # the TF32 mode PyTorch eager/compile were timed in
                                                          # (off, default, on); None: no PyTorch baseline
    carry_over: CarryOver | None = None                   # None: too few rounds of either kind (3 each)
    below_roofline: BelowRoofline | None = None           # flagged: faster than the naive counts allow


class Cost(_Record):
    compile_s: float = 0.0
    check_gpu_s: float = 0.0
    time_gpu_s: float = 0.0
    profile_gpu_s: float = 0.0
    sanitize_gpu_s: float = 0.0
    reference_s: float = 0.0    # the trusted worker regenerating inputs, computing the reference, comparing
    wall_s: float = 0.0

    @property
    def gpu_s(self) -> float:
        return self.check_gpu_s + self.time_gpu_s + self.profile_gpu_s + self.sanitize_gpu_s


class ProfiledKernel(Recorded):
    """One profiled launch of the plan (``sandbox.host.profiler.kernels_from``)."""

    launch: int = Field(description="Its position in the plan.")
    kernel: str = Field(description="The kernel as the plan names it.")
    ncu_name: str = Field(description="The kernel as ncu names it (a lowered or demangled name).")
    share_pct: float = Field(description="Its share of the profiled time.")
    summary: dict[str, Any] = Field(default_factory=dict, description="Its counters as one flat mapping "
                                    "(``sandbox.profile.counters.summarize``: names there, stalls and occupancy "
                                    "limits as nested mappings); what the diagnosis reads.")
    rules: list[dict[str, Any]] = Field(default_factory=list, description="ncu's rule results: section, rule, type, "
                                        "message, estimated speedup (``sandbox.profile.ncu``).")


class ProfileTiming(Recorded):
    """The evaluated result's timing, as the diagnosis compared it with the counters."""

    median_ms: float
    pct_of_roofline: float | None = None


class Profile(Recorded):
    """``Result.profile``: Nsight Compute's profile of the candidate and the diagnosis made of it
    (``sandbox.host.profiler``). Without counters (``unavailable``, ``failed``, ``skipped``) ``reason`` says
    why. Traces written before ``diagnosis`` held the text (it held the dict, and ``diagnosis_text`` the text)
    load with the text in ``diagnosis`` and the dict in ``diagnosis_data``."""

    status: str = Field(description="ok, unavailable (no GPU, no ncu, no permission), failed or skipped.")
    reason: str = Field("", description="Why there are no counters (host folders redacted).")
    notice: str = Field("", description="The reason, the first time a sandbox found profiling unavailable.")
    kernels: list[ProfiledKernel] = Field(default_factory=list, description="Per launch, in plan order.")
    seconds: float = Field(0.0, description="Wall time of the ncu runs (also in Cost.profile_gpu_s).")
    detail: str = Field("", description="ncu's last messages, for a failed profile.")
    tool: str | None = Field(None, description="ncu's version line.")
    messages: list[str] = Field(default_factory=list, description="ncu's own messages (at most 10).")
    stage_seconds: dict[str, Number] = Field(default_factory=dict, description="The profiling run and the page imports.")
    pages: str | None = Field(None, description="Where the numbers came from: printed by the run, or imported.")
    program_seconds: dict[str, Number] = Field(default_factory=dict, description="The profiled program's own parts.")
    started_ahead: bool = Field(False, description="Profiled by a run started ahead of the request (ncu, the "
                                "program and its CUDA context already up: ``seconds`` holds no start-up).")
    sizes: dict[str, int] = Field(default_factory=dict, description="The sizes profiled.")
    timing: ProfileTiming | None = None
    diagnosis: str = Field("", description="The diagnosis as text: Entry.diagnosis, and what prompts show.")
    diagnosis_data: dict[str, Any] = Field(default_factory=dict, description="The same as data: bound, roofline, "
                                           "issues, changes, resources (``sandbox.profile.diagnosis``).")

    @model_validator(mode="before")
    @classmethod
    def _text_in_diagnosis(cls, data: Any) -> Any:
        """A profile of those older traces: the dict moves to ``diagnosis_data``, the text to ``diagnosis``."""
        if isinstance(data, dict) and isinstance(data.get("diagnosis"), dict):
            data = dict(data)
            data["diagnosis_data"] = data.pop("diagnosis")
            data["diagnosis"] = data.pop("diagnosis_text", "")
        return data

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def note(self) -> str:
        """Why the candidate has no counters, in one phrase; "" for a profile that has them."""
        return "" if self.ok else f"not profiled ({self.status}: {self.reason})"


class Verdict(_Record):
    """One check of a format's own ways to cheat (a ModelNew solution's: docs/judge.md), with its evidence."""

    check: str                            # no_custom_kernel, silent_fallback, inputs_written, state_across_calls,
                                          # outside_timed_region, precision, sizes
    outcome: str                          # "pass", "flag" (holds up under KernelBench's rule, not ours), "fail",
                                          # "not run"
    line: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class Result(_Record):
    """A sandbox's verdict on one candidate: status, checks, timing with 95% intervals, environment, cost."""

    schema_version: int = SCHEMA_VERSION
    status: Status
    task: str
    task_fingerprint: str
    candidate: str
    candidate_key: str
    knobs: dict[str, int] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    error: str = ""                       # one line: what went wrong, for humans and for the model
    detail: str = ""                      # longer text: compiler log excerpt, CUDA error, reasons
    compile: CompileInfo | None = None
    checks: list[Check] = Field(default_factory=list)
    timing: Timing | None = None
    profile: Profile | None = None         # Nsight Compute's profile and diagnosis, where it ran
    sanitize: SanitizeReport | None = None   # compute-sanitizer's verdict, where it ran (a run's winners)
    env: Environment = Field(default_factory=Environment)   # what produced it: device, software, clocks, ceilings
    cost: Cost = Field(default_factory=Cost)
    verdicts: list[Verdict] = Field(default_factory=list)   # a ModelNew solution's format checks, one line each

    @property
    def ok(self) -> bool:
        return self.status is Status.ok

    def speedup(self, over: str = "baseline") -> Interval | None:
        """The speedup over a named implementation; ``baseline`` is the task's primary one: its starting kernel,
        or PyTorch eager for a task imported from PyTorch without one."""
        if self.timing is None:
            return None
        return self.timing.speedup.get(self.timing.primary if over == "baseline" else over)

    def record_sanitize(self, report: SanitizeReport) -> None:
        """Keep compute-sanitizer's report; errors make the result ``rejected``: a kernel with a race or an
        out-of-bounds access is not a winner, however fast."""
        self.sanitize = report
        self.cost.sanitize_gpu_s = report.held_s
        if report.status == "errors":
            self.status = Status.rejected
            self.error = "compute-sanitizer: " + next(t.line() for t in report.tools if t.status == "errors")
            self.detail = "\n\n".join(f"{t.tool}:\n{t.first_error}" for t in report.tools if t.status == "errors")

    def bias_flags(self) -> list[str]:
        """Outputs whose error has one sign in every check (``sandbox.judging.bias``): a flag, not a rejection."""
        from .bias import bias_flags

        return bias_flags(self.checks)

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        """One line for terminals and logs (a simulated result says so first)."""
        parts = [f"{self.candidate}: {self.status.value}" + (" [SIMULATED]" if self.env.simulated else "")]
        if self.error:
            parts.append(self.error)
        if self.status is Status.compiled:
            parts.append("compiled only: nothing ran (no GPU sandbox), so nothing was checked or timed")
        parts += [f"bias flag: {flag}" for flag in self.bias_flags()]
        warned = self.compile.warnings() if self.compile and self.compile.ok else []
        if warned:
            parts.append(f"compiler warning: {warned[0].splitlines()[0]}"
                         + (f" (and {len(warned) - 1} more)" if len(warned) > 1 else ""))
        if self.timing:
            t = self.timing.impls.get("candidate")
            if t:
                parts.append(f"{t.median_ms:.4g} ms [{t.ci_ms.low:.4g}, {t.ci_ms.high:.4g}]")
            for name, s in self.timing.speedup.items():
                parts.append(f"{s.value:.3f}x vs {name} [{s.low:.3f}, {s.high:.3f}]")
            for name, why in self.timing.unavailable.items():
                parts.append(f"{name} not timed ({why})")
            c = self.timing.carry_over
            if c is not None and c.flagged:
                parts.append(f"carry-over: {self.timing.primary} {c.value:.3f}x slower right after the candidate "
                             f"[{c.low:.3f}, {c.high:.3f}]")
            if self.timing.below_roofline is not None:
                parts.append("flag: " + self.timing.below_roofline.line())
        parts += [f"{v.outcome}: {v.line}" for v in self.verdicts if v.outcome in ("flag", "fail")]
        return "; ".join(parts)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Result":
        return cls.model_validate_json(text)
