"""Disposable worker processes with a wall-clock limit per request.

Each worker is ``python -m sandbox.worker.main ROLE`` in its own process group (session), with a scrubbed
environment and private temp, home and cache folders (a GPU or reference worker's CuPy kernel cache starts as a
copy of the kernels trusted processes compiled before: ``sandbox.host.kernel_cache``). Requests and replies (the
records of ``sandbox.wire``) travel over two private pipes (not stdout, which device ``printf`` may flood). On a
timeout the whole process group is killed; a worker that died or reported a poisoned CUDA context is replaced on
the next request.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable, TypeVar

from ..plumbing import tempdirs
from ..plumbing.files import cache_dir
from ..plumbing.hostpaths import redact
from ..plumbing.tools import kill_group, scrubbed_env
from ..wire import Reply, Request, WorkerError, checked
from . import kernel_cache

R = TypeVar("R", bound=Reply)

SEEDED = ("gpu", "reference")   # roles whose CuPy kernel cache starts from the seed (``sandbox.host.kernel_cache``)

OUTPUT_LIMIT = 16_384


def expect(reply: Reply, kind: type[R]) -> R:
    """``reply`` when it is the ``kind`` its request gets, else one RuntimeError naming what came instead."""
    if not isinstance(reply, kind):
        raise RuntimeError(f"a worker answered with a {type(reply).__name__} where a {kind.__name__} was due")
    return reply


class WorkerTimeout(Exception):
    """The request ran past its limit; the worker's process group was killed."""


class WorkerDied(Exception):
    """The worker exited or was killed before replying; ``tail`` holds the end of its stderr."""

    def __init__(self, message: str, tail: str = "", poisoned: bool = False):
        super().__init__(message)
        self.tail = tail
        self.poisoned = poisoned


