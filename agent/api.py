"""The Python API for notebooks and scripts: ``agent.optimize(...)`` returns a ``Run``.

Synchronous (no event loop is started or needed). Settings beyond the common ones go through
``config``: a ``RunConfig``, a dict of its fields, or a path to a TOML run config.

    run = agent.optimize("softmax", model="qwen3-coder", base_url="http://localhost:8000/v1", iterations=8)
    run.best.result.speedup()        # interval over the baseline
    run                              # renders a table in Jupyter
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import config as config_mod
from .loop import session as session_mod
from .stops import Stop
from .protocols import Entry, Proposer
from .report import notebook  # also gives Result and Entry their HTML in Jupyter
from .report.search import NotWinner, ScreenedRow
from .loop.summary import entry_row
from .trace.reader import UNFINISHED_NOTE, read, resolve_run
from .trace.records import EntryRow, Summary, TaskRef


class NoWinner(LookupError):
    """A run without a winner was asked for the winner's figures; the message says why there is none."""


@dataclass
class Run:
    """A finished (or stopped) run: its trace folder, lineage and summary (``summary.json`` as its record; its
    ``claim`` holds the held-out re-check, the sanitizer's section, the cost ledger and the search's coverage)."""

    id: str
    path: Path
    summary: Summary
    entries: list[Entry]

    @property
    def stop_reason(self) -> str | None:
        """Why the run's last phase stopped, in words."""
        return self.summary.stop_reason

    @property
    def stop(self) -> Stop | None:
        """Why the run's last phase stopped, as a value."""
        return self.summary.last_stop

    @property
    def simulated(self) -> bool:
        return self.summary.simulated

    @property
    def best(self) -> Entry | None:
        best = self.summary.best
        return next((e for e in self.entries if best is not None and e.id == best.id), None)

    @property
    def baseline(self) -> Entry | None:
        return next((e for e in self.entries if e.origin == "baseline"), None)

    def speedup(self, against: str = "baseline"):
        """The winner's speedup interval over ``against`` (``baseline``, ``vendor``, or for a PyTorch task
        ``eager``/``compile``): an ``Interval`` (value, low, high). A run without a winner raises ``NoWinner``
        saying why (a compile-only run, nothing timed, or no candidate measurably faster than the baseline,
        with the fastest candidate and the reason it did not win)."""
        best = self.best
        if best is None:
            raise NoWinner(self.no_winner_reason())
        s = best.result.speedup(against)
        if s is None:
            timed = ", ".join(best.result.timing.speedup) if best.result.timing else "nothing"
            raise NoWinner(f"run {self.id}: the winner {best.id} was not timed against {against!r} (it was against: "
                           f"{timed})")
        return s

    def no_winner_reason(self) -> str:
        """Why this run has no winner, in one sentence (empty where it has one)."""
        from .report.search import runner_up

        if self.best is not None:
            return ""
        if self.summary.sandbox == "compile-only":
            return f"run {self.id} has no winner: a compile-only run times nothing (run it with --sandbox gpu or fake)"
        found = runner_up(self.entries, None, self.baseline, self.summary.claim.set_aside)
        if found is None:
            stop = self.stop_reason or "it did not finish"
            return f"run {self.id} has no winner: no candidate was timed (stopped: {stop})"
        entry, why = found
        s = entry.result.speedup("baseline")
        at = f" at {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}]" if s else ""
        return (f"run {self.id} has no winner: no candidate beat the baseline; the fastest, {entry.id}{at}, is not "
                f"the winner: {why.text}")

    def rows(self) -> list[EntryRow]:
        """The lineage as flat rows: the winner first, then the other measured entries by speedup, then the rest."""
        from .loop.lineage import MemoryLineage
        from .loop.summary import rows

        lineage = MemoryLineage()
        for e in self.entries:
            lineage.add(e)
        return rows(lineage, self.best)  # the recorded winner: a run keeps the one its rule picked

    def __repr__(self) -> str:
        best = self.summary.best
        speed = best.speedup if best is not None else None
        text = f"Run({self.id!r}, {len(self.entries)} candidates, stop: {self.stop_reason}"
        if speed:
            text += f", best {best.id} {speed.value:.3f}x [{speed.low:.3f}, {speed.high:.3f}]"
        return text + (", SIMULATED)" if self.simulated else ")")

    def plot(self, over: str = "evaluations"):
        """A matplotlib Figure: the best speedup so far against ``over`` (evaluations, tokens, gpu_s or wall_s), or
        ``"space"`` (every configuration the built-in search screened, those evaluated in full marked) or
        ``"roofline"`` (each timed candidate against the device's ceilings)."""
        return notebook.plot(self, over)

    def screened(self) -> list[ScreenedRow]:
        """The configurations the built-in search screened, fastest first: knobs, flags, status, time relative to
        the start with its interval, and ``evaluated`` (the candidate it became when evaluated in full)."""
        return notebook.screened(self)

    def not_winner(self) -> dict[str, NotWinner]:
        """For each timed candidate that is not the winner, why not: a ``NotWinner`` (``reason``: noise_floor,
        slower, tied, below_baseline, sanitizer, set_aside or tied_earlier; ``text``: the same in words)."""
        return notebook.not_winner(self)

    def candidate(self, entry_id: str):
        """One candidate: its diff against its parent and its result (renders itself in Jupyter)."""
        return notebook.candidate(self, entry_id)

    def report(self, out: str | Path | None = None) -> Path:
        """Write the self-contained HTML report (default: report.html in the run folder)."""
        return notebook.report(self, out)

    def _repr_html_(self) -> str:
        return notebook.run_html(self)


