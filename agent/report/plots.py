"""Plots of a stored run with matplotlib's object API (no pyplot, so no global figure state): the best
speedup so far against evaluations, tokens, GPU-seconds or wall time, every timed candidate with its
interval, and failures as marks along the bottom. ``svg`` turns a figure into inline SVG for reports."""

from __future__ import annotations

import io

from ..loop.lineage import score
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
        raise ValueError(f"over: expected one of {', '.join(AXES)}, got {over!r}")
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
        ax.legend(fontsize=8, loc="lower right")
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
