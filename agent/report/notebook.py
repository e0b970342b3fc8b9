"""The notebook side of a ``Run`` (``agent.api.Run``, from ``agent.optimize`` or ``agent.load_run``): its
HTML in Jupyter, its plot, one candidate with its diff, the report file. Everything reads the run's
trace folder, so it works the same on a finished run, a stored one and one copied from another machine.

    run = agent.load_run("traces/20260101-120000-softmax-ab12")
    run                      # the claim, the baselines, the best-so-far curve, the lineage
    run.plot("gpu_s")        # a matplotlib Figure
    run.candidate("c0003")   # its diff against its parent, its result
    run.rows()               # the lineage as records

The data types do not know their renderers: importing this module (``agent.api`` does) gives ``Result`` and
``Entry`` their ``_repr_html_``, so that a result or an entry renders itself in Jupyter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from sandbox.judging.result import Result
from sandbox.judging.result_html import result_html

from ..protocols import Entry
from ..trace.reader import RunTrace, TraceError, read


def _entry_html(entry: Entry) -> str:
    from .html import entry_fragment

    return entry_fragment(entry)


def register_displays() -> None:
    """Jupyter shows an object through its ``_repr_html_``: attach ours to the sandbox's Result and the Entry."""
    Result._repr_html_ = result_html
    Entry._repr_html_ = _entry_html


register_displays()


def _stored(run) -> RunTrace:
    return read(run.path)


def plot(run, over: str = "evaluations"):
    """The best speedup so far against ``over`` (evaluations, tokens, gpu_s or wall_s), the search space
    (``"space"``) or the roofline (``"roofline"``): a matplotlib Figure."""
    from . import plots

    _figures_inline()
    stored = _stored(run)
    if over == "space":
        return plots.search_space(stored, _screened(stored))
    if over == "roofline":
        fig = plots.roofline(stored, stored.unchanged_task())
        if fig is None:
            raise ValueError(f"run {stored.id}: no roofline (no candidate was timed with the device's ceilings, or "
                             "the task is not at hand unchanged)")
        return fig
    return plots.best_so_far(stored, over)


def _screened(stored: RunTrace) -> list:
    from .search import screened as rows

    return rows(stored.events, stored.entries, stored.summary.claim.searches if stored.summary else [])


def screened(run) -> list:
    return _screened(_stored(run))


def not_winner(run) -> dict:
    from .search import not_winner as reasons

    stored = _stored(run)
    return reasons(stored.entries, stored.best, stored.baseline, stored.summary.claim.set_aside if stored.summary else [])


def _figures_inline() -> None:
    """In IPython, a figure made without pyplot displays as text unless a formatter knows figures: add the
    PNG formatter ``%matplotlib inline`` would add, unless there is one already."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure

    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)
    except KeyError:
        png.for_type(Figure, _png)


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def report(run, out: str | Path | None = None) -> Path:
    from .html import write_report

    return write_report(_stored(run), out)


def run_html(run) -> str:
    from .html import run_fragment

    try:
        return run_fragment(_stored(run), run.rows())
    except TraceError as exc:
        return f"<p>{escape(repr(run))}</p><p>the trace cannot be read: {escape(str(exc))}</p>"


def candidate(run, entry_id: str) -> "CandidateView":
    stored = _stored(run)
    if entry_id not in stored.by_id:
        known = ", ".join(e.id for e in stored.entries)
        raise KeyError(f"{entry_id!r}: no evaluated candidate of that id in run {stored.id} (evaluated: {known})")
    entry = stored.by_id[entry_id]
    parent = stored.parent(entry)
    return CandidateView(entry, stored.source(entry_id), parent.id if parent else None,
                         stored.source(parent.id) if parent else None, stored)


@dataclass
class CandidateView:
    """One evaluated candidate of a stored run, with the file it came from and its parent's."""

    entry: Entry
    source: str | None
    parent_id: str | None
    parent_source: str | None
    stored: RunTrace = field(repr=False)

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def result(self) -> Result:
        return self.entry.result

    def diff(self) -> str:
        """The unified diff of ``candidate.cu`` against the parent's (the whole file for the baseline)."""
        from .views import diff_lines

        return "\n".join(row["text"] for row in diff_lines(self.parent_id, self.parent_source, self.id, self.source))

    def __repr__(self) -> str:
        return f"CandidateView({self.result.summary()}, from {self.parent_id or 'nothing'})"

    def _repr_html_(self) -> str:
        from .html import candidate_fragment

        return candidate_fragment(self.stored, self.entry)


class ProgressBar:
    """``agent.optimize``'s progress as a tqdm bar (``tqdm.auto``: a widget in Jupyter where ipywidgets is
    installed, the ``notebook`` extra; text on stderr elsewhere): one bar per stretch of work (configurations
    measured against the search's budget, finalists evaluated in full, model requests against the iterations),
    the best so far, the GPU-seconds and the time left at most beside it. Use it as an ``on_progress`` callback;
    ``close`` ends the last bar."""

    def __init__(self):
        self._bar = None
        self._what: tuple | None = None

    def __call__(self, kind: str, snap: dict) -> None:
        from tqdm.auto import tqdm

        work = snap["work"]
        what = (snap["phase"], work["what"], work["total"])
        if what != self._what:
            self.close()
            # no tqdm time-left: it assumes the whole budget at the current rate; the postfix says "at most"
            self._bar = tqdm(total=work["total"], desc=f"{snap['phase']}: {work['what']}", unit="",
                             dynamic_ncols=True, leave=True,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
                             if work["total"] else "{desc}: {n_fmt} [{elapsed}{postfix}]")
            self._what = what
        self._bar.n = work["done"]
        s = snap.get("best_speedup")
        limit = snap["limits"]["gpu_s"]
        self._bar.set_postfix_str(", ".join(x for x in (
            f"best {snap['best_id']} {s['value']:.3f}x [{s['low']:.3f}, {s['high']:.3f}]" if s else "",
            f"{snap['evaluations']} evaluations",
            f"{snap['gpu_s']:.2f}{f'/{limit:g}' if limit else ''} GPU-s" + (" (simulated)" if snap.get("simulated") else ""),
            f"at most {snap['eta_s']:.0f} s left" if snap.get("eta_s") is not None else "",
        ) if x), refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
