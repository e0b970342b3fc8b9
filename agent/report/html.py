"""``kernelwright report RUN``: one self-contained HTML file from a stored run, and the HTML of the
notebook views (a run, a candidate, an entry).

The file loads nothing: its CSS is inline, its plots are inline SVG (matplotlib, Agg, no pyplot), and a
Content-Security-Policy forbids scripts and remote resources. Templates are Jinja2 (``agent/report/templates``)
with autoescaping, so every string that came from a model or a trace is escaped.

    stored = tracefile.read("traces/<run-id>")
    write_report(stored)                 # -> traces/<run-id>/report.html
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from sandbox.judging.result_html import result_html
from sandbox.plumbing.files import atomic_write

from . import search, views
from .plots import best_so_far, roofline, search_space, svg
from ..protocols import Entry
from ..trace.events import EVENTS_SCHEMA
from ..trace.reader import RunTrace
from ..trace.records import Claim

TEMPLATES = Path(__file__).with_name("templates")
PLOTS = ("evaluations", "tokens", "gpu_s")
SCREENED_SHOWN = 50   # rows of the screened-configurations table in the report (all of them are in --json)


@lru_cache(maxsize=1)
def environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _css():
    return _markup((TEMPLATES / "report.css").read_text())


def _markup(text: str):
    from markupsafe import Markup

    return Markup(text)


def _plot(stored: RunTrace, over: str) -> dict:
    if over == "tokens" and (not stored.steps or stored.steps[-1].tokens == 0):
        return {"over": over, "svg": "", "note": "No model tokens were spent (the built-in search ran without a model), "
                                                 "so there is no curve over tokens."}
    if not stored.steps:
        return {"over": over, "svg": "", "note": "Nothing was evaluated."}
    fig = best_so_far(stored, over)
    return {"over": over, "svg": _markup(svg(fig, f"{stored.id}-{over}")), "note": ""}


def _space_plot(stored: RunTrace, rows: list[search.ScreenedRow]) -> dict:
    if not rows:
        return {"over": "space", "svg": "", "note": "The built-in search screened nothing in this run (a model-only run, "
                                                    "a compile-only run, or a task without a CUDA baseline to screen against)."}
    return {"over": "space", "svg": _markup(svg(search_space(stored, rows), f"{stored.id}-space")), "note": ""}


def _roofline_plot(stored: RunTrace, task) -> dict:
    fig = roofline(stored, task)
    if fig is None:
        why = ("the run's task cannot be loaded unchanged, so its FLOPs and bytes are not at hand" if task is None else
               "no candidate was timed with the device's ceilings recorded")
        return {"over": "roofline", "svg": "", "note": f"No roofline: {why}."}
    return {"over": "roofline", "svg": _markup(svg(fig, f"{stored.id}-roofline")), "note": ""}


def _candidate(stored: RunTrace, entry: Entry) -> dict:
    return {**views.candidate_view(stored, entry), "result_html": _markup(result_html(entry.result))}


def render_report(stored: RunTrace) -> str:
    from importlib import metadata

    try:
        version = metadata.version("kernelwright")
    except metadata.PackageNotFoundError:
        version = "(checkout)"
    task = stored.unchanged_task()
    s = views.summary_view(stored, task)
    claim = stored.summary.claim if stored.summary else Claim()
    return environment().get_template("report.html.j2").render(
        s=s, css=_css(), plots=[_plot(stored, over) for over in PLOTS],
        search_plots=[_space_plot(stored, search.screened(stored.events, stored.entries, claim.searches)),
                      _roofline_plot(stored, task)], screened_shown=SCREENED_SHOWN,
        lineage=views.lineage_lines(stored), candidates=[_candidate(stored, e) for e in stored.entries],
        unevaluated=views.unevaluated_view(stored), version=version, trace=stored.path.name,
        schema=stored.events[0].schema_ if stored.events else EVENTS_SCHEMA)


def write_report(stored: RunTrace, out: str | Path | None = None) -> Path:
    """Write the report (default: ``report.html`` in the run folder); returns its path."""
    target = Path(out) if out is not None else stored.path / "report.html"
    atomic_write(target, render_report(stored))
    readable(target)
    return target


def readable(path: Path) -> None:
    """Give a written file the mode a plain ``open`` would (0666 less the umask): the atomic write's temporary file
    is created 0600, and a report is meant to be shared."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


# ---- notebook views ------------------------------------------------------------------------------


def run_fragment(stored: RunTrace, rows: list) -> str:
    """A run in a notebook; ``rows`` are ``Run.rows()``."""
    plot = _plot(stored, "evaluations")
    return environment().get_template("run.html.j2").render(
        s=views.summary_view(stored, stored.unchanged_task()), css=_css(), plot=plot["svg"],
        lineage=views.lineage_lines(stored), rows=views.rows_view(rows))


def candidate_fragment(stored: RunTrace, entry: Entry) -> str:
    c = _candidate(stored, entry)
    return environment().get_template("candidate.html.j2").render(c=c, css=_css(), result_html=c["result_html"])


def entry_fragment(entry: Entry) -> str:
    """An entry on its own (no trace at hand): its note, its source and its result."""
    c = {"id": entry.id, "origin": entry.origin, "phase": "", "iteration": entry.iteration, "parents": entry.parent_ids,
         "full_note": entry.note, "best": False, "diagnosis": views.own_diagnosis(entry), "picked": "",
         "diff": views.diff_lines(None, None, entry.id, entry.candidate.render()), "diff_label": "source"}
    return environment().get_template("candidate.html.j2").render(c=c, css=_css(), result_html=_markup(result_html(entry.result)))
