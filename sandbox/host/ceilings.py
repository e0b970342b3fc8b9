"""The device's ceilings, cached per GPU: what the roofline floor and "% of roofline" are relative to.
The measurement itself runs in a GPU worker (``sandbox.worker.ceilings``)."""

from __future__ import annotations

import json
import time
from typing import Callable

from ..candidates import compiler
from ..tasks.task import Task

CEILINGS_VERSION = 2  # part of the cache key: bump when the worker measures a different set
FLOOR_NOTE = "faster than the hardware allows"


def memory_bandwidth(ceilings: dict) -> float | None:
    """Bytes/s of the memory roofline: the higher of the copy and the read-only rate (either may be absent)."""
    rates = [ceilings.get(k) for k in ("copy_bytes_per_s", "read_bytes_per_s")]
    rates = [r for r in rates if r]
    return max(rates) if rates else None


def cached_ceilings(device: dict, measure: Callable[[], dict]) -> dict:
    """The ceilings of ``device`` from the cache folder, or ``measure()``d and cached there."""
    key = (device.get("uuid") or device.get("gpu") or "unknown").replace("/", "_")
    path = compiler.cache_dir() / "ceilings" / f"{key}-v{CEILINGS_VERSION}.json"
    if path.is_file():
        return json.loads(path.read_text())
    value = measure()
    value.update(gpu=device.get("gpu"), driver=device.get("driver"), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    compiler.atomic_write(path, json.dumps(value, indent=2))
    return value


def roofline_ms(task: Task, sizes: dict, ceilings: dict) -> tuple[float | None, str | None]:
    """The roofline floor in ms at ``sizes`` (the task's bytes and FLOPs at the ceilings) and what bounds it."""
    bw = memory_bandwidth(ceilings)
    peak = {"fp32": ceilings.get("fp32_flops"), "fp16_tensor": ceilings.get("fp16_tensor_flops")}.get(task.spec.roofline.compute)
    t_mem = task.bytes(sizes) / bw if bw else 0.0
    t_cmp = task.flops(sizes) / peak if peak else 0.0
    floor = max(t_mem, t_cmp)
    if floor <= 0:
        return None, None
    return floor * 1e3, "memory" if t_mem >= t_cmp else "compute"
