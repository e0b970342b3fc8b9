"""Which launches of the timing stage are compared in full with the reference: a uniform draw per kind of
launch (warm-up, timed rounds, untimed launches), each decided after the launch, and the chance that such a
draw misses an error made in only some launches of one kind."""

from __future__ import annotations

import math
import random

import numpy as np

KINDS = ("warm-up", "timed", "untimed")


def launch_kind(phase: str) -> str:
    """The kind of a launch of the stage, from its phase label."""
    return "warm-up" if phase == "warm-up" else "timed" if phase.startswith("timed") else "untimed"


def draw_slots(k: int) -> dict[str, int]:
    """How the ``k`` full comparisons are shared among the kinds of launch: one for the warm-up and one for the
    untimed launches where ``k`` allows, the rest for the timed rounds, which get at least one."""
    warm = 1 if k >= 2 else 0
    untimed = 1 if k >= 3 else 0
    return {"warm-up": warm, "timed": max(0, k - warm - untimed), "untimed": untimed}


def miss_probability(launches: int, erring: int, draws: int) -> float:
    """The chance that ``draws`` launches drawn uniformly (without replacement) among ``launches`` of one kind
    all miss the ``erring`` ones: C(launches - erring, draws) / C(launches, draws). It is the chance that an
    error under twice the tolerance (the comparison with the baseline catches a larger one in every launch)
    made only in those launches goes unseen."""
    if draws > launches:
        draws = launches
    return math.comb(launches - erring, draws) / math.comb(launches, draws) if launches else 1.0


class PhaseDraw:
    """A reservoir per kind of launch (``draw_slots``), with slot numbers that do not collide across kinds."""

    def __init__(self, k: int, rng: random.Random):
        self.slots = draw_slots(k)
        self.reservoirs = {kind: Reservoir(n, rng) for kind, n in self.slots.items()}
        starts = np.cumsum([0] + [self.slots[kind] for kind in KINDS])
        self.first = {kind: int(s) for kind, s in zip(KINDS, starts)}

    def offer(self, phase: str) -> int | None:
        kind = launch_kind(phase)
        slot = self.reservoirs[kind].offer()
        return None if slot is None else self.first[kind] + slot


class Reservoir:
    """Reservoir sampling of k items from a stream of unknown length: offer() after each item says which
    slot to store it in (None: not kept). After any number of items, the kept ones are a uniform sample,
    and whether an item is kept is decided only after it exists."""

    def __init__(self, k: int, rng: random.Random):
        self.k, self.rng, self.seen = k, rng, 0

    def offer(self) -> int | None:
        self.seen += 1
        if self.seen <= self.k:
            return self.seen - 1
        s = self.rng.randrange(self.seen)
        return s if s < self.k else None
