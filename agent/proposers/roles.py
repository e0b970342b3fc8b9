"""Which model answers a request, when a run names more than one (``[model.roles]``, ``[model.others.NAME]``).

The policy, checked in this order for each request:

1. ``repair``: the parent failed to compile or to run correctly (the repair prompts);
2. ``plateau``: ``plateau_after`` or more timed candidates in a row have not improved the best;
3. ``first``: the run's first request (the starting kernel, or no kernel yet);
4. otherwise ``main``, the ``[model]`` itself.

A model past one of its own budgets (``budget_usd``, ``budget_tokens``, ``budget_requests``, counted from what the
run's ledger holds for it, resumed sessions included) hands the request to ``main``; the reason says so. The
choice is a function of the request alone, so a resumed run and one that never stopped choose alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import prompts
from ..config import ModelConfig, OtherModel
from ..protocols import ProposalRequest, Usage

MAIN = "main"


@dataclass(frozen=True)
class Choice:
    model: str     # "main" or a name under [model.others]
    why: str       # the rule that chose it: repair, plateau, first, default; with a fallback, why main answers


def choose(config: ModelConfig, request: ProposalRequest) -> Choice:
    roles = config.roles
    kind = prompts.kind(request)
    wanted = None
    if kind in ("repair_compile", "repair_wrong") and roles.repair:
        wanted = Choice(roles.repair, "repair")
    elif request.extra.get("since_improvement", 0) >= roles.plateau_after and roles.plateau:
        wanted = Choice(roles.plateau, "plateau")
    elif kind in ("first", "first_module") and roles.first:
        wanted = Choice(roles.first, "first")
    if wanted is None or wanted.model == MAIN:
        return wanted or Choice(MAIN, "default")
    spent = request.extra.get("model_spend", {}).get(wanted.model, Usage())
    over = over_budget(config.others[wanted.model], spent)
    if over:
        return Choice(MAIN, f"{wanted.why}: {wanted.model} {over}")
    return wanted


def over_budget(model: OtherModel, spent: Usage) -> str | None:
    """Which of the model's own budgets ``spent`` has used up, in words; None while it may answer."""
    if model.budget_usd is not None and spent.cost_usd >= model.budget_usd:
        return f"spent ${spent.cost_usd:.4f} of its ${model.budget_usd:.4f}"
    tokens = spent.prompt_tokens + spent.completion_tokens
    if model.budget_tokens is not None and tokens >= model.budget_tokens:
        return f"spent {tokens:,} of its {model.budget_tokens:,} tokens"
    if model.budget_requests is not None and spent.requests >= model.budget_requests:
        return f"made {spent.requests} of its {model.budget_requests} requests"
    return None
