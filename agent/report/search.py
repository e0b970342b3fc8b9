"""The built-in search as a user sees it: every configuration it screened with its time (and whether it was
then evaluated in full), and, for each timed candidate that is not the winner, the reason why not.

Both read a stored run (``RunTrace``) or a live lineage; both return typed rows (``ScreenedRow``, ``NotWinner``),
so ``show``, ``report``, the notebook and ``--json`` print the same records.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from sandbox.judging.result import Interval, Status

from ..protocols import Entry
from ..trace.claim import FlaggedWinner, TuningRecord
from ..trace.events import ScreenEvent


def _key(knobs: dict, flags) -> tuple:
    return tuple(sorted((knobs or {}).items())), tuple(sorted(flags or ()))


class ScreenedRow(BaseModel):
    """One configuration the built-in search screened (``Run.screened()``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    order: int                           # 1 for the first screened
    phase: str
    from_: str | None = Field(None, alias="from")   # the entry the search started from
    knobs: dict[str, int]
    flags: list[str]
    config: str                          # knobs then flags, as a person would type them
    status: str
    relative: float | None               # its time relative to the start (lower is faster)
    relative_ci: list[float] | None
    ms: float | None
    baseline_ms: float | None
    rounds: int | None
    stopped: str | None
    error: str
    gpu_s: float
    evaluated: str | None                # the entry it became when evaluated in full

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


def screened(events, entries: list[Entry], tuning: list[TuningRecord] = ()) -> list[ScreenedRow]:
    """One record per configuration the search screened, fastest first (failures last): its knobs and flags,
    status, time relative to the start (with its interval), milliseconds, and ``evaluated`` (the entry id it
    became when it was evaluated in full, else None). A configuration screened twice (a resumed run) keeps
    its last measurement.

    A finalist is matched by its knobs and flags, else through ``tuning`` (the summary's search records) by
    the screened time it was chosen at: a screened configuration stands for every point that compiles to
    the same code, and the finalist may be another of those points."""
    full = {_key(e.result.knobs, e.result.flags): e.id for e in entries if e.origin != "baseline"}
    by_time = {f.screened: f.entry for t in tuning for f in t.finalists if f.entry and f.screened is not None}
    seen: dict[tuple, dict] = {}
    order = 0
    for event in events:
        if not isinstance(event, ScreenEvent):
            continue
        for c in event.configurations:
            key = _key(c.knobs, c.flags)
            order += 1
            seen[key] = ScreenedRow(order=order, phase=event.phase, from_=event.parents[0] if event.parents else None,
                                    knobs=dict(c.knobs), flags=list(c.flags), config=describe(c.knobs, c.flags),
                                    status=c.status, relative=c.relative,
                                    relative_ci=list(c.relative_ci) if c.relative_ci else None, ms=c.ms,
                                    baseline_ms=c.baseline_ms, rounds=c.rounds, stopped=c.stopped,
                                    error=c.error.splitlines()[0] if c.error.strip() else "", gpu_s=c.gpu_s,
                                    evaluated=full.get(key) or by_time.get(c.relative))
    rows = list(seen.values())
    return sorted(rows, key=lambda r: (r.relative is None, r.relative if r.relative is not None else 0.0))


def describe(knobs: dict, flags) -> str:
    """``TILE=8 BLOCK=256 --fmad=false``: knobs then flags, as a person would type them."""
    return " ".join([f"{k}={v}" for k, v in (knobs or {}).items()] + list(flags or ()))


def _overlaps(a: Interval | None, b: Interval | None) -> bool:
    return a is not None and b is not None and a.low <= b.high and b.low <= a.high


def _iv(s: Interval) -> str:
    return f"{s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]"


class Reason(str, Enum):
    """Why a timed candidate is not the winner."""

    SANITIZER = "sanitizer"             # the winner until compute-sanitizer found errors
    NOISE_FLOOR = "noise_floor"         # its interval overlaps the baseline timed against itself
    BELOW_BASELINE = "below_baseline"   # its interval lies below the baseline's
    TIED = "tied"                       # its interval overlaps the (earlier) winner's
    SLOWER = "slower"                   # measurably slower than the winner
    TIED_EARLIER = "tied_earlier"       # tied with another earlier entry that keeps the lead
    SET_ASIDE = "set_aside"             # led, but failed a held-out size (``agent.claims.heldout``)


class NotWinner(BaseModel):
    """Why a timed candidate is not the winner (``Run.not_winner()``)."""

    model_config = ConfigDict(extra="forbid")

    reason: Reason
    text: str                            # the same in words

    def to_json(self) -> dict:
        return self.model_dump(mode="json")


def _why(reason: Reason, text: str) -> NotWinner:
    return NotWinner(reason=reason, text=text)


def not_winner(entries: list[Entry], winner: Entry | None, baseline: Entry | None,
               set_aside: list[FlaggedWinner] = ()) -> dict[str, NotWinner]:
    """For each candidate that was timed (or rejected by the sanitizer) and is not the winner: why not. The rule
    it explains is ``MemoryLineage.best``: a candidate leads only when its interval clears every earlier tied
    entry's, and the baseline's own interval (the baseline timed against itself) is the noise floor. A leader
    that the claim's held-out re-check set aside (``set_aside``, the summary's) is said to be so, with where it
    failed."""
    reasons: dict[str, NotWinner] = {}
    aside = {f.id: f for f in set_aside}
    floor = baseline.result.speedup("baseline") if baseline is not None and baseline.result.ok else None
    order = {e.id: i for i, e in enumerate(entries)}
    lead_s = winner.result.speedup("baseline") if winner is not None and winner.result.ok else None
    for e in entries:
        if e is winner or e.origin == "baseline":
            continue
        r = e.result
        if r.status is Status.rejected and r.sanitize is not None:
            reasons[e.id] = _why(Reason.SANITIZER, f"rejected by compute-sanitizer ({r.sanitize.text()})")
            continue
        if e.id in aside:
            note = aside[e.id].note.replace("REGRESSES", "regresses", 1)
            reasons[e.id] = _why(Reason.SET_ASIDE, f"set aside: it led, but {note}")
            continue
        s = r.speedup("baseline") if r.ok else None
        if s is None:
            continue
        if floor is not None and _overlaps(s, floor):
            reasons[e.id] = _why(Reason.NOISE_FLOOR, f"within the noise floor (its interval overlaps the baseline "
                                                     f"timed against itself, {_iv(floor)})")
        elif s.high < 1.0 or (floor is not None and s.high < floor.low):
            reasons[e.id] = _why(Reason.BELOW_BASELINE,
                                 "slower than the baseline (its interval lies below the baseline's)")
        elif winner is not None and _overlaps(s, lead_s) and order[winner.id] < order[e.id]:
            reasons[e.id] = _why(Reason.TIED, f"tied with the winner {winner.id} ({_iv(lead_s)}): the intervals "
                                              "overlap and the earlier entry keeps the lead")
        elif winner is not None and lead_s is not None and s.value < lead_s.value:
            reasons[e.id] = _why(Reason.SLOWER, f"slower than the winner {winner.id} ({_iv(lead_s)})")
        else:
            reasons[e.id] = _why(Reason.TIED_EARLIER,
                                 "tied with an earlier entry, which keeps the lead (intervals overlap)")
    return reasons


def runner_up(entries: list[Entry], winner: Entry | None, baseline: Entry | None,
              set_aside: list[FlaggedWinner] = ()) -> tuple[Entry, NotWinner] | None:
    """Where there is no winner: the fastest timed candidate and why it did not win (a ``not_winner`` record;
    None when none was timed)."""
    if winner is not None:
        return None
    reasons = not_winner(entries, winner, baseline, set_aside)
    timed = [e for e in entries if e.id in reasons and e.result.ok and e.result.speedup("baseline") is not None]
    if not timed:
        rejected = [e for e in entries if e.id in reasons]
        return (rejected[0], reasons[rejected[0].id]) if rejected else None
    top = max(timed, key=lambda e: e.result.speedup("baseline").value)
    return top, reasons[top.id]
