"""The host side of the reference comparisons: every output a stage handed over, compared with the float64
reference in the trusted reference worker (``sandbox.worker.reference``), in one request per stage.

How outputs travel is settled once per sandbox (``ipc``): the GPU worker hands a known pattern over by CUDA
IPC handle and the reference worker reads it back. Where that works, large outputs go device to device;
where it does not (another device, a driver or container that refuses IPC), every output goes through a
``.npy`` file in the sandbox's private data folder, as small ones always do.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from ..judging.result import Bias, Check, Mismatch
from ..tasks.task import Task, TaskError
from ..wire import (Compared, Compares, CompareTask, CompareTrial, HarnessCode, IpcProbe, IpcRead, IpcSent, IpcSum,
                    WorkerError, tolerances)
from .pool import WorkerDied, WorkerProcess, WorkerTimeout, expect


class Referee:
    """``gpu`` and ``ref``: the sandbox's GPU and reference workers; ``harness``: the device harness every
    request carries; ``timeout_s``: the limit of one request."""

    def __init__(self, gpu: WorkerProcess, ref: WorkerProcess, harness: HarnessCode, timeout_s: float):
        self.gpu, self.ref, self.harness, self.timeout_s = gpu, ref, harness, timeout_s
        self._ipc: bool | None = None
        self._probing: threading.Thread | None = None
        self.ipc_error = ""
        self.split_s: dict[str, float] = {}  # the reference worker's seconds per part, summed over this sandbox's life

    def probe_ahead(self) -> None:
        """Start the probe now, on a thread of its own: the GPU worker loads the harness's kernels and the
        reference worker opens its first handle while the host does something else; the first ``ipc`` waits for
        it. Its requests take their turn with any other on the same workers (one request at a time each)."""
        if self._ipc is None and self._probing is None:
            self._probing = threading.Thread(target=self._probe, name="ipc-probe", daemon=True)
            self._probing.start()

    @property
    def ipc(self) -> bool:
        """Whether outputs can be handed to the reference worker by CUDA IPC handle (probed once)."""
        if self._probing is not None:
            self._probing.join()
        if self._ipc is None:
            self._probe()
        return self._ipc

    def _probe(self) -> None:
        ok, error = False, ""
        try:
            sent = expect(self.gpu.call_ok(IpcProbe(self.harness), 120), IpcSent)
            if sent.entry is None:
                error = sent.error
            else:
                got = self.ref.call(IpcRead(sent.entry), 120)
                ok = isinstance(got, IpcSum) and got.sum == sent.sum
                error = "" if ok else got.error if isinstance(got, WorkerError) else "the pattern read back differs"
        except (WorkerDied, WorkerTimeout, RuntimeError) as exc:
            error = str(exc).splitlines()[0]
        self.ipc_error, self._ipc = error, ok

    def compare(self, task: Task, trials: list[CompareTrial], hash_seed: int = 0, cost=None) -> list[list[Check]]:
        """The checks of each trial (its ``sizes`` as the task names them: the derived ones are added here), in
        order, up to the first that fails; the wall time goes to ``cost.reference_s`` (a ``Cost``) when given. A
        reference the task's own code gets wrong is a ``TaskError``; a broken worker a ``RuntimeError``."""
        if not trials:
            return []
        shared = CompareTask(task_folder=str(task.folder), scalars={s.name: s.value for s in task.spec.scalars},
                             tolerance=tolerances(task), hash_seed=hash_seed, harness=self.harness)
        req = Compares(shared, [dataclasses.replace(t, sizes=task.env(t.sizes)) for t in trials])
        t0 = time.perf_counter()
        try:
            reply = self.ref.call(req, timeout=self.timeout_s)
        except (WorkerTimeout, WorkerDied) as exc:
            raise RuntimeError(f"reference worker failed: {exc}") from None
        finally:
            if cost is not None:
                cost.reference_s += time.perf_counter() - t0
        if isinstance(reply, WorkerError):
            if reply.task_error:
                raise TaskError(reply.error)
            raise RuntimeError(f"reference: {reply.error}")
        reply = expect(reply, Compared)
        for part, seconds in reply.split_s.items():
            self.split_s[part] = self.split_s.get(part, 0.0) + seconds
        out = []
        for trial, done in zip(trials, reply.trials):
            dist = ",".join(s["dist"] for s in trial.inputs)
            checks = []
            for c in done.checks:
                fm = Mismatch(**c.first_mismatch) if c.first_mismatch else None
                checks.append(Check(sizes=trial.sizes, label=f"{trial.label} {c.run}", output=c.output,
                                    distribution=dist, passed=c.passed, max_abs_error=c.max_abs_error,
                                    max_rel_error=c.max_rel_error, mismatches=c.mismatches, first_mismatch=fm,
                                    note=c.note, seed=trial.seed, bias=Bias.of(c.bias) if c.bias else None))
            out.append(checks)
        return out


def mismatch_text(c: Check) -> str:
    parts = [f"{c.mismatches} mismatches"]
    if c.first_mismatch:
        m = c.first_mismatch
        parts.append(f"first at {m.index}: got {m.got}, expected {m.expected}")
    if c.max_abs_error is not None:
        parts.append(f"max abs error {c.max_abs_error:.3g}")
    if c.note:
        parts.append(c.note)
    return ", ".join(parts)
