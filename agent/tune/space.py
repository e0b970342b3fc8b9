"""What the tuner searches: a candidate's declared knobs times a catalogue of compiler options.

Knob dimensions come first (launch and tile parameters move a kernel far more than flags do), then
one dimension per flag group; ``()`` in a group means "leave the compiler's default". Flags of the
candidate that no group covers (``-std=c++20``, ``--restrict``...) stay on every variant.

Two configurations are the same experiment when they have the same ``sandbox.candidates.plan.identity``: the same
machine code and the same resolved launch plan at every size of the task.
"""

from __future__ import annotations

from sandbox.candidates.candidate import Candidate
from sandbox.tasks.task import Task

from .search import Point, Space

FlagGroup = tuple[str, tuple[tuple[str, ...], ...]]

FLAG_GROUPS: tuple[FlagGroup, ...] = (
    ("ptxas -O", ((), ("--ptxas-options=-O2",), ("--ptxas-options=-O1",))),
    ("--maxrregcount", ((), ("--maxrregcount=32",), ("--maxrregcount=64",), ("--maxrregcount=128",))),
    ("vectorization", ((), ("--extra-device-vectorization",))),
    ("load caching", ((), ("--ptxas-options=-dlcm=ca",), ("--ptxas-options=-dlcm=cg",))),
    ("--fmad", ((), ("--fmad=false",))),
)
FAST_MATH: FlagGroup = ("fast math", ((), ("--use_fast_math",)))


def flag_groups(task: Task, flags: bool = True) -> tuple[FlagGroup, ...]:
    """The catalogue for ``task``: fast math only where the task's tolerance admits it."""
    if not flags:
        return ()
    return FLAG_GROUPS + ((FAST_MATH,) if task.spec.allow_fast_math else ())


class TuningSpace:
    """Maps points of a ``Space`` to variants of one candidate, and back."""

    def __init__(self, candidate: Candidate, groups: tuple[FlagGroup, ...]):
        self.candidate = candidate
        self.knob_names = tuple(candidate.knobs)
        self.groups = groups
        covered = {f for _, choices in groups for choice in choices for f in choice}
        self.fixed_flags = tuple(f for f in candidate.flags if f not in covered)
        knobs = len(self.knob_names)
        self.space = Space(self.knob_names + tuple(name for name, _ in groups),
                           tuple(candidate.knobs[k] for k in self.knob_names) + tuple(c for _, c in groups),
                           held=tuple(range(knobs, knobs + len(groups))))
        self.start = self.point_of(candidate)

    def point_of(self, candidate: Candidate) -> Point:
        knobs = tuple(self.space.choices[i].index(candidate.knob_values.get(k, self.space.choices[i][0]))
                      for i, k in enumerate(self.knob_names))
        chosen = []
        for _, choices in self.groups:
            hits = [i for i, choice in enumerate(choices) if choice and set(choice) <= set(candidate.flags)]
            chosen.append(hits[-1] if hits else 0)
        return knobs + tuple(chosen)

    def candidate_at(self, point: Point) -> Candidate:
        n = len(self.knob_names)
        knobs = {k: self.space.choices[i][point[i]] for i, k in enumerate(self.knob_names)}
        flags = list(self.fixed_flags)
        for (_, choices), i in zip(self.groups, point[n:]):
            flags += choices[i]
        return self.candidate.with_knobs(knobs).with_flags(flags)

    def describe(self, point: Point) -> str:
        """``BLOCK=512 --ptxas-options=-dlcm=cg``: the knob values, then the flags that differ from the defaults."""
        n = len(self.knob_names)
        knobs = [f"{k}={self.space.choices[i][point[i]]}" for i, k in enumerate(self.knob_names)]
        flags = [f for (_, choices), i in zip(self.groups, point[n:]) for f in choices[i]]
        return " ".join(knobs + flags) or "defaults"


