"""The GPU sandbox's first workers started at the very start of a process, beside its own imports.

A GPU sandbox waits for its GPU worker to answer ``DescribeDevice`` (an interpreter, the worker's imports, CuPy and a
CUDA context: about a second on an H200) before it opens, and its first evaluation waits for a compile worker (an
interpreter, NVRTC and the confinement) even where the kernel's compile is cached. A command that will open one
(``kernelwright optimize``) calls ``start_workers`` before it imports the rest of the program, so those seconds
pass beside those imports; the first ``GPUSandbox`` of the process takes the workers over (``take``). Workers that
no sandbox takes (the command stopped on bad input, the run's config chose another sandbox) are closed, and their
folder removed, when the process exits.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from ..plumbing import tempdirs
from ..plumbing.tools import compile_bytecode_ahead
from ..wire import Confinement, DescribeDevice
from .pool import WorkerProcess

HELLO_TIMEOUT_S = 120
CONFINEMENT_TIMEOUT_S = 120   # a compile worker's start (the sandbox's own, ``SandboxConfig.compile_timeout_s``, is
                              # read later: its config is not known yet)


@dataclass
class Started:
    """The data folder the device workers share, the GPU and reference workers, each sent ``DescribeDevice``, the GPU
    worker's answer to come (its ``DeviceInfo`` or ``WorkerError``; ``WorkerDied`` or ``WorkerTimeout`` where it
    failed), and a compile worker sent ``Confinement``."""

    data_dir: Path
    gpu: WorkerProcess
    ref: WorkerProcess
    gpu_hello: Future
    compiles: WorkerProcess


_lock = threading.Lock()
_held: Started | None = None


def start_workers() -> None:
    """Start the GPU and the reference worker and a compile worker now (``start``), for the next ``GPUSandbox`` of
    this process to take over; nothing while the ones started before wait to be."""
    global _held
    with _lock:
        if _held is not None:
            return
        _held = start(CONFINEMENT_TIMEOUT_S)
        atexit.register(_release)


def start(confinement_timeout_s: float) -> Started:
    """A GPU sandbox's first workers, started: the GPU and the reference worker, each sent ``DescribeDevice`` on a thread
    of its own (their CUDA contexts come up side by side), and a compile worker sent ``Confinement``; then the host
    writes the sandbox's bytecode (``compile_bytecode_ahead``). Returns at once."""
    tempdirs.sweep()
    data_dir = tempdirs.make("data", tempdirs.shm_root())
    started = Started(data_dir, WorkerProcess("gpu", root=data_dir.parent),
                      WorkerProcess("reference", root=data_dir.parent), Future(), WorkerProcess("compile"))
    started.ref.warm_up(DescribeDevice(), timeout=HELLO_TIMEOUT_S)
    started.compiles.warm_up(Confinement(), timeout=confinement_timeout_s)
    threading.Thread(target=_hello, args=(started.gpu, started.gpu_hello), name="gpu-hello", daemon=True).start()
    compile_bytecode_ahead()
    return started


def _hello(gpu: WorkerProcess, answer: Future) -> None:
    try:
        answer.set_result(gpu.call(DescribeDevice(), timeout=HELLO_TIMEOUT_S))
    except BaseException as exc:  # the sandbox that takes the workers raises it, as its own call would have
        answer.set_exception(exc)


def take() -> Started | None:
    """The workers ``start_workers`` started, once: the caller owns them from now on. None where none were."""
    global _held
    with _lock:
        started, _held = _held, None
    return started


def _release() -> None:
    started = take()
    if started is not None:   # for good: a worker whose start is still under way on its thread ends there too
        for worker in (started.gpu, started.ref, started.compiles):
            worker.close(retire=True)
        shutil.rmtree(started.data_dir, ignore_errors=True)
