"""One run from start (or resume) to summary: open the sandbox and the trace, evaluate the baseline,
run the phases (``model`` then ``tune``, or ``search`` alone without a model), make the claim
(``agent.claims.claim``: the leader is re-checked at the held-out sizes before it is tuned), write the summary.

A task imported from PyTorch may have no CUDA baseline: then nothing is evaluated before the model phase,
whose first request shows the module's source, and a run without a model is refused (the search needs a
kernel to start from).

A resumed run rebuilds its lineage and totals from ``events.jsonl``, evaluates the proposals that
were recorded but never evaluated, and re-enters every phase that did not finish for good.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from sandbox.candidates.candidate import load_candidate
from sandbox.judging.result import Status
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task, TaskError, load_task

from ..claims.claim import Claimant
from ..claims.retime import concurrent
from ..config import ConfigError, RunConfig, api_key, run_name
from ..protocols import Entry, Proposal, Proposer
from . import summary as summary_mod
from ..trace.events import EndEvent, Event, ProposalEvent, ScreenEvent, StopEvent, read_events
from ..trace.fold import Pending
from ..trace.lock import FolderLock
from ..trace.reader import read_record, verify_run
from ..trace.records import CandidateRecord, RunInfo, SandboxInfo, SessionInfo, Summary, TaskInfo
from ..trace.writer import Trace
from . import progress
from .budget import Budget, Totals
from .lineage import MemoryLineage
from .loop import Loop
from .opening import (check_baseline, choose_proposer, cluster_notes, model_window, new_run_id, open_run_sandbox,
                      reachable, redactor, tuner)
from .resume import FastForward, recorded_search, restore
from ..stops import Stop, StopReason

if TYPE_CHECKING:
    from ..tune.proposer import TunerProposer


@dataclass
class Session:
    task: Task
    config: RunConfig
    trace: Trace
    sandbox: Sandbox
    proposer: Proposer
    main_phase: str
    lineage: MemoryLineage
    totals: Totals
    loop: Loop
    notes: list[str]
    claimant: Claimant
    stops: dict[str, Stop] = field(default_factory=dict)
    tuners: list[TunerProposer] = field(default_factory=list)
    screened: list[ScreenEvent] = field(default_factory=list)   # a resumed run's recorded screenings (tuners reuse them)
    events: list[Event] = field(default_factory=list)   # what a resumed run had recorded
    searching: TunerProposer | None = None   # the built-in search now running (its progress against its budget)


def start(task_ref: str | Path, cfg: RunConfig, traces: Path, run_id: str | None = None, key: str | None = None,
          proposer: Proposer | None = None, replay: str | None = None,
          on_progress: Callable | None = None) -> Session:
    if run_id is not None:
        run_name(run_id)
    task = load_task(task_ref)
    if cfg.model and cfg.model.answer_format == "modelnew" and task.spec.torch is None:
        raise ConfigError(f"--answer-format modelnew: task {task.name} was not imported from PyTorch, so there is no "
                          "Model for a ModelNew to replace; answer with .cu candidates (--answer-format cuda)")
    if cfg.model and cfg.model.answer_format == "modelnew" and cfg.model.tools:
        raise ConfigError("--answer-format modelnew: [model] tools sessions compile and time .cu candidates only; "
                          "set tools = false for ModelNew answers")
    if cfg.model and proposer is None and not replay:
        api_key(cfg.model, key)
        reachable(cfg, key)
    if not task.has_baseline and cfg.model is None and proposer is None and not replay:
        raise ConfigError(f"task {task.name} has no CUDA starting kernel (baseline.cu) for the built-in search to tune; "
                          "give a model (--model), whose first kernel is written from the PyTorch module's source")
    check_baseline(task)
    run_id = run_id or new_run_id(task)
    sandbox = open_run_sandbox(cfg)
    try:
        chosen, phase, about = choose_proposer(cfg, key, proposer, replay, 0, sandbox)
    except BaseException:
        sandbox.close()
        raise
    from sandbox.plumbing.envinfo import software

    info = RunInfo(run_id=run_id, created=dt.datetime.now().isoformat(timespec="seconds"),
                   task=TaskInfo(name=task.name, version=task.spec.version, fingerprint=task.fingerprint,
                                 folder=str(task.folder.resolve())),
                   config=cfg.public(), proposer=about, sandbox=SandboxInfo(kind=sandbox.kind, device=sandbox.device,
                                                                   cluster=sandbox.describe()),
                   environment=software(), sessions=[_session_info(cfg, resumed=False)])
    try:
        trace = Trace.create(Path(traces) / run_id, info, redactor(cfg, key))
    except BaseException:
        sandbox.close()
        raise
    session = _session(task, cfg, trace, sandbox, chosen, phase, on_progress)
    session.claimant.sessions = info.sessions
    return session


def resume(path: Path, overrides_cfg: Callable[[dict], RunConfig], key: str | None = None,
           proposer: Proposer | None = None, on_progress: Callable | None = None) -> tuple[Session, list[Pending]]:
    """Reopen a run folder. ``overrides_cfg`` turns the recorded config into the one to use now."""
    path = Path(path)
    if not (path / "run.json").is_file():
        raise ConfigError(f"{path}: not a run folder (no run.json)")
    lock = FolderLock(path).acquire()  # before reading: a live run may be appending
    try:
        return _resume(path, lock, overrides_cfg, key, proposer, on_progress)
    except BaseException:
        lock.release()
        raise


def _resume(path: Path, lock: FolderLock, overrides_cfg, key, proposer, on_progress) -> tuple[Session, list[Pending]]:
    info = read_record(path / "run.json", RunInfo, required=True)
    events = read_events(path, repair=True)  # a damaged line is refused, only a torn last line is cut
    verify_run(path, events)
    try:
        task = load_task(info.task.folder)
    except TaskError as exc:
        raise TaskError(f"{path}: the run's task cannot be loaded: {exc}") from None
    if task.fingerprint != info.task.fingerprint:
        raise TaskError(f"{task.folder}: the task changed since run {info.run_id} started "
                        f"(fingerprint {task.fingerprint}, recorded {info.task.fingerprint}); start a new run")
    cfg = overrides_cfg(info.config)
    if cfg.model and proposer is None and info.proposer.kind == "llm":
        reachable(cfg, key)
    done_model = sum(1 for e in events if isinstance(e, ProposalEvent) and e.phase == "model")
    replay = info.proposer.replay if info.proposer.kind == "replay" else None
    sandbox = open_run_sandbox(cfg)
    try:
        chosen, phase, _ = choose_proposer(cfg, key, proposer, replay, done_model, sandbox)
    except BaseException:
        sandbox.close()
        raise
    trace = Trace.resume(path, redactor(cfg, key), lock)
    sessions = info.sessions + [_session_info(cfg, resumed=True)]
    trace.update_run_info(config=cfg.public(), sessions=sessions)
    session = _session(task, cfg, trace, sandbox, chosen, phase, on_progress)
    session.claimant.sessions, session.claimant.events = sessions, events
    state = restore(session.loop, events)
    session.events = events
    session.stops = {e.phase: Stop(e.reason, e.message) for e in events if isinstance(e, StopEvent)}
    session.screened = [e for e in events if isinstance(e, ScreenEvent)]
    return session, state.pending


def _session_info(cfg: RunConfig, resumed: bool) -> SessionInfo:
    return SessionInfo(started=time.time(), resumed=resumed,
                       concurrent=concurrent(cfg.parallel, cfg.cluster is not None))


def _session(task, cfg, trace, sandbox, proposer, phase, on_progress) -> Session:
    lineage = MemoryLineage(cfg.selection)
    totals = Totals()
    notes: list[str] = []
    session = Session(task, cfg, trace, sandbox, proposer, phase, lineage, totals, None, notes,
                      Claimant(sandbox, task, lineage, trace, cfg.sanitize, notes))
    if cfg.sandbox == "auto" and sandbox.kind == "compile-only":
        session.notes.append("--sandbox auto: no CUDA device answered, so this run only compiles")
    hook = progress_hook(session, on_progress) if on_progress else None
    session.loop = Loop(task, sandbox, lineage, trace, Budget(cfg.budget), totals, cfg.selection, hook, cfg.profile,
                        model_run=phase == "model")
    return session


def progress_hook(session: Session, on_progress: Callable[[str, dict], None]) -> Callable[[str, Loop], None]:
    """The loop's progress hook: at each step, ``on_progress`` gets the step's kind and the session's snapshot
    (``agent.loop.progress``), timed from when the session opened."""
    clock = progress.Clock()

    def hook(kind: str, loop: Loop) -> None:
        on_progress(kind, progress.snapshot(session, clock))

    return hook


# ---- driving a session ---------------------------------------------------------------------------


def drive(session: Session, pending: list[Pending] = ()) -> Summary:
    """Evaluate what is pending, run the phases that are not finished, write the summary; returns it."""
    s, loop = session, session.loop
    try:
        has_baseline = s.task.has_baseline
        if has_baseline and loop.lineage.baseline() is None and not any(p.proposal.origin == "baseline" for p in pending):
            pending = [_baseline_proposal(s)] + list(pending)
        if (s.main_phase == "search" and _should_run(s, "search")) or \
                (s.main_phase == "model" and _should_run(s, "model") and model_window(s) > 1):
            s.sandbox.warm()   # the compile workers of many compiles at once start while the baseline is evaluated
        if _will_profile(s):
            s.sandbox.warm_profiler()   # the first profile's run starts up while the baseline is evaluated
        for p in pending:
            skip = loop.evaluate(p)
            if skip:
                s.stops[p.phase] = skip
        base = loop.lineage.baseline()
        if has_baseline and (base is None or base.result.status not in (Status.ok, Status.compiled)):
            why = f"{base.result.status.value}: {base.result.error}" if base else "not evaluated"
            s.stops.setdefault("setup", StopReason.BASELINE.because(f"baseline: the task's starting kernel is {why}"))
        else:
            _phases(s)
    finally:
        result = finish(s)
    return result


def _phases(s: Session) -> None:
    loop = s.loop
    if s.main_phase == "search":
        if _should_run(s, "search"):
            s.proposer.restore_screened(s.screened)
            s.stops["search"] = _search(s, s.proposer, "search")
        return
    if _should_run(s, "model"):
        s.stops["model"] = loop.run(s.proposer, "model", parallel=model_window(s))
    model_stop = s.stops.get("model")
    if not s.config.tune.enabled or (model_stop and model_stop.reason.skips_tuning) or not _should_run(s, "tune"):
        return
    if s.sandbox.kind == "compile-only":
        s.notes.append("tuning skipped: a compile-only run times nothing, so there is nothing to rank")
        return
    if (loop.lineage.best() or loop.lineage.baseline()) is None:
        s.notes.append("tuning skipped: no candidate was measured, so there is nothing to tune")
        return
    if s.claimant.eligible():
        s.claimant.recheck()   # a leader set aside at a held-out size is not tuned
    leader = loop.lineage.best() or loop.lineage.baseline()
    if getattr(leader.candidate, "format", "cuda") == "modelnew":
        s.notes.append("tuning skipped: the leader is a ModelNew module, which has no launch plan, knobs or flags "
                       "to sweep")
        return
    try:
        tune = tuner(s.config, s.sandbox)
    except ConfigError as exc:
        s.notes.append(f"tuning skipped: {exc}")
        return
    tune.restore_screened(s.screened)
    s.sandbox.warm()
    try:
        s.stops["tune"] = _search(s, tune, "tune")
    finally:
        s.tuners.append(tune)


def _search(s: Session, search: TunerProposer, phase: str) -> Stop:
    """Run the built-in search from the best so far; a resumed one first retraces its recorded steps."""
    lineage = s.loop.lineage
    s.searching = search
    target_id, steps = recorded_search(s.events, phase, lineage)
    target = next((e for e in lineage.entries() if e.id == target_id), None) or lineage.best() or lineage.baseline()
    return s.loop.run(FastForward(search, steps) if steps else search, phase, parallel=1, target=target)


def _will_profile(s: Session) -> bool:
    """Whether this session will profile (``agent.loop.judge.should_profile``'s policies): ``all`` and
    ``promising`` do in any phase, ``prompt`` where a model reads the diagnoses and its phase is still to run."""
    policy = s.config.profile
    if policy in ("all", "promising"):
        return True
    return policy == "prompt" and s.loop.model_run and _should_run(s, "model")


def _should_run(s: Session, phase: str) -> bool:
    stop = s.stops.get(phase)
    if stop is None:
        return True
    if stop.reason.final:
        return False
    return s.loop.limit(phase) is None


def _baseline_proposal(s: Session) -> Pending:
    cand = dataclasses.replace(load_candidate(s.task.baseline_path), label="c0000")
    s.loop.next_candidate = max(s.loop.next_candidate, 1)
    s.trace.save_candidate("c0000", cand.render())
    s.trace.event(ProposalEvent(request=None, iteration=0, phase="setup", candidate_id="c0000", parents=[],
                                origin="baseline", note="the task's starting kernel", candidate=CandidateRecord.of(cand)))
    return Pending("c0000", Proposal(cand, [], "baseline", note="the task's starting kernel"), 0, "setup")


def finish(s: Session) -> Summary:
    """The claim (``agent.claims.claim``), the summary written once, the run closed."""
    from ..claims.claim import offer_best
    from ..tune.proposer import tuning_section

    try:
        loop = s.loop
        loop.totals.wall_s = s.trace.wall_s
        if s.main_phase == "search":
            s.tuners.append(s.proposer)
        interrupted = any(stop.reason is StopReason.INTERRUPTED for stop in s.stops.values())
        claim = s.claimant.make(s.tuners, loop.totals, interrupted, tuning_section(s.tuners))
        offer_best(s.sandbox, s.task, loop.lineage, claim, s.trace.path.name, s.notes)
        s.notes += cluster_notes(s.sandbox)
        summary = summary_mod.build(s.trace.path.name, s.task, s.sandbox.kind, loop.lineage, loop.totals, s.stops,
                                    s.notes, claim)
        summary = Summary.model_validate(s.trace.redactor.data(summary.to_json()))
        best = loop.lineage.best()
        if best is not None:
            modelnew = getattr(best.candidate, "format", "cuda") == "modelnew"
            s.trace.write_text("best.py" if modelnew else "best.cu", best.candidate.render())
        s.trace.event(EndEvent(summary=summary))  # first: a summary.json without its end event reads as a cut log
        s.trace.write_json("summary.json", summary)
    finally:  # a full disk fails the writes above: the folder's lock and the workers are let go all the same
        s.trace.close()
        for t in s.tuners:
            t.close()
        s.sandbox.close()
    return summary


def entries(session: Session) -> list[Entry]:
    return session.loop.lineage.entries()
