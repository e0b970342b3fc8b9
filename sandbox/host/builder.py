"""Compiling on the host side: static checks, then NVRTC in a pool of compile worker processes.

``Builder.build(task, candidate)`` compiles one candidate and waits; ``Builder.prefetch(task, candidates)``
hands candidates to the pool and returns at once, so that a later ``build`` of any of them finds its compile
done or under way (a search compiles the configurations it will measure next while the GPU measures the
current ones). Each worker is a ``WorkerProcess("compile")`` that confines itself (``sandbox.worker.confine``);
workers start on demand, up to ``SandboxConfig.compile_workers``, so a sandbox that compiles one candidate at
a time runs one; ``warm`` starts them all ahead, in the background, for a search about to compile many.

Two requests that compile the same thing share one compile: the key is the source, the flags, the arch
and the knob values the source reads. A knob the source never names (``unread_knobs``: used only in the
launch plan) cannot change the code, so its value is left at its default for the compile; the plan, resolved
later from the candidate's own values, still differs.
"""

from __future__ import annotations

import queue
import re
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from ..candidates.candidate import Candidate, strip_plan, static_problems, validate_for_task
from ..candidates.fast_math import compiled_problems
from ..judging.result import CompileInfo, Cost, Result, Status
from ..tasks.task import Task
from ..wire import Compile, Compiled, Confinement, Reply, WorkerError
from .config import SandboxConfig
from .pool import WorkerDied, WorkerProcess, WorkerTimeout

KEEP = 4096   # compiles remembered in memory (the disk cache keeps everything)


class Built(NamedTuple):
    """A candidate after compiling: its result so far (``compiled`` or why not), the compiler's report and the cubin."""

    result: Result
    info: CompileInfo | None
    cubin: bytes | None


def new_result(task: Task, candidate: Candidate, status: Status, **kw) -> Result:
    """A Result for ``candidate`` on ``task``, naming both."""
    return Result(status=status, task=task.name, task_fingerprint=task.fingerprint, candidate=candidate.label,
                  candidate_key=candidate.key, knobs=candidate.defines(), flags=list(candidate.flags), **kw)


def unread_knobs(candidate: Candidate) -> set[str]:
    """Knobs whose value cannot change the compiled code: neither the source (its plan block aside) nor a
    launch's kernel name (a template-id) names them. Conservative: a name in a comment counts as read, and so does every knob of a source that pastes
    tokens (``##`` can build a name) and every knob with a reserved name (a header may read it)."""
    body = strip_plan(candidate.source) + "\n".join(launch.kernel for launch in candidate.launches)
    if "##" in body:
        return set()
    return {k for k in candidate.knobs
            if not (k.startswith("__") or re.match(r"_[A-Z]", k)) and not re.search(rf"\b{re.escape(k)}\b", body)}


def compile_request(candidate: Candidate, arch: str) -> Compile:
    """What a compile worker receives; unread knobs stay at their defaults (see the module docstring)."""
    unread = unread_knobs(candidate)
    knobs = {k: v for k, v in candidate.defines().items() if k not in unread}
    return Compile(source=candidate.source, flags=list(candidate.flags), knobs=knobs, arch=arch)


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return (log.strip().splitlines() or ["compile failed"])[0][:300]


