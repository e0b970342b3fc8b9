"""``kernelwright verify RUN``: re-measure a stored run's winner against the task's baseline on this
machine's GPU, and say whether the claimed speedup interval reproduces.

It reproduces when the new interval overlaps the claimed one (each end of the claim widened by
``tolerance``, default 3%: separate sessions drift by about that much even on one GPU, which is why
the strict overlap is reported beside it) and, if the claim cleared 1.0, the new interval clears
1.0 too. The environment of the run (GPU, driver, CUDA, NVRTC, arch) is compared with this one's; each
difference is a warning, since the claim's envelope does not cover it.

The candidate measured is the trace's ``candidates/<id>/candidate.cu`` (what a third party holds), on
the task the run recorded: the same fingerprint, or the verification is refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sandbox.judging.environment import READINGS, Environment
from sandbox.judging.result import Interval, Result
from sandbox.plumbing.envinfo import software

from ..protocols import Entry
from ..trace.reader import RunTrace

DEFAULT_TOLERANCE = 0.03
COMPARED = (("gpu", "GPU"), ("arch", "arch"), ("driver", "driver"), ("cuda_runtime", "CUDA runtime"),
            ("cuda_driver_api", "CUDA (driver API)"), ("nvrtc", "NVRTC"))
SHOWN = (("sm_clock_mhz", "SM clock (MHz)"), ("mem_clock_mhz", "memory clock (MHz)"), ("cupy", "CuPy"),
         ("kernelwright", "kernelwright"))


class NothingToVerify(ValueError):
    """The run holds no measured claim that can be re-measured (simulated, compile-only, no winner, task changed)."""


@dataclass
class Verification:
    run_id: str
    candidate: str
    origin: str
    sizes: dict
    status: str
    error: str
    claimed: Interval
    measured: Interval | None
    tolerance: float
    overlap: bool = False
    within_tolerance: bool = False
    claim_cleared: bool = False
    now_clears: bool = False
    reproduces: bool = False
    claimed_vendor: Interval | None = None
    measured_vendor: Interval | None = None
    environment: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def verdict(self) -> str:
        if self.measured is None:
            return f"DOES NOT REPRODUCE: the winner is {self.status} on this machine" + (f": {self.error}" if self.error else "")
        if self.reproduces:
            how = "the intervals overlap" if self.overlap else \
                f"the intervals are within {self.tolerance:.0%} of each other (they do not overlap strictly)"
            return f"REPRODUCES: {how}" + (", and the speedup still clears 1.0" if self.claim_cleared else "")
        if not self.within_tolerance:
            return f"DOES NOT REPRODUCE: the new interval lies outside the claimed one (widened by {self.tolerance:.0%})"
        return "DOES NOT REPRODUCE: the claim cleared 1.0 and the new interval does not"

    def to_dict(self) -> dict:
        """JSON-ready: intervals as {value, low, high} (``dataclasses.asdict`` leaves pydantic records as they are)."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, Interval):
                out[key] = value.model_dump()
        out["verdict"] = self.verdict()
        return out


def winner(stored: RunTrace) -> Entry:
    """The entry whose claim can be verified, or NothingToVerify saying why not."""
    if stored.simulated:
        raise NothingToVerify(f"run {stored.id} is SIMULATED (fake sandbox): its figures were modelled, not measured, "
                              "so there is no claim to reproduce")
    best = stored.best
    if best is None or best.result.speedup("baseline") is None:
        why = "a compile-only run times nothing" if stored.info.sandbox.kind == "compile-only" else "no candidate beat the baseline"
        raise NothingToVerify(f"run {stored.id} has no timed winner to verify ({why})")
    return best


def prepare(stored: RunTrace):
    """(task, candidate, winner entry) as the run measured them; NothingToVerify where that is impossible."""
    from sandbox.candidates.candidate import CandidateError, load_candidate

    best = winner(stored)
    recorded = stored.info.task
    task = stored.unchanged_task()
    if task is None:
        raise NothingToVerify(f"task {recorded.name!r} (fingerprint {recorded.fingerprint}) was not found "
                              f"unchanged: not at {recorded.folder} and not in the suite; the claim was made on "
                              "that exact task")
    path = stored.path / "candidates" / best.id / "candidate.cu"
    from sandbox.pytorch.modelnew import ModelNewError, is_modelnew, load_modelnew

    try:
        modelnew = path.is_file() and is_modelnew(path.read_text(errors="replace"))
        cand = load_modelnew(path, label=best.id) if modelnew else dataclasses.replace(load_candidate(path), label=best.id)
    except (CandidateError, ModelNewError) as exc:
        raise NothingToVerify(f"the winner's file cannot be read: {exc}") from None
    r = best.result
    if cand.defines() != r.knobs or list(cand.flags) != r.flags:
        raise NothingToVerify(f"{path}: its knobs {cand.defines()} and flags {list(cand.flags)} differ from those the "
                              f"run evaluated ({r.knobs}, {r.flags})")
    return task, cand, best


