"""The answer formats a model may write, each its prompts paired with its parser (``messages``, ``parse_answer``,
``format_error``): ``cuda``, a ``.cu`` candidate with its launch plan (``prompts``, ``answer``), and ``modelnew``,
KernelBench's ModelNew module (``agent.proposers.modelnew``)."""

from __future__ import annotations

from types import SimpleNamespace

FORMATS = ("cuda", "modelnew")


def answer_format(name: str):
    if name == "modelnew":
        from . import modelnew

        return modelnew
    if name != "cuda":
        raise ValueError(f"unknown answer format {name!r} (expected one of {', '.join(FORMATS)})")
    from . import prompts
    from .answer import parse_answer

    return SimpleNamespace(messages=prompts.messages, parse_answer=parse_answer, format_error=prompts.format_error)
