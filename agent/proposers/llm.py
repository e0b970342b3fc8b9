"""``LLMProposer``: one rewrite per request from any OpenAI-compatible chat-completions endpoint.

Transport failures (connection errors, 408/409/429/5xx) are retried by the openai SDK itself
(``max_retries``). ``tenacity`` handles only semantic retries: an empty answer, an answer with no
usable code block, or one cut off at the token limit (``finish_reason == "length"``) is answered with
a precise format-error message in the same conversation, up to ``semantic_retries`` times (after a
truncation, with a larger ``max_tokens``); so is an answer longer than ``max_answer_chars``, and one whose
SEARCH/REPLACE edits (offered beside whole files where there is a parent, ``[model] edits``) do not apply. Every
attempt's messages, answer, reasoning text, usage and HTTP attempts (the SDK's retries included) go into
the proposal's ``exchange`` for the trace.

Each request runs under a deadline (``timeout_s``, ``agent.proposers.endpoint``). A request that fails for good (a
refusal, a server down, a body that is not a chat completion, the deadline) raises ``ModelEndpointError``
with a one-line message naming the endpoint. Everything the endpoint sends back passes the run's
``Redactor`` first, so an echoed key reaches neither the screen nor the lineage nor a later prompt. The
``openai`` package is imported on first use.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from . import prompts, roles
from .answer import FormatError, split_reasoning
from .formats import answer_format
from ..config import ModelConfig, Price, api_key as key_for
from ..protocols import Proposal, ProposalRequest, Proposer, ProposerFailed, Usage
from ..redact import Redactor, redact_url

KEPT_OF_LONG_ANSWER = 2000


class ModelEndpointError(ProposerFailed):
    """The endpoint failed after the SDK's own retries: a refusal (bad key, unknown model), a server down, an
    answer that is not a chat completion, the request deadline passed. ``attempts`` and ``usage`` are the
    model calls the failed proposal made, for the trace and the totals; ``answered_by`` names the model (with
    roles), for the per-model ledger."""

    answered_by: str | None = None
    model_rule: str | None = None


class LLMProposer(Proposer):
    name = "llm"

    def __init__(self, config: ModelConfig, api_key: str, price: Price | None = None, client: Any = None,
                 redactor: Redactor | None = None):
        self.config = config
        self.price = price
        self.redactor = redactor or Redactor.for_run(config.base_url, config.api_key_env, api_key,
                                                     config.extra_body)
        self.where = redact_url(config.base_url) if config.base_url else "OpenAI"
        self._api_key = api_key
        self._client = client
        self._lock = threading.Lock()
        self.format = answer_format(config.answer_format)
        self.sandbox = None          # the run's sandbox, for tool-calling sessions (``attach``)
        self.tools_supported: bool | None = None   # None until the first session asks
        self.members = {name: LLMProposer(other.model_copy(update={"answer_format": config.answer_format}), key_for(other), other.price,
                                          redactor=self.redactor.joined(Redactor.for_run(other.base_url,
                                                                                         other.api_key_env)))
                        for name, other in config.others.items()}

    @property
    def client(self):
        with self._lock:
            if self._client is None:
                cfg = self.config
                self._client = _endpoint().client(cfg.base_url, self._api_key, cfg.max_retries, cfg.timeout_s)
            return self._client

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        """One request's answer; with ``[model.others]``, from the model ``agent.proposers.roles`` chooses, named in
        the exchange (``answered_by``, ``model_rule``) for the trace and the per-model ledger."""
        if not self.members:
            return self._one(request)
        choice = roles.choose(self.config, request)
        member = self if choice.model == roles.MAIN else self.members[choice.model]
        try:
            proposals = member._one(request)
        except ModelEndpointError as exc:
            exc.answered_by, exc.model_rule = choice.model, choice.why
            raise
        for p in proposals:
            p.exchange = {**(p.exchange or {}), "answered_by": choice.model, "model_rule": choice.why}
        return proposals

    def _one(self, request: ProposalRequest) -> list[Proposal]:
        """One request: a tool-calling session where configured and the endpoint takes tools, else plain."""
        if not (self.config.tools and self.sandbox is not None and self.tools_supported is not False):
            return self._propose(request)
        try:
            proposals = self._session(request)
        except ModelEndpointError as exc:
            if self.tools_supported is None and self._tools_refused(exc):
                self.tools_supported = False
                print(f"kernelwright: {self.where} does not take tools ({exc}); going on with plain requests",
                      file=sys.stderr, flush=True)
                plain = self._propose(request)
                for p in plain:
                    p.usage = p.usage + exc.usage
                    refused = [{"response": "", **a} for a in exc.attempts]
                    p.exchange = {**(p.exchange or {}), "attempts": refused + (p.exchange or {}).get("attempts", []),
                                  "tools": exc.tools, **({"journaled": exc.journaled} if exc.journaled else {})}
                return plain
            raise
        self.tools_supported = True
        return proposals

    def _propose(self, request: ProposalRequest) -> list[Proposal]:
        conversation = self.format.messages(request, edits=self._edits(request))
        attempts: list[dict] = []
        usage = Usage()
        state = {"max_tokens": self.config.max_tokens, "sent": 0}
        parent_ids = [p.id for p in request.parents[:1]]
        retrying = Retrying(stop=stop_after_attempt(1 + self.config.semantic_retries),
                            retry=retry_if_exception_type(FormatError), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    reply = self._ask(conversation, state)
                    usage = usage + reply["usage_obj"]
                    attempts.append(reply["record"])
                    candidate, note = self._accept(reply, request, conversation, state)
        except FormatError as exc:
            return [Proposal(None, parent_ids, self.name, error=f"unusable answer: {exc.problem}", usage=usage,
                             exchange=self._exchange(attempts))]
        except ModelEndpointError as exc:
            raise ModelEndpointError(str(exc), attempts + exc.attempts, usage) from None
        return [Proposal(candidate, parent_ids, self.name, note=note, usage=usage, exchange=self._exchange(attempts))]

    def observe(self, entry) -> None:
        pass

    def attach(self, sandbox) -> None:
        """The sandbox a tool-calling session's tools measure on (the loop attaches the run's own)."""
        self.sandbox = sandbox
        for member in self.members.values():
            member.attach(sandbox)

    # ---- a tool-calling session --------------------------------------------------------------------

    def _session(self, request: ProposalRequest) -> list[Proposal]:
        """A conversation with tools (``agent.proposers.session``)."""
        from .session import ToolSession

        return ToolSession(self, request).run()

    def _tools_refused(self, exc: ModelEndpointError) -> bool:
        """Whether the endpoint refused the request for its ``tools`` (then the run goes on with plain requests)."""
        text = str(exc).lower()
        return "tool" in text and any(f"http {code}" in text for code in (400, 404, 415, 422, 501))

    # ---- one request ---------------------------------------------------------------------------

    def _ask(self, conversation: list[dict], state: dict, tools: list[dict] | None = None) -> dict:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.name, "messages": [_sendable(m) for m in conversation]}
        if tools:
            kwargs["tools"] = tools
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if state["max_tokens"] is not None:
            kwargs[cfg.max_tokens_field] = int(state["max_tokens"])
        if cfg.reasoning_effort:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if cfg.extra_body:
            kwargs["extra_body"] = dict(cfg.extra_body)
        record: dict[str, Any] = {"messages": conversation[state["sent"]:], "max_tokens": state["max_tokens"]}
        state["sent"] = len(conversation)
        endpoint = _endpoint()
        t0 = time.perf_counter()
        with endpoint.request(cfg.timeout_s) as call:
            record["http"] = call.http
            try:
                raw = self.client.chat.completions.with_raw_response.create(**kwargs)
                parsed = _parse(raw)
                content, reasoning, finish, model, raw_usage = self._unpack(parsed, raw)
                calls = _tool_calls(parsed)
            except Exception as exc:
                message = self._failure(exc)
                record.update(error=message, seconds=round(time.perf_counter() - t0, 3))
                raise ModelEndpointError(message, [record]) from None
        seconds = time.perf_counter() - t0
        content, inline_reasoning = split_reasoning(self.redactor.text(content))
        reasoning = self.redactor.text(reasoning or inline_reasoning or "") or None
        usage = _usage(raw_usage, self.price, seconds)
        record.update(response=content, reasoning=_cut(reasoning, cfg.max_answer_chars), finish_reason=finish,
                      model=model, usage=usage.as_dict(), seconds=round(seconds, 3))
        if calls:
            calls = self.redactor.data(calls)
            record["tool_calls"] = calls
        return {"content": content, "finish_reason": finish, "usage_obj": usage, "record": record, "tool_calls": calls}

    def _unpack(self, parsed: Any, raw: Any) -> tuple[str, str | None, str | None, str | None, Any]:
        """(content, reasoning, finish reason, model, usage) of a chat completion; anything else is a failure."""
        choices = getattr(parsed, "choices", None)
        model = getattr(parsed, "model", None)
        if isinstance(choices, list) and not choices:
            # a completion with nothing in it (some servers send this on a filtered or aborted generation): the
            # answer is empty, and is asked again as any empty answer is
            return "", None, None, model if isinstance(model, str) else None, getattr(parsed, "usage", None)
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if message is None or not isinstance(content, (str, type(None))):
            kind = raw.headers.get("content-type", "no content type") if raw is not None else "?"
            raise _NotACompletion(f"{self.where} answered HTTP {raw.status_code} with a body that is not a chat "
                                  f"completion ({kind}): {_preview(raw)}")
        return content or "", _reasoning(message), getattr(choice, "finish_reason", None), \
            model if isinstance(model, str) else None, getattr(parsed, "usage", None)

    def _failure(self, exc: Exception) -> str:
        """One line saying what went wrong, with the endpoint's URL (credentials redacted) and no secret."""
        import openai

        if isinstance(exc, _NotACompletion):
            text = str(exc)
        elif isinstance(exc, _endpoint().RequestFailed):
            text = f"{self.where}: {exc}"
        elif isinstance(exc, openai.APIStatusError):
            text = f"{self.where} answered HTTP {exc.status_code}: {_brief(exc)}"
        elif isinstance(exc, openai.APIError):
            text = f"{self.where}: {type(exc).__name__}: {_brief(exc)}"
        else:
            text = f"{self.where}: the answer could not be read: {type(exc).__name__}: {_brief(exc)}"
        return self.redactor.text(text)

    def _accept(self, reply: dict, request: ProposalRequest, conversation: list[dict], state: dict):
        """Parse the answer; on failure, append the answer and the format-error message, then raise."""
        content = reply["content"]
        limit = self.config.max_answer_chars
        try:
            if len(content) > limit:
                raise FormatError(f"the answer is {len(content):,} characters long; at most {limit:,} are accepted.",
                                  "too_long")
            parent = request.parents[0].candidate if request.parents and self._edits(request) else None
            return self.format.parse_answer(content, request.task, parent=parent)
        except FormatError as exc:
            error = exc
            if reply["finish_reason"] == "length" and exc.reason != "too_long":
                error = FormatError(f"the answer was cut off at the token limit ({state['max_tokens']} tokens) "
                                    f"before the code was complete ({exc.problem})", "truncated")
                if state["max_tokens"] is not None:
                    state["max_tokens"] = int(state["max_tokens"] * self.config.truncation_growth)
            reply["record"]["error"] = error.problem
            if exc.reason == "too_long":
                reply["record"]["response"] = content = _cut(content, KEPT_OF_LONG_ANSWER)
            conversation.append({"role": "assistant", "content": content})
            conversation.append({"role": "user", "content": self.format.format_error(error.problem, error.reason,
                                                                                 self._edits(request))})
            raise error from None

    def _edits(self, request: ProposalRequest) -> bool:
        return self.config.edits and bool(request.parents) and self.config.answer_format == "cuda"

    def _exchange(self, attempts: list[dict]) -> dict:
        return {"model": self.config.name, "base_url": self.where, "attempts": attempts}