class WorkerProcess:
    def __init__(self, role: str, extra_env: dict[str, str] | None = None, root: Path | None = None):
        self.role = role
        self.extra_env = dict(extra_env or {})
        self.root = Path(root or tempfile.gettempdir())
        self.proc: subprocess.Popen | None = None
        self.requests = 0
        self.started = 0
        self._closing = threading.Lock()  # close() runs from any thread (a pool's, a finaliser), once per process
        self._retired = False
        self._one_call = threading.Lock()  # a request and its reply, one at a time (``warm_up`` runs on a thread)
        self._trusted: set[str] = set()   # sha256 of the device code this worker may load and stay trusted
        self.tainted = False              # given other device code since it started: its kernels are not harvested
        self._harvested = 0               # the private cache folder's mtime when it was last harvested

    # ---- lifecycle ------------------------------------------------------------------------

    def _start(self) -> None:
        home = tempdirs.make(self.role, self.root)
        for sub in ("tmp", "cache"):
            (home / sub).mkdir()
        if self.role in SEEDED:
            kernel_cache.seed_into(home / "cache")
        env = scrubbed_env(home, home / "cache")
        env.setdefault("KERNELWRIGHT_CACHE_DIR", str(cache_dir()))
        env.update(self.extra_env)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        stdout, stderr = open(home / "stdout.log", "wb"), open(home / "stderr.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox.worker.main", self.role, str(req_r), str(rep_w)],
            pass_fds=(req_r, rep_w), env=env, cwd=home, stdin=subprocess.DEVNULL,
            stdout=stdout, stderr=stderr, start_new_session=True)
        os.close(req_r)
        os.close(rep_w)
        with self._closing:  # the process and what it holds appear together to a close on another thread
            if self._retired:   # closed for good while it started: it ends here
                kill_group(proc)
                for f in (req_w, rep_r):
                    os.close(f)
                stdout.close()
                stderr.close()
                shutil.rmtree(home, ignore_errors=True)
                raise WorkerDied(f"{self.role} worker was closed for good", "")
            self.home, self._stdout, self._stderr = home, stdout, stderr
            self._send = Connection(req_w, readable=False)
            self._recv = Connection(rep_r, writable=False)
            self.proc = proc
        self.started += 1
        self.requests = 0
        self.tainted, self._harvested = False, 0

    def trust(self, code: bytes) -> None:
        """Device code (the harness, a task's own baseline) that this worker may load and stay trusted: the CuPy
        kernels it compiles still go to the seed (``sandbox.host.kernel_cache``)."""
        self._trusted.add(hashlib.sha256(code).hexdigest())

    def _note_code(self, request: Request) -> None:
        """A GPU worker is tainted by any bytes in a request that are not trusted code (the reference worker loads
        no code: the bytes it gets are data, such as CUDA IPC handles)."""
        if self.role == "gpu" and not self.tainted:
            self.tainted = any(hashlib.sha256(c).hexdigest() not in self._trusted for c in kernel_cache.cubins(request))

    def _harvest(self) -> None:
        """A trusted worker's newly compiled CuPy kernels into the seed (only when its cache folder changed)."""
        if self.role not in SEEDED or self.tainted:
            return
        try:
            stamp = (self.home / "cache").stat().st_mtime_ns
        except OSError:
            return
        if stamp != self._harvested:
            kernel_cache.harvest(self.home / "cache")
            self._harvested = stamp

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def warm_up(self, request: Request, timeout: float, then: Callable[[], None] | None = None) -> None:
        """Start the worker and send it ``request`` on a thread of its own, returning at once: a process that
        will be needed later starts (interpreter, CUDA context) while the caller does something else. The next
        ``call`` waits for it; what it answers, or how it failed, is dropped (that call starts a worker again
        if it must). ``then`` runs on that thread once the request is over (a pool takes the worker in)."""

        def run():
            try:
                self.call(request, timeout)
            except (WorkerDied, WorkerTimeout):
                pass
            if then is not None:
                then()

        threading.Thread(target=run, name=f"{self.role}-warm-up", daemon=True).start()

    def call(self, request: Request, timeout: float) -> Reply:
        """Send one request and wait for its reply, at most ``timeout`` seconds (one request at a time: a call
        from another thread waits for the one under way)."""
        with self._one_call:
            return self._call(request, timeout)

    def _call(self, request: Request, timeout: float) -> Reply:
        checked(request, Request)
        if not self.alive:
            if self._retired:
                raise WorkerDied(f"{self.role} worker was closed for good", "")
            self.close()
            self._start()
        self.requests += 1
        self._note_code(request)
        try:
            self._send.send(request)
        except (BrokenPipeError, OSError):
            tail = self.tail()
            self.close()
            raise WorkerDied(f"{self.role} worker was gone before the request", tail)
        deadline = time.monotonic() + timeout
        while True:
            try:  # another thread may close the worker meanwhile: its connection then reads as closed
                ready = self._recv.poll(min(0.5, max(0.0, deadline - time.monotonic())))
                reply = self._recv.recv() if ready else None
            except (EOFError, OSError):
                break
            if ready:
                if isinstance(reply, WorkerError) and reply.poisoned:
                    tail = self.tail()
                    self.close()
                    raise WorkerDied(reply.error or "poisoned CUDA context", tail, poisoned=True)
                self._harvest()
                return checked(reply, Reply)
            if not self.alive:
                break
            if time.monotonic() >= deadline:
                self.close()
                raise WorkerTimeout(f"{self.role} worker passed its {timeout:.0f} s limit; its process group was killed")
        code = self.proc.poll() if self.proc else None
        tail = self.tail()
        self.close()
        raise WorkerDied(f"{self.role} worker died (exit code {code})", tail)

    def call_ok(self, request: Request, timeout: float) -> Reply:
        """``call``, and a RuntimeError naming the role when the worker reports that the request failed."""
        reply = self.call(request, timeout)
        if isinstance(reply, WorkerError):
            raise RuntimeError(f"{self.role} worker: {reply.error}\n{reply.traceback}")
        return reply

    def tail(self) -> str:
        """The end of the worker's stderr and stdout, host folders replaced (sandbox.plumbing.hostpaths)."""
        out = []
        for name in ("stderr.log", "stdout.log"):
            try:
                path = self.home / name
                size = path.stat().st_size
                with open(path, "rb") as f:
                    f.seek(max(0, size - OUTPUT_LIMIT // 2))
                    text = f.read().decode(errors="replace").strip()
                if text:
                    out.append(f"[{name}] {text}")
            except (OSError, AttributeError):
                pass
        return redact("\n".join(out), {str(getattr(self, "home", "")): "<worker>"})

    def close(self, retire: bool = False) -> None:
        """Kill the worker's process group and free its pipes, logs and folder. Safe from several threads at once
        and more than once: the thread that takes the process does the freeing (two closing one pipe would close
        a descriptor number the process may have handed out again). ``retire``: no later request starts it again."""
        with self._closing:
            self._retired = self._retired or retire
            proc, self.proc = self.proc, None
            if proc is None:
                return
            # what this process holds, taken now: a request on another thread may start the next one meanwhile
            held = (self._send, self._recv, self._stdout, self._stderr)
            home = self.home
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        for f in held:
            f.close()
        shutil.rmtree(home, ignore_errors=True)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