class Builder:
    """Static checks, then NVRTC in a pool of compile worker processes (compiles are cached by content)."""

    def __init__(self, config: SandboxConfig, arch: str):
        self.config, self.arch = config, arch
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        self._workers: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._done: OrderedDict[str, Future] = OrderedDict()   # compile key -> its reply (a worker's Compiled)
        self._claimed: weakref.WeakSet[Future] = weakref.WeakSet()  # compiles a build has paid for already
        self._threads = ThreadPoolExecutor(max(1, config.compile_workers), thread_name_prefix="compile")

    # ---- public ----------------------------------------------------------------------------

    def build(self, task: Task, candidate: Candidate) -> Built:
        """Compile ``candidate`` (or wait for its compile already under way) and return it."""
        validate_for_task(candidate, task)
        problems = static_problems(candidate, task)
        if problems:
            return Built(new_result(task, candidate, Status.rejected, error=problems[0], detail="\n".join(problems)),
                         None, None)
        t0 = time.perf_counter()
        future, shared = self._submit(candidate)
        try:
            reply = future.result()
        except (WorkerTimeout, WorkerDied) as exc:
            cost = Cost(compile_s=time.perf_counter() - t0)
            if isinstance(exc, WorkerTimeout):
                return Built(new_result(task, candidate, Status.timeout, error=f"compile: {exc}", cost=cost), None, None)
            return Built(new_result(task, candidate, Status.compile_error, error=f"the compiler process died: {exc}",
                                    detail=exc.tail, cost=cost), None, None)
        if isinstance(reply, WorkerError):
            raise RuntimeError(f"compile worker failed: {reply.error}\n{reply.traceback}")
        if not isinstance(reply, Compiled):
            raise RuntimeError(f"compile worker: a {type(reply).__name__} is no answer to a Compile request")
        info = CompileInfo.model_validate(reply.info)
        spent = time.perf_counter() - t0
        with self._lock:
            first = future not in self._claimed
            self._claimed.add(future)
        if not first:                          # a compile is paid for once: later builds of it only waited
            info.cached = True
        elif shared and not info.cached:       # compiled ahead: its cost is NVRTC's time, not this wait
            spent = max(spent, info.seconds)
        cost = Cost(compile_s=spent, wall_s=spent)
        if not info.ok:
            return Built(new_result(task, candidate, Status.compile_error, error=_first_error(info.log), detail=info.log,
                                    compile=info, cost=cost), info, None)
        problems = compiled_problems(info, candidate.source, task)
        if problems:   # the compiled code, not its spelling: the source rule's second line
            return Built(new_result(task, candidate, Status.rejected, error=problems[0], detail="\n".join(problems),
                                    compile=info, cost=cost), info, None)
        return Built(new_result(task, candidate, Status.compiled, compile=info, cost=cost), info, reply.cubin)

    def prefetch(self, task: Task, candidates: list[Candidate]) -> int:
        """Start compiling ``candidates`` in the pool without waiting; returns how many compiles it started
        (candidates that fail the static checks, or whose compile is known or under way, start none)."""
        started = 0
        for cand in candidates:
            try:
                validate_for_task(cand, task)
            except ValueError:
                continue
            if not static_problems(cand, task):
                started += not self._submit(cand)[1]
        return started

    def ready(self, candidate: Candidate) -> bool:
        """Whether ``build(candidate)`` would return without waiting for a compile (its compile is done)."""
        req = compile_request(candidate, self.arch)
        with self._lock:
            future = self._done.get(repr(req))
        return future is not None and future.done()

    def warm(self) -> int:
        """Start every compile worker the pool may have, in the background (each answers a ``Confinement`` request
        once its interpreter, NVRTC and confinement are up), so that a search's first compiles do not wait for
        processes to start; returns how many it started. Compiles asked for meanwhile take the first one ready."""
        with self._lock:
            new = [WorkerProcess("compile") for _ in range(max(1, self.config.compile_workers) - len(self._workers))]
            self._workers += new
        for worker in new:   # on threads of their own: the compile threads stay free for compiles
            worker.warm_up(Confinement(), self.config.compile_timeout_s, then=lambda w=worker: self._idle.put(w))
        return len(new)

    def adopt(self, worker: WorkerProcess) -> None:
        """Take ``worker`` (a compile worker started, or warming up, elsewhere) into the pool, ready to compile."""
        with self._lock:
            self._workers.append(worker)
        self._idle.put(worker)

    @property
    def workers(self) -> int:
        """Compile worker processes started so far."""
        return len(self._workers)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        for w in self._workers:  # a compile still running ends with its worker, which no compile starts again
            w.close(retire=True)

    # ---- the pool ----------------------------------------------------------------------------

    def _submit(self, candidate: Candidate) -> tuple[Future, bool]:
        """(the future reply for ``candidate``'s compile, whether it was already known or under way)."""
        req = compile_request(candidate, self.arch)
        key = repr(req)
        with self._lock:
            future = self._done.get(key)
            if future is not None and not (future.done() and future.exception() is not None):
                self._done.move_to_end(key)
                return future, True
            future = self._threads.submit(self._compile, req)
            self._done[key] = future
            while len(self._done) > KEEP:
                self._done.popitem(last=False)
        return future, False

    def _compile(self, req: Compile) -> Reply:
        worker = self._checkout()
        try:
            return worker.call(req, timeout=self.config.compile_timeout_s)
        finally:
            self._idle.put(worker)

    def _checkout(self) -> WorkerProcess:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if len(self._workers) < max(1, self.config.compile_workers):
                worker = WorkerProcess("compile")
                self._workers.append(worker)
                return worker
        return self._idle.get()
