"""Worker process entry point: ``python -m sandbox.worker.main ROLE REQUEST_FD REPLY_FD``.

Roles:
- ``compile``: NVRTC compiles (CPU only; a runaway compile is killed by the parent's timeout), in a process
  that cannot read host files where Landlock is available (sandbox.worker.confine).
- ``gpu``: runs candidate device code: correctness trials, A/B timing rounds and screening batches.
- ``reference``: trusted only; regenerates inputs from seeds, computes the reference and compares.
  It never loads candidate code, so expected outputs never share a CUDA context with a candidate.

Error texts and compile logs leave a worker with host folders replaced by neutral names (sandbox.hostpaths).
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


class CompileRole:
    """Confines itself first (sandbox.worker.confine): an ``#include`` the source filter missed cannot
    read a host file. ``{"op": "confinement"}`` says whether that worked, and if not, why."""

    def __init__(self):
        from pathlib import Path

        from .confine import confine_compiler

        try:
            self.confinement = confine_compiler(Path(os.environ.get("HOME") or os.getcwd()))
        except Exception as exc:  # NVRTC itself is missing: compiles will say so, one by one
            self.confinement = {"confined": False, "reason": f"the warm-up compile failed: {type(exc).__name__}: {exc}"}

    def handle(self, req: dict) -> dict:
        from ..candidate import parse_candidate
        from ..compiler import compile_source
        from ..hostpaths import redact

        if req.get("op") == "confinement":
            return {"ok": True, "confinement": self.confinement}
        cand = parse_candidate(req["source"]).with_flags(req["flags"]).with_knobs(req["knobs"])
        info, cubin = compile_source(cand, arch=req["arch"], use_cache=req.get("cache", True))
        info = info.model_copy(update={"log": redact(info.log), "options": [redact(o) for o in info.options]})
        return {"ok": True, "info": info.model_dump(), "cubin": cubin}


class GpuRole:
    def __init__(self):
        self.h = None
        self.screening = None  # the state of the screening in progress (worker.screening.Screening)

    def harness(self, req: dict):
        from .harness import Harness

        if self.h is None:
            self.h = Harness(req["arch"], req["harness_cubin"], req["harness_names"])
        return self.h

    def handle(self, req: dict) -> dict:
        op = req["op"]
        if self.h is not None:
            self.h.handed.clear()  # the reference worker has read what the last request handed over
        if not op.startswith("screen"):
            self.screening = None  # its buffers are freed for the stage at hand
        if op == "hello":
            from ..envinfo import device_info

            return {"ok": True, "info": device_info()}
        if op == "ceilings":
            from .ceilings import measure

            return {"ok": True, "ceilings": measure()}
        if op == "check":
            from .checks import run_checks

            return run_checks(self.harness(req), req)
        if op == "time":
            from .timing import run_timing

            return run_timing(self.harness(req), req)
        if op == "ipc_probe":  # a known pattern handed over as the outputs are (harness.hand_over)
            from .harness import IPC_MIN_BYTES, hand_over

            h = self.harness(req)
            pattern = h.cp.arange(IPC_MIN_BYTES // 4, dtype=h.cp.uint32)
            try:
                entry = hand_over(h, pattern, None, ipc=True)
            except Exception as exc:  # no IPC here: outputs travel as files
                return {"ok": True, "entry": None, "error": f"{type(exc).__name__}: {exc}"}
            return {"ok": True, "entry": entry, "sum": int(pattern.sum())}
        if op == "screen_setup":
            from .screening import Screening

            self.screening = None
            self.screening = Screening(self.harness(req), req)
            return {"ok": True}
        if op == "screen":
            if self.screening is None or self.screening.id != req["setup_id"]:
                return {"ok": False, "setup_lost": True, "error": "no screening set up with this id"}
            return self.screening.screen(req)
        raise ValueError(f"unknown op {op!r}")


class ReferenceRole:
    def __init__(self):
        from .reference import ReferenceCache

        self.cache = ReferenceCache()

    def handle(self, req: dict) -> dict:
        from .reference import open_handed, run_compare, run_compares

        if req["op"] in ("compare", "compares"):
            reply = (run_compare if req["op"] == "compare" else run_compares)(req, self.cache)
            if "cupy" in sys.modules:  # the GPU worker's next stage plans from the free memory: nothing cached unused here
                from .memory_plan import release_cached

                release_cached(sys.modules["cupy"])
            return reply
        if req["op"] == "ipc_probe":
            import cupy

            return {"ok": True, "sum": int(open_handed(cupy, req["entry"]).sum())}
        raise ValueError(f"unknown op {req['op']!r}")


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
            reply = handler.handle(req)
        except Exception as exc:
            from ..hostpaths import redact
            from .harness import Poisoned

            if isinstance(exc, Poisoned):
                replies.send({"ok": False, "poisoned": True, "error": redact(str(exc))})
                os._exit(3)
            reply = {"ok": False, "error": redact(f"{type(exc).__name__}: {exc}"), "traceback": redact(traceback.format_exc())}
        replies.send(reply)


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main(sys.argv[1:]))

