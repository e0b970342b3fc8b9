"""Live progress with denominators: what a run has done against what it may do (screened configurations
against the search's budget, model requests against the iterations, GPU-seconds, tokens and money against
their limits), and an estimate of the time left. The terminal status line and the notebook bar both read
``snapshot``; neither knows how the other draws it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import summary as summary_mod


@dataclass
class Clock:
    """When the current phase began (its wall time and its count of work done), for the estimate of time left."""

    phase: str = ""
    started: float = field(default_factory=time.monotonic)
    done_at_start: int = 0


def _eta(clock: Clock, done: int, total: int | None) -> float | None:
    """Seconds left at the phase's average rate so far if it uses all of its budget (``total``), which a search
    that runs out of configurations or a run that stops at a plateau does not: an upper estimate, shown as
    "at most"; None before the first unit is done or without a total."""
    if total is None or done <= clock.done_at_start:
        return None
    rate = (time.monotonic() - clock.started) / (done - clock.done_at_start)
    return max(0.0, (total - done) * rate)


def snapshot(session, clock: Clock) -> dict:
    """The summary's live snapshot plus the run's limits and how far along each is; ``work`` is the phase's
    main count (``done`` of ``total``, with what it counts) and ``eta_s`` the time left at the rate so far
    (the wall-time limit caps it)."""
    loop, cfg = session.loop, session.config
    snap = summary_mod.snapshot(loop.lineage, loop.totals, loop.phase, loop.last)
    wall = session.trace.wall_s
    snap["wall_s"] = wall
    b = cfg.budget
    snap["limits"] = {"iterations": b.iterations, "gpu_s": b.gpu_seconds, "wall_s": b.wall_seconds,
                      "tokens": b.tokens, "usd": b.usd}
    snap["evaluations"] = loop.totals.evaluations
    snap["screened"] = loop.totals.screened
    snap["requests"] = loop.totals.usage.requests
    phase = loop.phase or ""
    search = session.searching if phase in ("search", "tune") else None
    found = search.progress() if search is not None else None
    if found is not None:
        work = {"what": "configurations measured", "done": found["measured"], "total": found["budget"] or None,
                "finalists": found["finalists"], "finalists_total": found["finalists_total"]}
        if found["finished"] and found["finalists_total"]:
            # the measuring is over; the finalists evaluated in full are what is left
            work = {**work, "what": "finalists evaluated in full", "done": found["finalists"],
                    "total": found["finalists_total"]}
    elif phase == "model":
        work = {"what": "model requests", "done": loop.totals.iterations, "total": b.iterations}
    else:
        work = {"what": "evaluations", "done": loop.totals.evaluations, "total": None}
    if clock.phase != phase or work["done"] < clock.done_at_start:
        clock.phase, clock.started, clock.done_at_start = phase, time.monotonic(), work["done"]
    snap["work"] = work
    eta = _eta(clock, work["done"], work["total"])
    if b.wall_seconds is not None:
        left = max(0.0, b.wall_seconds - wall)
        eta = left if eta is None else min(eta, left)
    snap["eta_s"] = eta
    return snap


def _of(done, total, unit: str = "", fmt: str = "{}") -> str:
    text = fmt.format(done)
    return f"{text}/{fmt.format(total)}{unit}" if total is not None else f"{text}{unit}"


def status_line(snap: dict, width: int | None = None) -> str:
    """``search | configurations measured 12/87 | 2 evaluations | best c0003 1.160x [...] | 0.42/10.00 GPU-s |
    5 s, at most 20 s left``: every count against its limit where the run has one. Within ``width`` columns the
    least needed parts go first (finalists, model requests, evaluations, tokens and money, the best so far), then
    shorter words; the count of work, the GPU-seconds and the time left always stay."""
    if not snap:
        return "starting..."
    work, lim = snap["work"], snap["limits"]
    flight = f" (+{snap['in_flight']} in flight)" if snap.get("in_flight") else ""
    # (text, the order it is dropped in: lower first; None stays)
    parts: list[tuple[str, int | None]] = []
    if work["what"] == "finalists evaluated in full":
        count = (f"search over, finalists evaluated in full {work['done']}/{work['total']}{flight}",
                 f"finalists {work['done']}/{work['total']}")
    else:
        short = {"configurations measured": "configs", "model requests": "requests"}.get(work["what"], work["what"])
        count = (f"{work['what']} {_of(work['done'], work['total'])}{flight}",
                 f"{short} {_of(work['done'], work['total'])}")
        if work.get("finalists_total"):
            parts.append((f"finalists {work['finalists']}/{work['finalists_total']}", 0))
    parts.append((f"{snap['evaluations']} evaluations", 2))
    if snap["requests"] and work["what"] != "model requests":   # the tuning after a model phase
        parts.append((f"{snap['requests']} model requests", 1))
    s = snap.get("best_speedup")
    if s:
        parts.append((f"best {snap['best_id']} {s['value']:.3f}x [{s['low']:.3f}, {s['high']:.3f}]", 4))
    if snap["tokens"] or lim["tokens"] is not None:
        parts.append((f"{_of(snap['tokens'], lim['tokens'], ' tokens', '{:,}')}", 3))
    if snap["usd"] or lim["usd"] is not None:
        parts.append((_of(snap["usd"], lim["usd"], "", "${:.4f}"), 3))
    sim = " (simulated)" if snap.get("simulated") else ""
    gpu = _of(snap["gpu_s"], lim["gpu_s"], " GPU-s", "{:.2f}")
    eta = snap.get("eta_s")
    left = f", at most {eta:.0f} s left" if eta is not None else ""
    clock = _of(round(snap["wall_s"]), lim["wall_s"], " s", "{:.0f}")

    def line(long: bool, dropped: int) -> str:
        kept = [text for text, order in parts if order is None or order >= dropped]
        return " | ".join([count[0] if long else count[1], *kept, gpu + (sim if long else " (sim)"), clock + left])

    for dropped in range(6):
        for long in (True, False):
            text = line(long, dropped)
            if width is None or len(text) <= width:
                return text
    return text
