"""NVML's SM and memory clocks, temperature and power read after each launch of the timed rounds: the result's
environment says what the rounds ran at (median, min, max), not what an idle GPU showed at the start."""

from __future__ import annotations

from ..plumbing.envinfo import ClockSampler, clocks
from ..wire import Clocks
from .draw import launch_kind


class ClockSampling:
    """A check of the launcher (``launcher.Launcher``), last in its order: it reads the clocks once a timed round's
    launch has been read back. ``begin`` as the stage begins; ``record`` as it ends."""

    part = "clocks"

    def __init__(self):
        self.start: dict = {}
        self.sampler = None

    def begin(self) -> None:
        self.start, self.sampler = clocks(), ClockSampler()

    def queue(self, launch):
        return ([], None) if launch.alone and launch_kind(launch.phase) == "timed" else None

    def read(self, launch, queued, values: list) -> None:
        self.sampler.sample()

    def record(self) -> Clocks:
        return Clocks(self.start, clocks(), self.sampler.summary())
