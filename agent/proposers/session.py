"""A tool-calling session (``[model] tools = true``): one request's conversation with the model, whose tool calls
(``agent.proposers.tools``) run on the run's sandbox, until it submits a candidate, answers with one, or has made
``max_tool_calls`` calls.

Inside a run the request has a ``journal``: each answered model call and each tool call is written to the trace as
it happens, so a run killed mid-session loses none of them. A resumed run hands the request what was recorded
(``replay``) and the session goes on from there: the conversation is rebuilt from the recorded messages, a recorded
tool result is used as it was recorded (its tool does not run again), and the model is asked only for the turns it
never answered. The replayed calls were paid for by the run that made them; the proposal names them
(``Journaled``) so the run's totals count them once.

Outside a run (no journal) every call goes into the proposal's ``exchange`` for whoever records it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import prompts
from .answer import FormatError
from .tools import TOOLS, ToolBox, ToolCall
from ..protocols import Journaled, Proposal, ProposalRequest, ProposerFailed, Usage


class ToolSession:
    def __init__(self, proposer: Any, request: ProposalRequest):
        """``proposer``: the ``LLMProposer`` whose endpoint, prompts and answer parsing the session uses."""
        self.proposer, self.request, self.config = proposer, request, proposer.config
        self.edits = proposer._edits(request)
        self.box = ToolBox(proposer.sandbox, request, self.edits)
        self.journal = request.journal
        self.conversation: list[dict] = []
        self.state = {"max_tokens": self.config.max_tokens, "sent": 0}
        self.attempts: list[dict] = []      # model calls for the exchange (without a journal, all of them)
        self.usage = Usage()                # the request's, replayed calls included
        self.journaled = Journaled()        # with a journal: the tool calls' GPU-seconds, the replayed usage
        self.retries = 0                    # answers that could not be used
        self.turn = 0                       # answered model calls so far
        self.answer = ""                    # the last answer's text

    def run(self) -> list[Proposal]:
        done = self._replay() if self.request.replay else self._open()
        while done is None and self.turn < self.config.max_tool_calls + 1 + self.config.semantic_retries:
            try:
                reply = self.proposer._ask(self.conversation, self.state, tools=TOOLS)
            except ProposerFailed as exc:   # the endpoint's ModelEndpointError
                raise self._failed(exc) from None
            self.usage = self.usage + reply["usage_obj"]
            done = self._answer(reply, recorded=[])
        if done is None:
            return self._proposal(error=f"the session made {len(self.box.calls)} tool calls and never submitted "
                                        f"a candidate")
        return done

    # ---- the conversation ------------------------------------------------------------------------

    def _open(self) -> None:
        self.conversation = prompts.messages(self.request, edits=self.edits)
        self.conversation[0] = {**self.conversation[0], "content": self.conversation[0]["content"] + "\n" +
                                prompts.render("tools", max_tool_calls=self.config.max_tool_calls)}

    def _replay(self) -> list[Proposal] | None:
        """Go on from a killed run's record of this request: every recorded message and tool result as it was;
        the last recorded answer is taken up again where it was cut off (its tool calls not recorded run now)."""
        from ..trace.events import ModelCallEvent

        asked = [ev for ev in self.request.replay if isinstance(ev, ModelCallEvent)]
        for ev in asked:
            self.conversation.extend(dict(m) for m in ev.messages)
            self.usage = self.usage + ev.usage
            self.journaled.replayed = self.journaled.replayed + ev.usage
        self.retries = sum(1 for ev in asked[:-1] if ev.error and not ev.tool_calls)
        self.box.calls = [ToolCall(ev.name, dict(ev.arguments), ev.result, ev.status, ev.gpu_s, ev.seconds, ev.turn)
                          for ev in self.request.replay if not isinstance(ev, ModelCallEvent)]
        self.state = {"max_tokens": asked[-1].max_tokens, "sent": len(self.conversation)}
        self.turn = len(asked) - 1   # _answer counts the last one again
        last = asked[-1]
        reply = {"content": last.response, "finish_reason": last.finish_reason, "usage_obj": Usage(),
                 "tool_calls": last.tool_calls or [], "record": {}, "replayed": True}
        return self._answer(reply, recorded=[c for c in self.box.calls if c.turn == self.turn])

    def _answer(self, reply: dict, recorded: list[ToolCall]) -> list[Proposal] | None:
        """Take one answer: a candidate ends the session, an unusable one is asked again, tool calls are run (or,
        replayed, read from ``recorded``) and their results go back to the model. The session's proposal, or None."""
        calls = reply["tool_calls"]
        if not calls:
            try:
                candidate, note = self.proposer._accept(reply, self.request, self.conversation, self.state)
            except FormatError as exc:
                candidate, problem = None, exc.problem
            self._answered(reply)
            if candidate is not None:
                return self._proposal(candidate, note)
            self.retries += 1
            return self._proposal(error=f"unusable answer: {problem}") \
                if self.retries > self.config.semantic_retries else None
        turn = self._answered(reply)
        self.conversation.append({"role": "assistant", "content": reply["content"] or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]})
        for k, c in enumerate(calls):
            call = recorded[k] if k < len(recorded) else self._call(c, turn)
            self.conversation.append({"role": "tool", "tool_call_id": c["id"], "content": call.result})
            if c["name"] == "submit" and call.status == "ok":
                candidate, note = self.box.candidate(call.arguments)
                return self._proposal(candidate, note or (reply["content"] or "").strip()[:2000])
        return None

    def _call(self, c: dict, turn: int) -> ToolCall:
        if len(self.box.calls) >= self.config.max_tool_calls and c["name"] != "submit":
            call = ToolCall(c["name"], {}, '{"error": "no tool calls left: submit your candidate now"}', "limit")
            self.box.calls.append(call)
        else:
            call = self.box.run(c["name"], c["arguments"])
        call.turn = turn
        if self.journal is not None:
            self.journal("tool_call", dataclasses.asdict(call))
            self.journaled.gpu_s += call.gpu_s
        return call

    def _answered(self, reply: dict) -> int:
        """An answer is in: written to the trace (or kept for the exchange) once what it was is known; its turn."""
        turn = self.turn
        self.turn += 1
        self.answer = reply["record"].get("response", reply["content"])   # as recorded (a long one is cut)
        if self.journal is None:
            self.attempts.append(reply["record"])
        elif not reply.get("replayed"):
            self.journal("model_call", {**reply["record"], "turn": turn})
        return turn

    # ---- what the session gives back -------------------------------------------------------------

    def _exchange(self) -> dict:
        exchange = self.proposer._exchange(self.attempts)
        if self.journal is None:
            return {**exchange, "tools": [dataclasses.asdict(c) for c in self.box.calls]}
        return {**exchange, "tools": [], "journaled": self._journaled()}

    def _proposal(self, candidate=None, note: str = "", error: str = "") -> list[Proposal]:
        exchange = {**self._exchange(), "answer": self.answer}
        return [Proposal(candidate, [p.id for p in self.request.parents[:1]], self.proposer.name, note=note,
                         error=error, usage=self.usage, exchange=exchange)]

    def _failed(self, exc: ProposerFailed) -> ProposerFailed:
        """The endpoint failed for good: the same error, with what the session had done, for the trace and totals."""
        if self.journal is None:
            return type(exc)(str(exc), self.attempts + exc.attempts, self.usage,
                             [dataclasses.asdict(c) for c in self.box.calls])
        return type(exc)(str(exc), exc.attempts, self.usage, [], self._journaled())

    def _journaled(self) -> Journaled:
        """What is in the trace already: every answered model call (replayed ones too), with what it cost."""
        return dataclasses.replace(self.journaled, model_calls=self.turn)
