"""The host side of the timing stage (``GPUSandbox._timing``): the ``Time`` request for the GPU worker
(``sandbox.worker.timing``), and its ``Timed`` reply read back as the result's ``Timing`` record, the launches
to compare with the reference, the environment the rounds ran in, and the verdict of the two sanity rules
(event time above wall-clock here; the floors in ``sandbox.host.floor``)."""

from __future__ import annotations

import random

from ..candidates.plan import resolve
from ..judging import stats
from ..judging.agreement import agreement_tolerances
from ..judging.environment import READINGS, Ceilings, ClockReadings, LaunchHold, PersistingL2, TimedClocks
from ..judging.result import CARRY_OVER_FLAG, CarryOver, Status, Timing
from ..tasks.inputs import output_specs, timed_variants
from ..tasks.keyed import new_seed
from ..tasks.task import Task
from ..wire import CompareTrial, HarnessCode, Impl, RoundLimits, RunOutputs, Time, Timed, Tolerance
from .ceilings import roofline_ms
from .config import SandboxConfig


def timing_request(task: Task, bench: dict, cubin: bytes, plan: dict, baseline, cfg: SandboxConfig,
                   rng: random.Random, harness: HarnessCode, ipc: bool, data_dir: str) -> Time:
    """The candidate (``cubin`` with its resolved ``plan``) against the baseline (candidate, compile info, cubin;
    or None), the vendor function and the PyTorch baselines the task has, at ``bench``."""
    impls = {"candidate": Impl(cubin=cubin, plan=plan)}
    if baseline is not None:
        b_cand, b_info, b_cubin = baseline
        impls["baseline"] = Impl(cubin=b_cubin, plan=resolve(task, b_cand, b_info, bench))
    if cfg.vendor and callable(getattr(task.reference_module(), "vendor", None)):
        impls["vendor"] = Impl(task_folder=str(task.folder))
    for name in task.spec.torch.baselines if task.spec.torch else ():  # PyTorch eager and torch.compile
        impls[name] = Impl(torch=name, task_folder=str(task.folder.resolve()), tf32=cfg.torch_tf32)
    limits = RoundLimits(budget_ms=cfg.timing_budget_s * 1e3, min_rounds=cfg.min_rounds, max_rounds=cfg.max_rounds,
                         target_ci=cfg.target_ci, wall_cap_s=cfg.wall_cap_s)
    return Time(harness=harness, impls=impls, sizes=task.env(bench),
                scalars={s.name: s.value for s in task.spec.scalars},
                input_variants=timed_variants(task, bench),
                outputs=output_specs(task, bench), seed=new_seed(),
                tolerance={n: Tolerance(*t) for n, t in agreement_tolerances(task).items()},
                order_seed=rng.getrandbits(62), hash_seed=rng.getrandbits(63), limits=limits,
                launches_to=rng.randint(cfg.min_launches, 2 * cfg.min_launches), full_checks=cfg.full_checks,
                primary=task.baselines[0], ipc=ipc, data_dir=data_dir)


def kept_trials(task: Task, bench: dict, req: Time, reply: Timed) -> list[CompareTrial]:
    """The candidate launches drawn at random from the whole stage, as trials for the full comparison with the
    reference (each on the inputs its round generated)."""
    return [CompareTrial(label=f"timing launch {e.launch} ({e.phase})", sizes=bench,
                         inputs=req.input_variants[e.variant], outputs=output_specs(task, bench), seed=e.seed,
                         runs=[RunOutputs("full", e.files)])
            for e in reply.full]


