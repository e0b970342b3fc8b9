"""The agent loop: ``select -> propose -> evaluate -> record``, limits checked in one place.

Proposals are asked for on threads (up to ``parallel`` requests open at once, so a slow model does not idle the
GPU). Answers are taken in the order they were asked for and their candidates recorded in that order
(``agent.loop.pipeline``), so the same answers give the same lineage whatever the model's latencies and however
many GPUs evaluate: with one sandbox a candidate is evaluated when its turn comes (timing needs the GPU to
itself); with a cluster (``sandbox.cluster.RaySandbox``) candidates compile and evaluate on its GPUs at once and
are recorded in order. A request counts as open until every candidate of its answer is recorded, and the next
request is sent then. Every step is written to the trace before the loop moves on, so a killed run resumes.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from typing import Callable

from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task, TaskError

from .budget import Budget, Totals
from ..config import SelectionConfig
from .judge import diagnose
from .pipeline import Item, Pipeline
from ..protocols import (Entry, Journaled, Lineage, Proposal, ProposalRequest, Proposer, ProposerFailed, Usage,
                         score)
from ..trace.events import (BestEvent, ErrorEvent, EvaluationEvent, ModelCallEvent, PhaseEvent, ProposalEvent,
                            RequestEvent, ScreenedConfig, ScreenEvent, SkipEvent, StopEvent, ToolCallEvent)
from ..trace.fold import Pending
from ..trace.records import CandidateRecord
from ..trace.writer import Trace
from ..stops import INTERRUPTED, NOTHING_LEFT, Stop, StopReason


class Loop:
    def __init__(self, task: Task, sandbox: Sandbox, lineage: Lineage, trace: Trace, budget: Budget, totals: Totals,
                 selection: SelectionConfig, on_progress: Callable[[str, "Loop"], None] | None = None,
                 profile: str = "prompt", model_run: bool = True):
        self.task, self.sandbox, self.lineage, self.trace = task, sandbox, lineage, trace
        self.budget, self.totals, self.selection, self.profile = budget, totals, selection, profile
        self.model_run = model_run   # a model reads diagnoses in this run's setup and model phases
        self.on_progress = on_progress or (lambda kind, loop: None)
        self.next_candidate = len(lineage.entries())
        self.next_request = 0
        self.cut_off: list[RequestEvent] = []   # a resumed run asks these again first, as they were (``resume``)
        self.sessions: dict[str, list] = {}     # and their tool-calling sessions go on from what they recorded
        self.last: Entry | None = None
        self.phase = "setup"

    # ---- the loop --------------------------------------------------------------------------------

    def run(self, proposer: Proposer, phase: str, parallel: int = 1, target: Entry | None = None) -> Stop:
        """Ask ``proposer`` for candidates until a limit or the proposer stops; returns why it stopped."""
        self.phase = phase
        self.trace.event(PhaseEvent(name=phase, proposer=proposer.name, target=target.id if target else None))
        attach = getattr(proposer, "attach", None)
        if callable(attach):   # a tool-calling session measures on the run's sandbox
            attach(self.sandbox)
        pipeline = Pipeline(self.sandbox, self.task, self.lineage, self._gate)
        inbox: dict[str, tuple] = {}
        arrived = threading.Condition()
        asked: deque[ProposalRequest] = deque()
        stop = None
        try:
            while True:
                stop = stop or self.limit(phase)
                while stop is None and len(asked) + pipeline.requests() < parallel:
                    asked.append(self.send(proposer, self.request(phase, target), inbox, arrived))
                    stop = self.limit(phase)
                if not asked and not len(pipeline):
                    break
                # Every answer already in is taken, in request order, before the GPU is waited on: their candidates
                # join the pipeline and their compiles start now, beside the evaluations ahead of them, instead of
                # one answer's compile starting only once the candidates before it are recorded. Requests are still
                # sent, and candidates recorded, in the same order.
                answer = self.receive(asked, inbox, arrived, phase, wait=0.0 if len(pipeline) else 0.5)
                took = answer is not None
                while answer is not None:
                    stop = self.take(answer, phase, proposer, pipeline, stop)
                    answer = self.receive(asked, inbox, arrived, phase, wait=0.0)
                timeout = 0.0 if took else 0.2   # nothing came in: wait on the GPUs a moment
                while (item := pipeline.head(timeout)) is not None:
                    stop, timeout = self.settle(item, pipeline) or stop, 0.0
                    if item.candidate is None:   # its request is closed: the next one is sent before recording more
                        break
        except KeyboardInterrupt:
            stop = INTERRUPTED
        pipeline.abandon()
        self.totals.in_flight = 0
        self.trace.event(StopEvent(phase=phase, reason=stop.reason, message=stop.message))
        self.on_progress("stop", self)
        return stop

    def take(self, answer: tuple, phase: str, proposer: Proposer, pipeline: Pipeline, stop: Stop | None) -> Stop | None:
        """Record an answer's proposals and queue their candidates (none once the sandbox failed)."""
        request, outcome = answer
        if isinstance(outcome, ProposerFailed):
            self.record_failure(request, outcome)
            if stop is None or not stop.reason.failed:  # a limit reached meanwhile does not hide it
                stop = StopReason.MODEL_ENDPOINT.because(f"model endpoint: {outcome}")
        elif isinstance(outcome, BaseException):
            self.trace.event(ErrorEvent(request=request.id, error=repr(outcome)))
            raise outcome
        elif not outcome:
            stop = stop or NOTHING_LEFT
        failed = stop is not None and stop.reason is StopReason.SANDBOX
        rid = request.id
        proposals = outcome if isinstance(outcome, list) else []
        screen = [p for p in proposals if p.stage == "screen"]
        if screen and not failed:
            stop = self.screen(screen, phase, proposer) or stop
            failed = stop is not None and stop.reason is StopReason.SANDBOX
        listed = [p for p in proposals if p.stage != "screen"]
        for proposal in listed:
            entry_id = self.record_proposal(request, proposal, phase, len(listed))
            if entry_id is not None and not failed:
                pipeline.add(Item(entry_id, proposal.candidate, proposal, request.iteration, phase, proposer, rid))
        if not failed:
            pipeline.add(Item(None, None, None, request.iteration, phase, proposer, rid))  # holds the request open
        return stop

    def _gate(self, phase: str) -> Stop | None:
        limit = self.limit(phase)
        return limit if limit is not None and limit.reason.blocks_evaluation else None

    def limit(self, phase: str) -> Stop | None:
        self.totals.wall_s = self.trace.wall_s
        return self.budget.exhausted(self.totals, phase)

    # ---- select + propose ---------------------------------------------------------------------

    def request(self, phase: str, target: Entry | None) -> ProposalRequest:
        """The next request: one a kill cut off in this phase, asked again with its id, iteration and parents;
        else a new one. With no parent (a task without a CUDA baseline, nothing evaluated yet) it asks for a first
        kernel written from the task's PyTorch module."""
        again = next((r for r in self.cut_off if r.phase == phase), None)
        if again is not None:
            self.cut_off.remove(again)
            rid, iteration, why, island = again.request, again.iteration, again.why, again.island
            parents = [target] if target else [self.lineage.get(p) for p in again.parents]
        else:
            rid, iteration = f"r{self.next_request:04d}", self.next_request + 1
            self.next_request += 1
            parents = [target] if target else self.lineage.select(1, iteration=iteration)
            pick = getattr(self.lineage, "last_pick", None)   # why the lineage picked it (agent.loop.database)
            why, island = (pick.why, pick.island) if target is None and pick and parents else (None, None)
        inspire = getattr(self.lineage, "inspirations", None)
        inspirations = inspire(parents[0] if parents else None) if inspire and phase == "model" else []
        failures = self.lineage.recent_failures(self.selection.recent_failures, exclude={p.id for p in parents})
        extra = {"sandbox": self.sandbox.kind, "phase": phase, "since_improvement": self.totals.since_improvement,
                 "model_spend": dict(self.totals.by_model)}
        request = ProposalRequest(self.task, parents, self.lineage.best(), self.lineage.baseline(), failures,
                                  self.sandbox.device, iteration, extra, id=rid, inspirations=inspirations,
                                  journal=self.journal(rid), replay=self.sessions.pop(rid, None))
        self.trace.event(RequestEvent(request=rid, iteration=request.iteration, phase=phase,
                                      parents=[p.id for p in parents], why=why, island=island,
                                      inspirations=[f"{i.entry.id}: {i.why}" for i in inspirations] or None))
        return request

    def journal(self, rid: str):
        """How request ``rid``'s tool-calling session writes each model call and tool call as it happens."""
        def write(kind: str, fields: dict) -> None:
            self.trace.event(ModelCallEvent(request=rid, **fields) if kind == "model_call"
                             else ToolCallEvent(request=rid, **fields))
        return write

    def send(self, proposer: Proposer, request: ProposalRequest, inbox: dict, arrived: threading.Condition) -> ProposalRequest:
        def work():
            try:
                outcome = proposer.propose(request)
            except BaseException as exc:  # handed to the loop's thread, which decides
                outcome = exc
            with arrived:
                inbox[request.id] = (request, outcome)
                arrived.notify_all()

        self.totals.in_flight += 1
        threading.Thread(target=work, name=f"propose-{request.id}", daemon=True).start()
        self.on_progress("request", self)
        return request

    def receive(self, asked: deque, inbox: dict, arrived: threading.Condition, phase: str, wait: float):
        """The oldest request's answer once it is in (waiting up to ``wait`` seconds; 0.5 s slices when there is
        nothing else to do), or None."""
        if not asked:
            return None
        rid = asked[0].id
        with arrived:
            arrived.wait_for(lambda: rid in inbox, timeout=wait)
            if rid not in inbox:
                return None
            request, outcome = inbox.pop(rid)
        asked.popleft()
        self.totals.in_flight -= 1
        if phase == "model" and not isinstance(outcome, BaseException):
            self.totals.iterations += 1
        return request, outcome

    def record_proposal(self, request: ProposalRequest, proposal: Proposal, phase: str,
                        answer_proposals: int) -> str | None:
        """Record one of an answer's ``answer_proposals`` proposals; returns its candidate's id (None without one)."""
        rid = request.id
        exchange = proposal.exchange or {}
        journaled = self.spent(rid, exchange.get("attempts", []), exchange.get("tools", []), proposal.usage,
                               exchange.get("journaled"), exchange.get("answered_by"))
        entry_id = None
        if proposal.candidate is not None:
            entry_id = f"c{self.next_candidate:04d}"
            self.next_candidate += 1
            proposal.candidate = dataclasses.replace(proposal.candidate, label=entry_id)
            self.trace.save_candidate(entry_id, proposal.candidate.render())
        attempts = exchange.get("attempts") or [{}]
        answer = exchange.get("answer", attempts[-1].get("response"))
        self.trace.event(ProposalEvent(request=rid, iteration=request.iteration, phase=phase, candidate_id=entry_id,
                                       parents=proposal.parent_ids, origin=proposal.origin, note=proposal.note,
                                       error=proposal.error, usage=proposal.usage, answer=answer,
                                       candidate=CandidateRecord.of(proposal.candidate) if proposal.candidate else None,
                                       answer_proposals=answer_proposals, answered_by=exchange.get("answered_by"),
                                       model_rule=exchange.get("model_rule"),
                                       model_calls=journaled.model_calls + len(exchange.get("attempts", []))
                                       if exchange else None))
        self.on_progress("proposal", self)
        return entry_id

    def record_failure(self, request: ProposalRequest, error: ProposerFailed) -> None:
        """The model calls and tool calls of a request the proposer failed for good (its endpoint), and what they
        cost: a session cut off midway leaves what it measured in the trace and the totals."""
        self.spent(request.id, [{"response": "", **a} for a in error.attempts], error.tools, error.usage,
                   error.journaled, getattr(error, "answered_by", None))

    def spent(self, rid: str, attempts: list[dict], tools: list[dict], usage: Usage, journaled: Journaled | None,
              answered_by: str | None) -> Journaled:
        """Write a request's model and tool calls not yet in the trace, and count what the request cost in this
        run: its usage but that of calls replayed from a killed run, and its tool calls' GPU-seconds."""
        journaled = journaled or Journaled()
        for attempt in attempts:
            self.trace.event(ModelCallEvent(request=rid, **attempt))
        for call in tools:
            self.trace.event(ToolCallEvent(request=rid, **call))
        self.totals.gpu_s += journaled.gpu_s + sum(call["gpu_s"] for call in tools)
        new = usage - journaled.replayed
        self.totals.usage = self.totals.usage + new
        self.totals.spent_by(answered_by, new)
        return journaled

    # ---- screen, evaluate + record --------------------------------------------------------------

    def screen(self, proposals: list[Proposal], phase: str, proposer: Proposer) -> Stop | None:
        """Screen a batch of the built-in search's configurations in one GPU process unless a GPU or wall limit
        forbids; none of them becomes an entry (only finalists evaluated in full do). Returns why to stop, or None."""
        limit = self.limit(phase)
        if limit is not None and limit.reason.blocks_evaluation:
            self.trace.event(SkipEvent(candidate_id=None,
                                       reason=f"budget: {limit.message} ({len(proposals)} configurations not screened)"))
            return limit
        try:
            found = self.sandbox.screen(self.task, [p.candidate for p in proposals])
        except (RuntimeError, TaskError) as exc:
            why = str(exc).splitlines()[0]
            self.trace.event(SkipEvent(candidate_id=None,
                                       reason=f"sandbox: {why} ({len(proposals)} configurations not screened)"))
            return StopReason.SANDBOX.because(f"sandbox: {why}")
        gpu_s = sum(s.gpu_s for s in found)
        self.totals.gpu_s += gpu_s
        self.totals.screen_gpu_s += gpu_s
        self.totals.screened += len(found)
        self.trace.event(ScreenEvent(phase=phase, parents=sorted({i for p in proposals for i in p.parent_ids}),
                                     gpu_s=gpu_s, configurations=[screen_record(p, s) for p, s in zip(proposals, found)]))
        for p, s in zip(proposals, found):
            proposer.observe_screened(p, s)
        self.on_progress("screen", self)
        return None

    # ---- evaluate + record --------------------------------------------------------------------

    def evaluate(self, pending: Pending) -> Stop | None:
        """Evaluate a recorded proposal now (the baseline, one a resumed run found pending) unless a GPU or wall
        limit forbids; returns why to stop, or None."""
        item = Item(pending.entry_id, pending.proposal.candidate, pending.proposal, pending.iteration, pending.phase)
        Pipeline(self.sandbox, self.task, self.lineage, self._gate).settle(item)
        return self.settle(item)

    def settle(self, item: Item, pipeline: Pipeline | None = None) -> Stop | None:
        """Record what became of a candidate; returns why to stop, or None. A sandbox failure drops what the
        pipeline still holds (those proposals stay in the trace, unevaluated, for a resume)."""
        entry_id, candidate, proposal = item.entry_id, item.candidate, item.proposal
        if candidate is None:
            return None
        if item.blocked is not None:
            self.trace.event(SkipEvent(candidate_id=entry_id, reason=f"budget: {item.blocked.message}"))
            return item.blocked
        if item.failure is not None:
            self.trace.event(SkipEvent(candidate_id=entry_id, reason=f"sandbox: {item.failure}"))
            if pipeline is not None:
                pipeline.abandon()
            return StopReason.SANDBOX.because(f"sandbox: {item.failure}")
        if item.lost:
            self.trace.event(SkipEvent(candidate_id=entry_id, reason=f"lost: {'; '.join(item.lost)}"))
            return None
        result, key = item.result, item.identity
        if item.duplicate_of:
            self.totals.duplicates += 1
            self.trace.event(SkipEvent(candidate_id=entry_id, reason="duplicate", duplicate_of=item.duplicate_of))
            return None
        diagnosis = diagnose(self.sandbox, self.task, self.lineage, candidate, result, proposal.parent_ids, self.profile,
                             proposal.origin, prompts=self.model_run and item.phase in ("setup", "model"))
        entry = Entry(entry_id, candidate, result, list(proposal.parent_ids), proposal.origin, item.iteration,
                      proposal.note, diagnosis)
        improved = self.account(entry, key)
        self.trace.save_candidate(entry.id, candidate.render(), result.to_json())
        self.trace.event(EvaluationEvent(candidate_id=entry.id, status=result.status.value, identity=key,
                                         summary=result.summary(), diagnosis=diagnosis, result=result))
        if improved:
            self.trace.event(BestEvent(candidate_id=entry.id, speedup=result.speedup("baseline")))
        if item.proposer is not None:
            item.proposer.observe(entry)
        self.on_progress("evaluation", self)
        return None

    def account(self, entry: Entry, identity: str | None) -> bool:
        """Add an evaluated entry to the lineage and the totals; True when it is the new winner (``best``)."""
        before = self.lineage.best()
        leads = entry.origin != "baseline" and self.lineage.would_lead(entry.result)
        self.lineage.add(entry, identity)
        self.last = entry
        self.totals.gpu_s += entry.result.cost.gpu_s
        self.totals.evaluations += 1
        self.next_candidate = max(self.next_candidate, int(entry.id[1:]) + 1)
        new = score(entry)
        if new is None or entry.origin == "baseline":
            return False
        old = score(before) if before else None
        gain = self.budget.config.plateau_min_gain
        self.totals.since_improvement = 0 if old is None or new > old * (1 + gain) else self.totals.since_improvement + 1
        return leads


def screen_record(proposal: Proposal, screened) -> ScreenedConfig:
    """One screened configuration as the trace keeps it: what it was, what screening measured."""
    c = proposal.candidate
    return ScreenedConfig(config=proposal.note, knobs=c.defines(), flags=list(c.flags), status=screened.status,
                          relative=screened.relative, relative_ci=screened.relative_ci, ms=screened.ms,
                          baseline_ms=screened.baseline_ms, rounds=screened.rounds, stopped=screened.stopped,
                          error=screened.error[:300], gpu_s=screened.gpu_s)
