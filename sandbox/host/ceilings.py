"""The device's ceilings, cached per GPU: what the roofline floor and "% of roofline" are relative to.
The measurement itself runs in a GPU worker (``sandbox.worker.ceilings``)."""

from __future__ import annotations

import json
import time
from typing import Callable

from ..candidates import compiler
from ..judging.environment import Ceilings
from ..tasks.task import Task

CEILINGS_VERSION = 2  # part of the cache key: bump when the worker measures a different set
FLOOR_NOTE = "faster than the hardware allows"


def cached_ceilings(device: dict, measure: Callable[[], dict]) -> Ceilings:
    """The ceilings of ``device`` (its worker's device info) from the cache folder, or ``measure()``d and cached
    there."""
    key = (device.get("uuid") or device.get("gpu") or "unknown").replace("/", "_")
    path = compiler.cache_dir() / "ceilings" / f"{key}-v{CEILINGS_VERSION}.json"
    if path.is_file():
        return Ceilings.model_validate_json(path.read_text())
    value = measure()
    value.update(gpu=device.get("gpu"), driver=device.get("driver"), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    compiler.atomic_write(path, json.dumps(value, indent=2))
    return Ceilings.model_validate(value)


def roofline_ms(task: Task, sizes: dict, ceilings: Ceilings) -> tuple[float | None, str | None]:
    """The roofline floor in ms at ``sizes`` (the task's bytes and FLOPs at the ceilings) and what bounds it."""
    bw = ceilings.memory_bandwidth()
    peak = ceilings.peak_flops(task.spec.roofline.compute)
    t_mem = task.bytes(sizes) / bw if bw else 0.0
    t_cmp = task.flops(sizes) / peak if peak else 0.0
    floor = max(t_mem, t_cmp)
    if floor <= 0:
        return None, None
    return floor * 1e3, "memory" if t_mem >= t_cmp else "compute"
