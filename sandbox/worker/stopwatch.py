"""Seconds a worker's stage spends per part, for the benches that ask where an evaluation's time goes."""

from __future__ import annotations

import time
from contextlib import contextmanager


class Stopwatch:
    """``with watch("inputs"): ...`` adds the block's wall seconds to its part; parts do not nest. ``sync``
    (the device's stream synchronisation) ends each part, so that device work queued in a part is charged to
    it, not to the next part that waits for the device."""

    def __init__(self, sync=None):
        self.seconds: dict[str, float] = {}
        self.sync = sync

    @contextmanager
    def __call__(self, part: str):
        t0 = time.perf_counter()
        try:
            yield
            if self.sync is not None:
                self.sync()
        finally:
            self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - t0

    def add(self, seconds: dict[str, float]) -> None:
        """Another stopwatch's parts (e.g. one per trial) added to these."""
        for part, s in seconds.items():
            self.seconds[part] = self.seconds.get(part, 0.0) + s

    def report(self, total_s: float) -> dict[str, float]:
        """Each part's seconds, and ``other``: what of ``total_s`` no part took."""
        out = {k: round(v, 4) for k, v in self.seconds.items()}
        out["other"] = round(max(0.0, total_s - sum(self.seconds.values())), 4)
        return out
