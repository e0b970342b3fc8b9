"""Questions about this machine asked of a fresh worker process, for the CLI's ``doctor`` and ``best``: which GPU
a GPU worker sees (``probe_device``), and whether a compile worker could confine itself (``confinement``)."""

from __future__ import annotations

from ..wire import Confinement, ConfinementReport, DescribeDevice, DeviceInfo, WorkerError
from .pool import WorkerDied, WorkerProcess, WorkerTimeout, expect


class NoDevice(RuntimeError):
    """No GPU worker could describe a device; the message says why (the worker's own error where it gave one)."""


def probe_device(timeout_s: float = 120.0) -> dict:
    """The facts of this machine's CUDA device (``sandbox.plumbing.envinfo.device_info``: gpu, arch, sms, memory,
    ...), from a GPU worker started for the question; ``NoDevice`` where there is none or the worker could not say."""
    worker = WorkerProcess("gpu")
    try:
        reply = worker.call(DescribeDevice(), timeout=timeout_s)
    except (WorkerDied, WorkerTimeout) as exc:
        raise NoDevice(str(exc)) from None
    finally:
        worker.close()
    if isinstance(reply, WorkerError):
        raise NoDevice(reply.error)
    return expect(reply, DeviceInfo).info


def confinement(timeout_s: float = 120.0) -> ConfinementReport:
    """Whether a compile worker confined itself (Landlock) and what it may read, or why not (its error, or what
    ended it, as the reason)."""
    worker = WorkerProcess("compile")
    try:
        reply = worker.call(Confinement(), timeout=timeout_s)
    except (WorkerDied, WorkerTimeout) as exc:
        return ConfinementReport(False, str(exc).splitlines()[0])
    finally:
        worker.close()
    if isinstance(reply, WorkerError):
        return ConfinementReport(False, reply.error)
    return expect(reply, ConfinementReport)