class _NotACompletion(ValueError):
    pass


def _endpoint():
    try:
        from . import endpoint  # the openai SDK and its HTTP stack, imported on first use
    except ImportError as exc:
        raise ModelEndpointError(f"the openai package is missing or broken ({exc}): pip install openai") from None
    return endpoint


def _tool_calls(parsed: Any) -> list[dict]:
    """The tool calls of a chat completion's message: id, name and arguments (a JSON text), in order."""
    choices = getattr(parsed, "choices", None)
    message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
    out = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if isinstance(name, str):
            arguments = getattr(function, "arguments", None)
            out.append({"id": getattr(call, "id", None) or f"call_{i}", "name": name,
                        "arguments": arguments if isinstance(arguments, str) else "{}"})
    return out


def _parse(raw) -> Any:
    try:
        return raw.parse()
    except Exception:  # a body that is not JSON: _unpack describes it
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _sendable(message: dict) -> dict:
    """A message as UTF-8 can carry it: a lone surrogate (an earlier answer may hold one; the trace keeps it,
    escaped) goes out as U+FFFD."""
    content = message.get("content")
    if isinstance(content, str) and _SURROGATE.search(content):
        return {**message, "content": _SURROGATE.sub("\ufffd", content)}
    return message


def _preview(raw) -> str:
    try:
        text = raw.http_response.text
    except Exception:
        return "(unreadable)"
    text = " ".join(text.split())
    return repr(text[:200]) + (f" ... ({len(text):,} characters)" if len(text) > 200 else "") if text else "(empty)"


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters not kept]"


def _reasoning(message) -> str | None:
    if message is None:
        return None
    for key in ("reasoning", "reasoning_content"):
        value = getattr(message, key, None) or (message.model_extra or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _usage(raw, price: Price | None, seconds: float) -> Usage:
    if raw is None:
        return Usage(seconds=seconds, requests=1)
    completion_details = getattr(raw, "completion_tokens_details", None)
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    prompt = raw.prompt_tokens or 0
    completion = raw.completion_tokens or 0
    cached = (getattr(prompt_details, "cached_tokens", None) or 0) if prompt_details else 0
    reasoning = (getattr(completion_details, "reasoning_tokens", None) or 0) if completion_details else 0
    cost = price.cost(prompt, completion, cached) if price else 0.0
    return Usage(prompt_tokens=prompt, completion_tokens=completion, reasoning_tokens=reasoning, cached_tokens=cached,
                 cost_usd=cost, seconds=seconds, requests=1)


def _brief(exc: Exception) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return " ".join(text.split())[:300]