def timing_record(task: Task, bench: dict, reply: Timed, ceilings: Ceilings, torch_tf32: str) -> Timing:
    """Each implementation's times with their 95% intervals (rounds resampled by rotating set), the speedups
    over the candidate, and the roofline floor at the measured ``ceilings``."""
    floor_ms, bound = roofline_ms(task, bench, ceilings)
    placements = reply.set_of_round
    impls = {}
    for name, samples in reply.samples.items():
        med, lo, hi = stats.median_ci(samples, clusters=placements)
        walls = sorted(reply.walls[name])
        impls[name] = dict(samples_ms=samples, median_ms=med, ci_ms=dict(value=med, low=lo, high=hi),
                           wall_median_ms=walls[len(walls) // 2],
                           pct_of_roofline=100.0 * floor_ms / med if floor_ms and med > 0 else None)
    speedups, faster = {}, {}
    for name in impls:
        if name == "candidate":
            continue
        v, lo, hi = stats.speedup_ci(reply.samples[name], reply.samples["candidate"], clusters=placements)
        speedups[name] = dict(value=v, low=lo, high=hi)
        faster[name] = lo > 1.0
    return Timing.model_validate(dict(
        sizes=bench, rounds=reply.rounds, round_cap=reply.round_cap, candidate_launches=reply.launches,
        repeated_launches=reply.repeated, warm_up_launches=reply.warm_up or None,
        l2_flush_bytes=reply.flush_bytes, rotating_sets=reply.sets, set_of_round=placements, impls=impls,
        speedup=speedups, faster_than=faster, roofline_ms=floor_ms, bound=bound, primary=task.baselines[0],
        unavailable=reply.unavailable, torch_tf32=torch_tf32 if task.spec.torch else None,
        carry_over=carry_over(reply, task.baselines[0])))


def carry_over(reply: Timed, primary: str, least: int = 3) -> CarryOver | None:
    """The primary baseline's times in the rounds it opened, grouped by the launch that ended the round before: the
    candidate, or anything else (the same place in a round and the same input generation between, so only what a
    launch leaves behind differs); None with fewer than ``least`` rounds in either group, or where the rounds' order
    was not sent."""
    if primary not in reply.samples or len(reply.orders) != len(reply.samples[primary]):
        return None
    after = {True: [], False: []}
    for r in range(1, len(reply.orders)):
        if reply.orders[r][0] == primary:
            after[reply.orders[r - 1][-1] == "candidate"].append(reply.samples[primary][r])
    if min(len(after[True]), len(after[False])) < least:
        return None
    value, low, high = stats.ratio_ci(after[True], after[False])
    return CarryOver(value=value, low=low, high=high, after_candidate=len(after[True]), after_other=len(after[False]),
                     flagged=low > 1.0 and value >= CARRY_OVER_FLAG)


def timing_env(reply: Timed, ceilings: Ceilings) -> dict:
    """What the result's environment (``sandbox.judging.environment.Environment``) adds from the stage, by field: the
    clocks as it began, ended and ran (each reading's median over the timed rounds at the top level too), the
    ceilings, the stream hold, where its seconds went, the persisting-L2 state put back."""
    clocks = reply.clocks
    timed = TimedClocks.model_validate(clocks.timed)
    medians = {k: getattr(timed, k).median for k in READINGS if getattr(timed, k) is not None}
    l2 = {"persisting_l2": PersistingL2.model_validate(reply.persisting_l2)} if reply.persisting_l2 else {}
    return dict(clocks_start=ClockReadings.model_validate(clocks.start),
                clocks_end=ClockReadings.model_validate(clocks.end), clocks_timed=timed, ceilings=ceilings,
                launch_hold=LaunchHold.model_validate(reply.launch_hold), timing_split_s=reply.split_s, **l2, **medians)


def sanity(timing: Timing) -> tuple[Status, str]:
    """``rejected`` with the reason where the candidate's event time exceeds host wall-clock; else ``ok``. The
    floors (``sandbox.host.floor``) are judged next."""
    cand = timing.impls["candidate"]
    if cand.median_ms > cand.wall_median_ms * 1.05 + 0.02:
        return Status.rejected, (f"event time {cand.median_ms:.4g} ms exceeds host wall-clock "
                                 f"{cand.wall_median_ms:.4g} ms: the timer is not trustworthy")
    return Status.ok, ""
