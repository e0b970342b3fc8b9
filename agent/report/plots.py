"""Plots of a stored run with matplotlib's object API (no pyplot, so no global figure state): the best
speedup so far against evaluations, tokens, GPU-seconds or wall time, every timed candidate with its
interval, and failures as marks along the bottom. ``svg`` turns a figure into inline SVG for reports."""

from __future__ import annotations

import io

from ..protocols import score
from ..trace.reader import RunTrace

AXES = {
    "evaluations": ("n", "candidates evaluated"),
    "tokens": ("tokens", "model tokens spent (prompt + completion)"),
    "gpu_s": ("gpu_s", "GPU-seconds spent (checking, timing, profiling)"),
    "wall_s": ("wall_s", "wall time of the run (s)"),
}
ORIGIN_COLORS = {"baseline": "#555555", "llm": "#1f77b4", "replay": "#1f77b4", "tuner": "#ff7f0e"}


def best_so_far(stored: RunTrace, over: str = "evaluations"):
    """A ``matplotlib.figure.Figure``: the best speedup over the baseline so far, against ``over``."""
    from matplotlib.figure import Figure

    if over not in AXES:
        raise ValueError(f"over: expected one of {', '.join(AXES)}, space or roofline, got {over!r}")
    attr, label = AXES[over]
    fig = Figure(figsize=(7.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    steps = stored.steps
    xs = [getattr(s, attr) for s in steps]
    timed = [(x, s.entry) for x, s in zip(xs, steps) if score(s.entry) is not None]
    for origin in sorted({e.origin for _, e in timed}):
        pts = [(x, e.result.speedup("baseline")) for x, e in timed if e.origin == origin]
        ax.errorbar([p[0] for p in pts], [p[1].value for p in pts],
                    yerr=[[p[1].value - p[1].low for p in pts], [p[1].high - p[1].value for p in pts]],
                    fmt="o", ms=4, lw=1, alpha=0.75, color=ORIGIN_COLORS.get(origin, "#2ca02c"), label=origin)
    best = [(x, s.best) for x, s in zip(xs, steps) if s.best is not None]
    if best:
        bx = [b[0] for b in best]
        ax.step(bx, [b[1].value for b in best], where="post", color="#2ca02c", lw=2, label="best so far")
        ax.fill_between(bx, [b[1].low for b in best], [b[1].high for b in best], step="post", color="#2ca02c",
                        alpha=0.2, lw=0)
    failed = [x for x, s in zip(xs, steps) if s.entry.result.status.value not in ("ok", "compiled")]
    if failed:
        ax.plot(failed, [0.03] * len(failed), "x", color="#d62728", ms=6, transform=ax.get_xaxis_transform(),
                label="failed (not timed)")
    ax.axhline(1.0, color="#888888", lw=1, ls="--")
    ax.set_xlabel(label)
    ax.set_ylabel("speedup vs baseline")
    title = f"{stored.task_name}: best speedup so far over {over.replace('_s', '-seconds').replace('gpu', 'GPU')}"
    ax.set_title(title + (" (SIMULATED)" if stored.simulated else ""), fontsize=10)
    if not timed:
        ax.text(0.5, 0.5, "no candidate was timed", transform=ax.transAxes, ha="center", va="center", color="#777777")
    elif xs and min(xs) == max(xs) and over != "evaluations":
        ax.text(0.5, 0.9, f"nothing spent on this axis ({label}: {xs[0]:g})", transform=ax.transAxes, ha="center",
                color="#777777", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return fig


def svg(fig, salt: str) -> str:
    """The figure as an ``<svg>`` element for inline HTML: no XML prolog, no date, element ids salted per
    figure (several figures share one page), text kept as text."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def search_space(stored: RunTrace, rows: list):
    """Every configuration the built-in search screened, in the order it was screened: its time relative to the
    start with its interval; those evaluated in full ringed and named; failures as marks along the bottom.
    ``rows`` are ``agent.report.search.screened`` records."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    timed = [r for r in rows if r.relative is not None]
    if timed:
        lo = [r.relative - (r.relative_ci or [r.relative] * 2)[0] for r in timed]
        hi = [(r.relative_ci or [r.relative] * 2)[1] - r.relative for r in timed]
        ax.errorbar([r.order for r in timed], [r.relative for r in timed], yerr=[lo, hi], fmt="o", ms=4, lw=1,
                    alpha=0.7, color=ORIGIN_COLORS["tuner"], label="screened")
    full = [r for r in timed if r.evaluated]
    if full:
        ax.plot([r.order for r in full], [r.relative for r in full], "o", ms=11, mfc="none", mew=2,
                color="#2ca02c", label="evaluated in full")
        for r in full:
            ax.annotate(r.evaluated, (r.order, r.relative), textcoords="offset points", xytext=(6, 6),
                        fontsize=8, color="#2ca02c")
    failed = [r.order for r in rows if r.relative is None]
    if failed:
        ax.plot(failed, [0.03] * len(failed), "x", color="#d62728", ms=6, transform=ax.get_xaxis_transform(),
                label="failed (not timed)")
    ax.axhline(1.0, color="#888888", lw=1, ls="--")
    ax.set_xlabel("configuration, in the order screened")
    ax.set_ylabel("time relative to the start (lower is faster)")
    title = f"{stored.task_name}: the search space as screened ({len(rows)} configurations)"
    ax.set_title(title + (" (SIMULATED)" if stored.simulated else ""), fontsize=10)
    if not rows:
        ax.text(0.5, 0.5, "nothing was screened", transform=ax.transAxes, ha="center", va="center", color="#777777")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    return fig


def roofline(stored: RunTrace, task):
    """Each timed candidate against the device's ceilings (the ones its timing recorded): achieved FLOP/s over
    the task's arithmetic intensity, under the memory slope and the compute roof; for a task that counts no
    FLOPs, achieved bytes/s per candidate under the bandwidth ceiling. None where no timed candidate recorded
    ceilings (or the task is not at hand to count its FLOPs and bytes)."""
    from matplotlib.figure import Figure

    timed = [e for e in stored.entries if score(e) is not None and e.result.env.ceilings]
    if task is None or not timed:
        return None
    ceilings = timed[0].result.env.ceilings
    bw = ceilings.memory_bandwidth()
    peak = ceilings.peak_flops(task.spec.roofline.compute)
    best = stored.best
    fig = Figure(figsize=(7.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    points = []
    for e in timed:
        t = e.result.timing
        secs = t.impls["candidate"].median_ms / 1e3
        points.append((e, task.flops(t.sizes), task.bytes(t.sizes), secs))
    sim = " (SIMULATED)" if stored.simulated else ""
    if all(f > 0 for _, f, _, _ in points) and bw and peak:
        xs = [f / b for _, f, b, _ in points]
        span = [min(xs + [peak / bw]) / 8, max(xs + [peak / bw]) * 8]
        grid = [span[0] * (span[1] / span[0]) ** (i / 64) for i in range(65)]
        ax.plot(grid, [min(peak, bw * x) for x in grid], color="#555555", lw=2,
                label=f"ceilings: {bw / 1e9:,.0f} GB/s, {peak / 1e12:,.1f} TFLOP/s {task.spec.roofline.compute}")
        ax.axvline(peak / bw, color="#aaaaaa", lw=1, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _mark(ax, points, best, lambda p: p[1] / p[2], lambda p: p[1] / p[3])
        ax.set_xlabel("arithmetic intensity (task FLOPs / task bytes)")
        ax.set_ylabel("achieved FLOP/s")
    elif bw:
        ax.axhline(bw, color="#555555", lw=2, label=f"bandwidth ceiling: {bw / 1e9:,.0f} GB/s")
        _mark(ax, points, best, lambda p: points.index(p), lambda p: p[2] / p[3])
        ax.set_xlabel("candidate, in the order evaluated")
        ax.set_ylabel("achieved bytes/s (task bytes / time)")
        ax.set_ylim(bottom=0)
    else:
        return None
    ax.set_title(f"{stored.task_name}: candidates against the device's ceilings{sim}", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3, which="both")
    return fig


def _mark(ax, points, best, x, y) -> None:
    for origin in sorted({p[0].origin for p in points}):
        mine = [p for p in points if p[0].origin == origin]
        ax.plot([x(p) for p in mine], [y(p) for p in mine], "o", ms=5, alpha=0.75,
                color=ORIGIN_COLORS.get(origin, "#2ca02c"), label=origin)
    # The winner is named above its point and the baseline below its own: a winner is faster, so its point is
    # never below the baseline's, and the two names cannot meet however close the points are.
    for p in points:
        winner = best is not None and p[0].id == best.id
        if winner or p[0].origin == "baseline":
            ax.annotate(p[0].id + (" (winner)" if winner else ""), (x(p), y(p)), textcoords="offset points",
                        xytext=(6, 5) if winner else (6, -5), va="bottom" if winner else "top", fontsize=8)
