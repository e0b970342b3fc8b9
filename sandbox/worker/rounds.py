"""The timing stage's rules of how long it runs: the warm-up of each implementation (``warming``,
``warm_up_batch``), the cap on the timed rounds fixed before the first (``round_cap``), when they stop
(``enough``), and which baselines this worker timed moments ago (``Recent``). Host-side arithmetic, no device."""

from __future__ import annotations

import hashlib
import json
import math
import statistics

from ..judging.stats import settled
from ..wire import Impl, RoundLimits

UNTIMED_BATCH = 16  # untimed (and queued warm-up) launches whose checks are read from the device in one transfer
WARM_UP_MIN, WARM_UP_MS, WARM_UP_MAX = 3, 20.0, 200   # each implementation's warm-up: launches, and device ms
WARM_AGAIN_S = 1.0   # a baseline or vendor timed in a stage that ended this recently is warmed up with the minimum


class Recent:
    """When this worker last finished a timing stage with each implementation other than the candidate, by what
    was timed (its code or library call, and the sizes): a baseline or vendor timed in a stage that ended less
    than ``WARM_AGAIN_S`` ago needs only the minimum warm-up (``TimingStage._warm_up``)."""

    def __init__(self):
        self.ended: dict[str, float] = {}

    @staticmethod
    def key(name: str, spec: Impl, sizes: dict, scalars: dict) -> str:
        h = hashlib.sha256(repr((name, spec.task_folder, spec.torch, spec.tf32, sorted(sizes.items()),
                                 sorted(scalars.items()), json.dumps(spec.plan, sort_keys=True, default=str))).encode())
        h.update(spec.cubin or b"")
        return h.hexdigest()

    def warm(self, key: str, now: float) -> bool:
        return now - self.ended.get(key, -math.inf) < WARM_AGAIN_S

    def finished(self, keys, now: float) -> None:
        self.ended.update({k: now for k in keys})


RECENT = Recent()   # this worker process's


def warming(times: list[float], ms: float = WARM_UP_MS) -> bool:
    """Whether an implementation with these warm-up times (ms, in launch order) is to be launched again, for a
    warm-up of at least ``ms`` of device time."""
    return len(times) < WARM_UP_MIN or (sum(times) < ms and len(times) < WARM_UP_MAX)


def warm_up_batch(times: list[float], ms: float = WARM_UP_MS) -> int:
    """Launches to queue next in a queued warm-up: the ones the minimum still wants, then as many as its median
    time says reach ``ms``, at least one and at most a batch (``UNTIMED_BATCH``) or what ``WARM_UP_MAX``
    leaves."""
    if len(times) < WARM_UP_MIN:
        return WARM_UP_MIN - len(times)
    wanted = math.ceil((ms - sum(times)) / max(statistics.median(times), 1e-3))
    return max(1, min(UNTIMED_BATCH, WARM_UP_MAX - len(times), wanted))


def round_cap(budget_ms: float, baseline_ms: float, min_rounds: int, max_rounds: int) -> int:
    """The most rounds a stage may run, fixed before the first from the budget and the baseline's
    warm-up time: nothing the candidate does moves it."""
    return int(min(max_rounds, max(min_rounds, math.ceil(budget_ms / max(baseline_ms, 1e-3)))))


def enough(limits: RoundLimits, samples: dict[str, list[float]], cap: int, elapsed: float,
           primary: str = "baseline") -> bool:
    """Stop adding rounds: the round cap, the candidate's time budget or the wall cap is reached, or the
    candidate's and the baseline's medians are already known to within ``target_ci``."""
    if len(samples["candidate"]) >= cap or sum(samples["candidate"]) >= limits.budget_ms:
        return True
    if elapsed >= limits.wall_cap_s:
        return True
    return all(settled(samples[name], limits.target_ci) for name in ("candidate", primary))