def sandbox_config(stored: RunTrace, budget_s: float | None = None):
    """The run's own sandbox settings (timing budget, rounds...), so that the protocol is the same."""
    from pydantic import ValidationError

    from sandbox import SandboxConfig

    recorded = stored.info.config.get("sandbox_options") or {}
    try:
        cfg = SandboxConfig.model_validate(recorded)
    except ValidationError:
        cfg = SandboxConfig()
    return cfg.model_copy(update={"timing_budget_s": budget_s}) if budget_s else cfg


def compare(stored: RunTrace, entry: Entry, result: Result, tolerance: float = DEFAULT_TOLERANCE) -> Verification:
    """The verdict for ``result`` (the winner re-measured now) against ``entry`` (the winner as recorded)."""
    claimed = entry.result.speedup("baseline")
    measured = result.speedup("baseline") if result.ok else None
    t = entry.result.timing
    v = Verification(stored.id, entry.id, entry.origin, dict(t.sizes) if t else {}, result.status.value, result.error,
                     claimed, measured, tolerance, claim_cleared=claimed.low > 1.0,
                     claimed_vendor=entry.result.speedup("vendor"),
                     measured_vendor=result.speedup("vendor") if result.ok else None)
    if measured is not None:
        v.overlap = measured.low <= claimed.high and claimed.low <= measured.high
        v.within_tolerance = measured.low <= claimed.high * (1 + tolerance) and claimed.low * (1 - tolerance) <= measured.high
        v.now_clears = measured.low > 1.0
        v.reproduces = v.within_tolerance and (v.now_clears or not v.claim_cleared)
    v.environment, v.warnings = environment(stored, entry.result.env, result.env, software())
    if stored.unchecked:
        v.warnings.insert(0, stored.unchecked)
    return v


def environment(stored: RunTrace, then: Environment, now: Environment, here: dict) -> tuple[list[dict], list[str]]:
    """The run's environment against this machine's, row by row, and a warning for each difference the claim's
    envelope does not cover. A software version a result does not record is the run's (``stored``) or this
    machine's (``here``: ``sandbox.plumbing.envinfo.software``)."""
    software = stored.info.environment
    rows, warnings = [], []
    for key, label in COMPARED + SHOWN:
        a = _or(getattr(then, key), software.get(key))
        b = _or(getattr(now, key), here.get(key))
        same = a == b
        if key in READINGS:  # the clocks the timed rounds ran at, and how they were read
            a, b = then.describe_reading(key), now.describe_reading(key)
        rows.append({"key": key, "label": label, "run": a, "now": b, "same": same})
        if (key, label) not in COMPARED or same:
            continue
        if a is None:
            warnings.append(f"the run did not record its {label}; this machine has {b}")
        elif b is None:
            warnings.append(f"this machine does not report its {label}; the run measured on {a}")
        else:
            warnings.append(f"other {label}: the run measured on {a}, this machine has {b}; the claim's envelope "
                            "does not cover it")
    return rows, warnings


def _or(value, default):
    return default if value is None else value


def verify(stored: RunTrace, tolerance: float = DEFAULT_TOLERANCE, budget_s: float | None = None,
           sandbox=None) -> Verification:
    """Re-measure the winner on ``sandbox``; without one a ``GPUSandbox`` with the run's settings is opened
    (RuntimeError where there is no usable device)."""
    task, cand, best = prepare(stored)
    if sandbox is not None:
        return compare(stored, best, sandbox.evaluate(task, cand), tolerance)
    from sandbox import GPUSandbox

    with GPUSandbox(sandbox_config(stored, budget_s)) as own:
        return compare(stored, best, own.evaluate(task, cand), tolerance)
