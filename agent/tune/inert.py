"""Flags seen to change nothing: configurations known to compile to code already built, found without compiling.

A flag choice (``--fmad=false``, ``-dlcm=ca``...) often leaves a kernel's machine code as it was. When a
configuration has been compiled both with a choice and with its group's default, at the same knob values,
and the two codes are equal, that choice is *inert* at those knob values: from then on every configuration
with those knob values and that choice is mapped to the same configuration with the default (``canonical``)
and never compiled. The evidence is kept per knob values, since a flag that changes nothing for one tile
size (a register cap above what the kernel uses) may change a larger one. A single pair of equal codes is
the evidence; the summary counts the configurations resolved this way, as predictions.
"""

from __future__ import annotations

from .points import Point


class FlagEvidence:
    """What compiles showed about each flag choice, per knob values. ``knobs``: how many leading dimensions
    of a point are knobs (the rest are flag groups, choice 0 being the compiler's default)."""

    def __init__(self, knobs: int):
        self.knobs = knobs
        self._inert: dict[tuple[int, ...], set[tuple[int, int]]] = {}
        self._active: dict[tuple[int, ...], set[tuple[int, int]]] = {}

    def canonical(self, point: Point) -> Point:
        """``point`` with every flag choice known to be inert at its knob values set to the default."""
        inert = self._inert.get(point[:self.knobs])
        if not inert:
            return point
        return tuple(0 if d >= self.knobs and (d, c) in inert else c for d, c in enumerate(point))

    def unknown(self, point: Point) -> list[int]:
        """Flag dimensions of ``point`` with a non-default choice not yet known to be inert or active there."""
        knobs = point[:self.knobs]
        seen = self._inert.get(knobs, set()) | self._active.get(knobs, set())
        return [d for d in range(self.knobs, len(point)) if point[d] and (d, point[d]) not in seen]

    def learn(self, point: Point, dim: int, same_code: bool) -> None:
        """``point`` and ``point`` with ``dim`` at its default compiled to the same code (or not)."""
        table = self._inert if same_code else self._active
        table.setdefault(point[:self.knobs], set()).add((dim, point[dim]))

    @staticmethod
    def twin(point: Point, dim: int) -> Point:
        """``point`` with flag dimension ``dim`` back at the compiler's default."""
        return point[:dim] + (0,) + point[dim + 1:]
