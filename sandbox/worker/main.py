"""Worker process entry point: ``python -m sandbox.worker.main ROLE REQUEST_FD REPLY_FD``.

Roles:
- ``compile``: NVRTC compiles (CPU only; a runaway compile is killed by the parent's timeout), in a process
  that cannot read host files where Landlock is available (sandbox.worker.confine).
- ``gpu``: runs candidate device code: correctness trials, A/B timing rounds and screening batches.
- ``reference``: trusted only; regenerates inputs from seeds, computes the reference and compares.
  It never loads candidate code, so expected outputs never share a CUDA context with a candidate.

Requests and replies are the records of ``sandbox.wire``; each role dispatches on the request's type, and
anything that is not a request is answered with a ``WorkerError``. Error texts and compile logs leave a worker
with host folders replaced by neutral names (sandbox.plumbing.hostpaths).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

import numpy as np

from ..wire import (CheckTrials, Compare, Compares, Compile, Compiled, Confinement, ConfinementReport, DescribeDevice,
                    DeviceInfo, HarnessCode, IpcProbe, IpcRead, IpcSent, IpcSum, MeasureCeilings, MeasuredCeilings,
                    Reply, Request, Screen, ScreenReady, ScreenSetup, Time, WorkerError, checked)


class CompileRole:
    """Confines itself first (sandbox.worker.confine): an ``#include`` the source filter missed cannot
    read a host file. ``Confinement`` asks whether that worked, and if not, why."""

    def __init__(self):
        from pathlib import Path

        from .confine import confine_compiler

        try:
            state = confine_compiler(Path(os.environ.get("HOME") or os.getcwd()))
        except Exception as exc:  # NVRTC itself is missing: compiles will say so, one by one
            state = {"confined": False, "reason": f"the warm-up compile failed: {type(exc).__name__}: {exc}"}
        self.confinement = ConfinementReport(**state)

    def handle(self, msg: Request) -> Reply:
        from ..candidates.candidate import parse_candidate
        from ..candidates.compiler import compile_source
        from ..plumbing.hostpaths import redact

        match msg:
            case Confinement():
                return self.confinement
            case Compile():
                cand = parse_candidate(msg.source).with_flags(msg.flags).with_knobs(msg.knobs)
                info, cubin = compile_source(cand, arch=msg.arch, use_cache=msg.cache)
                info = info.model_copy(update={"log": redact(info.log), "options": [redact(o) for o in info.options]})
                return Compiled(info.model_dump(), cubin)
        raise unhandled("compile", msg)


class GpuRole:
    def __init__(self):
        self.h = None
        self.screening = None  # the state of the screening in progress (worker.screening.Screening)

    def harness(self, code: HarnessCode):
        from .harness import Harness

        if self.h is None:
            self.h = Harness(code.arch, code.cubin, code.names)
            self.h.persisting_l2   # no L2 carve-out or access-policy window left from before this worker
        return self.h

    def handle(self, msg: Request) -> Reply:
        if self.h is not None:
            self.h.handed.clear()  # the reference worker has read what the last request handed over
        if not isinstance(msg, (ScreenSetup, Screen)):
            self.screening = None  # its buffers are freed for the stage at hand
        match msg:
            case DescribeDevice():
                from ..plumbing.envinfo import device_info

                return DeviceInfo(device_info())
            case MeasureCeilings():
                from .ceilings import measure

                return MeasuredCeilings(measure())
            case CheckTrials():
                from .checks import run_checks

                return run_checks(self.harness(msg.harness), msg)
            case Time():
                from .timing import run_timing

                return run_timing(self.harness(msg.harness), msg)
            case IpcProbe():
                return self.ipc_probe(msg)
            case ScreenSetup():
                from .screening import Screening

                self.screening = None
                self.screening = Screening(self.harness(msg.harness), msg)
                return ScreenReady(msg.setup_id, self.screening.noise)
            case Screen():
                if self.screening is None or self.screening.id != msg.setup_id:
                    return WorkerError("no screening set up with this id", setup_lost=True)
                return self.screening.screen(msg)
        raise unhandled("gpu", msg)

    def ipc_probe(self, msg: IpcProbe) -> IpcSent:
        """A known pattern handed over as the outputs are (harness.hand_over)."""
        from .harness import IPC_MIN_BYTES, hand_over

        h = self.harness(msg.harness)
        pattern = h.cp.arange(IPC_MIN_BYTES // 4, dtype=h.cp.uint32)
        try:
            entry = hand_over(h, pattern, None, ipc=True)
        except Exception as exc:  # no IPC here: outputs travel as files
            return IpcSent(None, error=f"{type(exc).__name__}: {exc}")
        return IpcSent(entry, int(pattern.sum()))


class ReferenceRole:
    def __init__(self):
        from .reference import ReferenceCache

        self.cache = ReferenceCache()

    def handle(self, msg: Request) -> Reply:
        from .reference import open_handed, run_compare, run_compares

        match msg:
            case DescribeDevice():   # started early by the host: the CUDA context exists before the first compare
                from ..plumbing.envinfo import device_info

                return DeviceInfo(device_info())
            case Compare() | Compares():
                reply = run_compare(msg.task, msg.trial, self.cache) if isinstance(msg, Compare) else \
                    run_compares(msg, self.cache)
                if "cupy" in sys.modules:  # the GPU worker's next stage plans from the free memory: nothing cached
                    from .memory_plan import release_cached

                    release_cached(sys.modules["cupy"])
                return reply
            case IpcRead():
                import cupy

                return IpcSum(int(open_handed(cupy, msg.entry).sum()))
        raise unhandled("reference", msg)


def unhandled(role: str, msg: Request) -> ValueError:
    """The error a role raises for a request it does not handle (the reply is a ``WorkerError``)."""
    return ValueError(f"the {role} worker does not handle {type(msg).__name__}")


ROLES = {"compile": CompileRole, "gpu": GpuRole, "reference": ReferenceRole}


def exit_with_parent(parent: int, interval_s: float = 0.5) -> threading.Thread:
    """Kill this worker's process group once the process that started it is gone. A worker waits for the next
    request on a pipe, which ends when its parent dies, but a worker busy with a kernel that never returns (or
    a long stage) would outlive a killed host and hold the GPU for every later measurement; a thread watching
    the parent's pid (CUDA's waits release the interpreter lock) ends it within ``interval_s``. Started after
    the role has set itself up, so that it runs inside the compile worker's confinement too."""

    def watch():
        while os.getppid() == parent:
            time.sleep(interval_s)
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)  # the worker leads its own session: its children go too
        finally:
            os._exit(4)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    role, req_fd, rep_fd = argv[0], int(argv[1]), int(argv[2])
    requests = Connection(req_fd, writable=False)
    replies = Connection(rep_fd, readable=False)
    parent = os.getppid()
    handler = ROLES[role]()
    exit_with_parent(parent)
    random.seed(os.urandom(16))
    while True:
        try:
            req = requests.recv()
        except (EOFError, OSError):
            return 0
        try:
            reply = checked(handler.handle(checked(req, Request)), Reply)
        except Exception as exc:
            from ..plumbing.hostpaths import redact
            from .harness import Poisoned

            if isinstance(exc, Poisoned):
                replies.send(WorkerError(redact(str(exc)), poisoned=True))
                os._exit(3)
            reply = WorkerError(redact(f"{type(exc).__name__}: {exc}"), redact(traceback.format_exc()))
        replies.send(reply)


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main(sys.argv[1:]))

