"""``LLMProposer``: one rewrite per request from any OpenAI-compatible chat-completions endpoint.

Transport failures (connection errors, 408/409/429/5xx) are retried by the openai SDK itself
(``max_retries``). ``tenacity`` handles only semantic retries: an empty answer, an answer with no
usable code block, or one cut off at the token limit (``finish_reason == "length"``) is answered with
a precise format-error message in the same conversation, up to ``semantic_retries`` times (after a
truncation, with a larger ``max_tokens``). Every attempt's messages, answer, reasoning text and usage go
into the proposal's ``exchange`` for the trace. The ``openai`` package is imported on first use.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from . import prompts
from .answer import FormatError, parse_answer, split_reasoning
from ..config import ModelConfig, Price
from ..protocols import Proposal, ProposalRequest, Usage


class ModelEndpointError(RuntimeError):
    """The endpoint refused or failed after the SDK's own retries (bad key, unknown model, server down)."""


class LLMProposer:
    name = "llm"

    def __init__(self, config: ModelConfig, api_key: str, price: Price | None = None, client: Any = None):
        self.config = config
        self.price = price
        self._api_key = api_key
        self._client = client
        self._lock = threading.Lock()

    @property
    def client(self):
        with self._lock:
            if self._client is None:
                try:
                    import openai
                except ImportError as exc:
                    raise ModelEndpointError("the openai package is missing: pip install openai") from exc
                self._client = openai.OpenAI(api_key=self._api_key, base_url=self.config.base_url,
                                             max_retries=self.config.max_retries, timeout=self.config.timeout_s)
            return self._client

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        conversation = prompts.messages(request)
        attempts: list[dict] = []
        usage = Usage()
        state = {"max_tokens": self.config.max_tokens, "sent": 0}
        parent_ids = [request.parents[0].id]
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
        return [Proposal(candidate, parent_ids, self.name, note=note, usage=usage, exchange=self._exchange(attempts))]

    def observe(self, entry) -> None:
        pass

    # ---- one request ---------------------------------------------------------------------------

    def _ask(self, conversation: list[dict], state: dict) -> dict:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.name, "messages": list(conversation)}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if state["max_tokens"] is not None:
            kwargs[cfg.max_tokens_field] = int(state["max_tokens"])
        if cfg.reasoning_effort:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if cfg.extra_body:
            kwargs["extra_body"] = dict(cfg.extra_body)
        import openai

        t0 = time.perf_counter()
        try:
            response = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise ModelEndpointError(f"{cfg.base_url or 'OpenAI'} answered HTTP {exc.status_code}: {_brief(exc)}") from None
        except openai.APIError as exc:
            raise ModelEndpointError(f"{cfg.base_url or 'OpenAI'}: {type(exc).__name__}: {_brief(exc)}") from None
        seconds = time.perf_counter() - t0
        choice = response.choices[0] if response.choices else None
        message = choice.message if choice else None
        content = (message.content or "") if message else ""
        content, inline_reasoning = split_reasoning(content)
        reasoning = _reasoning(message) or inline_reasoning or None
        usage = _usage(response.usage, self.price, seconds)
        new_messages = conversation[state["sent"]:]
        state["sent"] = len(conversation)
        record = {"messages": new_messages, "response": content, "reasoning": reasoning,
                  "finish_reason": choice.finish_reason if choice else None, "model": response.model,
                  "usage": usage.as_dict(), "max_tokens": state["max_tokens"], "seconds": round(seconds, 3)}
        return {"content": content, "finish_reason": record["finish_reason"], "usage_obj": usage, "record": record}

    def _accept(self, reply: dict, request: ProposalRequest, conversation: list[dict], state: dict):
        """Parse the answer; on failure, append the answer and the format-error message, then raise."""
        content = reply["content"]
        try:
            return parse_answer(content, request.task)
        except FormatError as exc:
            error = exc
            if reply["finish_reason"] == "length":
                error = FormatError(f"the answer was cut off at the token limit ({state['max_tokens']} tokens) "
                                    f"before the code was complete ({exc.problem})", "truncated")
                if state["max_tokens"] is not None:
                    state["max_tokens"] = int(state["max_tokens"] * self.config.truncation_growth)
            reply["record"]["error"] = error.problem
            conversation.append({"role": "assistant", "content": content})
            conversation.append({"role": "user", "content": prompts.format_error(error.problem, error.reason)})
            raise error from None

    def _exchange(self, attempts: list[dict]) -> dict:
        return {"model": self.config.name, "base_url": self.config.base_url, "attempts": attempts}


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
