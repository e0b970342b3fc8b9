"""What the loop makes of a judged candidate: its diagnosis (profiled where it changes a later prompt), and the
result of one that cannot be judged at all. The judgement itself (compile, skip a known build, evaluate) is the
pipeline's (``agent.loop.pipeline``), the same for one GPU and many.
"""

from __future__ import annotations

from sandbox.candidates.candidate import Candidate
from sandbox.judging.result import Result, Status
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task

from ..protocols import Lineage, score, score_of

PROMISING = 0.95   # profile a correct candidate within this fraction of the best speedup


def diagnose(sandbox: Sandbox, task: Task, lineage: Lineage, candidate: Candidate, result: Result,
             parent_ids: list[str], policy: str, origin: str = "", prompts: bool = True) -> str | None:
    """Profile where the sandbox can (ncu) when ``should_profile`` says so; diagnose the rest from timing and
    resources. Simulated results get no diagnosis: there is nothing measured to diagnose."""
    ran = result.status in (Status.ok, Status.compiled) or (result.status is Status.wrong and result.compile is not None)
    if not ran or result.env.simulated:
        return None
    if should_profile(policy, lineage, result, parent_ids, origin, prompts):
        parent = next((e for e in lineage.entries() if parent_ids and e.id == parent_ids[0]), None)
        sandbox.profile(task, candidate, result=result, parent_profile=parent.result.profile if parent else None)
    if result.profile and result.profile.diagnosis:
        return result.profile.diagnosis
    if result.status is Status.wrong:
        return None
    from sandbox.profile.diagnosis import diagnose as from_timing

    return from_timing(task, result).text


def should_profile(policy: str, lineage: Lineage, result: Result, parent_ids: list[str], origin: str,
                   prompts: bool) -> bool:
    """Whether Nsight Compute should profile this result (its seconds are the profile stage of the ledger).

    ``prompt`` (the default): only where the profile changes what a later prompt says (``prompts``: a model
    reads this run's diagnoses later): the baseline (the first parent), a new best (the next parent, and the
    best shown in every prompt), and a candidate that ran but was wrong when the model will be asked to repair
    it (its diagnosis goes into the repair prompt). ``promising``: every correct candidate within 5% of the best
    (a tuner's only when it is the new best). ``all`` and ``none`` say what they mean."""
    if policy == "all":
        return True
    if policy == "none":
        return False
    best = lineage.best()
    new = score_of(result)
    if policy == "promising":
        if not result.ok:
            return False
        return best is None or (lineage.would_lead(result) if origin == "tuner" else new >= PROMISING * score(best))
    if not prompts:
        return False
    if result.status is Status.wrong:
        parent = next((e for e in lineage.entries() if parent_ids and e.id == parent_ids[0]), None)
        depth = 1 + (lineage.failure_depth(parent) if parent is not None else 0)
        return origin != "baseline" and depth <= lineage.config.max_repairs
    if not result.ok:
        return False
    return origin == "baseline" or best is None or lineage.would_lead(result)


def invalid(task: Task, candidate: Candidate, error: str) -> Result:
    return Result(status=Status.rejected, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                  candidate_key=candidate.key, error=f"invalid candidate: {error}")