def optimize(task: str | Path | None = None, model: str | None = None, *, base_url: str | None = None,
             api_key: str | None = None, config: config_mod.RunConfig | dict | str | Path | None = None,
             iterations: int | None = None, sandbox: str | None = None, tune: bool | None = None,
             sanitize: bool | None = None, traces: str | Path = "traces", run_id: str | None = None,
             resume: str | Path | None = None, replay: str | Path | None = None, proposer: Proposer | None = None,
             on_progress: Callable[[str, dict], None] | None = None, progress: bool = True) -> Run:
    """Optimize ``task`` (a suite name or a task folder), or continue the run at ``resume``.

    Without ``model`` (and no model in ``config``) the built-in search over knobs and flags runs.
    ``replay`` replays a previous run's model answers; ``proposer`` plugs in any ``Proposer``.
    ``sanitize=False`` skips compute-sanitizer on the winner (``[sanitize] enabled``).
    ``api_key`` is used for this run only and never written; otherwise the key comes from the
    environment variable the model config names (``OPENAI_API_KEY`` by default).
    ``progress`` shows a progress bar (a widget in Jupyter, text on stderr elsewhere) unless ``on_progress``
    is given: it receives each live snapshot (``agent.loop.progress.snapshot``) instead.
    """
    overrides: dict[str, Any] = {}
    model_over = {k: v for k, v in (("name", model), ("base_url", base_url)) if v is not None}
    if model_over:
        overrides["model"] = model_over
    if iterations is not None:
        overrides["budget"] = {"iterations": iterations}
    if sandbox is not None:
        overrides["sandbox"] = sandbox
    if tune is not None:
        overrides["tune"] = {"enabled": tune}
    if sanitize is not None:
        overrides["sanitize"] = {"enabled": sanitize}
    bar = notebook.ProgressBar() if progress and on_progress is None else None
    try:
        return run_with(task, file_data(config), overrides, traces=traces, run_id=run_id, resume=resume, key=api_key,
                        replay=replay, proposer=proposer, on_progress=on_progress or bar)
    finally:
        if bar is not None:
            bar.close()


def file_data(config) -> dict:
    if config is None:
        return {}
    if isinstance(config, config_mod.RunConfig):
        return config.model_dump(mode="json", exclude_unset=True)
    if isinstance(config, dict):
        return config
    return config_mod.read_file(config)


def run_with(task, base: dict, overrides: dict, *, traces, run_id=None, resume=None, key=None, replay=None,
             proposer=None, on_progress=None, where: str = "config") -> Run:
    """Start or resume one run from config data; used by ``optimize``, the CLI and batches."""
    if resume is not None:
        path = resolve_run(resume, traces)
        session, pending = session_mod.resume(
            path, lambda recorded: config_mod.build(config_mod.merge(recorded, base), overrides, where),
            key=key, proposer=proposer, on_progress=on_progress)
    else:
        if task is None:
            raise config_mod.ConfigError("no task given (a suite name or a task folder)")
        cfg = config_mod.build(base, overrides, where)
        session = session_mod.start(task, cfg, Path(traces), run_id=run_id, key=key, proposer=proposer,
                                    replay=str(replay) if replay else None, on_progress=on_progress)
        pending = []
    summary = session_mod.drive(session, pending)
    return Run(summary.run_id, session.trace.path, summary, session_mod.entries(session))


def load_run(ref: str | Path, traces: str | Path = "traces") -> Run:
    """Open a stored run (a run folder, or a run id under ``traces``) as a ``Run``: no GPU, no model, nothing
    re-run. A run that did not finish gets a summary made from its events, which says so."""
    stored = read(ref, traces)
    summary = stored.summary
    if summary is None:
        best, base = stored.best, stored.baseline
        summary = Summary(run_id=stored.id, task=TaskRef(name=stored.task_name), sandbox=stored.info.sandbox.kind,
                          simulated=stored.simulated, best=entry_row(best) if best else None,
                          baseline=entry_row(base) if base else None, candidates=len(stored.entries),
                          notes=[UNFINISHED_NOTE])
    return Run(stored.id, stored.path, summary, stored.entries)
