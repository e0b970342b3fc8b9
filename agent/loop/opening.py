"""What a session opens before its first evaluation, and what it says of a cluster at the end: the run id, the
task's starting kernel checked, this machine's sandbox or a Ray cluster's, the proposer (a model, a replay or the
built-in search) with its endpoint checked and its redactor, the model phase's window of requests."""

from __future__ import annotations

import datetime as dt
import secrets as pysecrets
from typing import TYPE_CHECKING

from sandbox import open_sandbox
from sandbox.candidates.candidate import CandidateError, load_candidate, validate_for_task
from sandbox.protocol import Sandbox
from sandbox.tasks.task import Task

from ..config import ConfigError, RunConfig, api_key
from ..protocols import Proposer
from ..redact import Redactor
from ..trace.records import ProposerInfo

if TYPE_CHECKING:
    from ..tune.proposer import TunerProposer


def new_run_id(task: Task) -> str:
    return f"{dt.datetime.now():%Y%m%d-%H%M%S}-{task.name}-{pysecrets.token_hex(2)}"


def open_run_sandbox(cfg: RunConfig) -> Sandbox:
    """This machine's sandbox, or with ``[cluster]`` (``--ray``) a ``RaySandbox`` over the cluster's GPUs of one
    model; a cluster that cannot run the sandbox (Ray missing, no GPU, a compile-only run) is a ``ConfigError``."""
    if cfg.cluster is None:
        return open_sandbox(cfg.sandbox, cfg.sandbox_options)
    from sandbox.cluster import ClusterError, RaySandbox

    c = cfg.cluster
    try:
        return RaySandbox(cfg.sandbox, cfg.sandbox_options, address=c.address, gpus=c.gpus, gpu_model=c.gpu_model)
    except ClusterError as exc:
        raise ConfigError(f"cluster: {exc}") from None


def cluster_notes(sandbox: Sandbox) -> list[str]:
    """What the summary says of a cluster run: the GPUs that measured, how busy they were, the actors lost."""
    about = sandbox.describe()
    if about is None:
        return []
    use = sandbox.usage()
    busy = sum(use["busy_s"].values()) / max(1e-9, use["wall_s"] * max(1, len(use["busy_s"])))
    notes = [f"cluster ({about['address']}): {len(about['gpus'])} x {about['model']} measured, busy {busy:.0%} of the "
             f"time the cluster was open; each figure was measured on one GPU"]
    notes += [f"cluster: {row}" for row in about["left_out"]]
    notes += [f"cluster: GPU actor {e['actor']} lost or not used: {e['reason']}" for e in about["lost"]]
    return notes


def model_window(s) -> int:
    """Requests open at once in the model phase: ``parallel``, and on a cluster of N GPUs at least N + 1 (N
    candidates evaluating while the next answer is written)."""
    return max(s.config.parallel, s.sandbox.slots + 1) if s.config.cluster is not None else s.config.parallel


def check_baseline(task: Task) -> None:
    """ConfigError, before any run folder exists, where the task's starting kernel cannot be read or its launch
    plan does not fit the task: every run of it would stop at its first evaluation."""
    if not task.has_baseline:
        return
    try:
        validate_for_task(load_candidate(task.baseline_path), task)
    except CandidateError as exc:
        raise ConfigError(f"{task.baseline_path}: the task's starting kernel does not fit the task: {exc}") from None


def tuner(cfg: RunConfig, sandbox: Sandbox | None = None) -> TunerProposer:
    try:
        from ..tune.proposer import TunerProposer
    except ImportError as exc:
        raise ConfigError(f"the built-in search (agent.tune.proposer) is not available: {exc}") from None
    return TunerProposer(strategy=cfg.tune.strategy, max_evaluations=cfg.tune.max_evaluations, seed=cfg.tune.seed,
                         flags=cfg.tune.flags, sandbox=sandbox, finalists=cfg.tune.finalists)


def choose_proposer(cfg: RunConfig, key: str | None, proposer: Proposer | None, replay: str | None,
                    start: int, sandbox: Sandbox | None = None) -> tuple[Proposer, str, ProposerInfo]:
    """(proposer, main phase, what run.json records about it)."""
    if proposer is not None:
        return proposer, "model", ProposerInfo(kind="custom", name=proposer.name)
    if replay:
        from ..proposers.replay import ReplayProposer

        return ReplayProposer(replay, start=start), "model", ProposerInfo(kind="replay", replay=str(replay))
    if cfg.model is not None:
        from ..proposers.llm import LLMProposer

        return (LLMProposer(cfg.model, api_key(cfg.model, key), cfg.price(), redactor=redactor(cfg, key)), "model",
                ProposerInfo(kind="llm"))
    return tuner(cfg, sandbox), "search", ProposerInfo(kind="tuner")


def reachable(cfg: RunConfig, key: str | None) -> None:
    """The model endpoint accepts a connection, checked before the sandbox opens (``EndpointUnreachable``)."""
    from ..config import redact_url
    from ..proposers.reach import check

    url = cfg.model.base_url
    check(url, redact_url(url) if url else None)


def redactor(cfg: RunConfig, key: str | None) -> Redactor:
    """What the run keeps off the screen, the trace and the prompts: keys, the endpoint URL's credentials."""
    model = cfg.model
    others = [[o.extra_body, o.base_url] for o in model.others.values()] if model else []
    return Redactor.for_run(model.base_url if model else None, model.api_key_env if model else None, key,
                            [model.extra_body, others] if model else None)
