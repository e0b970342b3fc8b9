"""Problem code runs only here: ``call(target, ...)`` runs a ``sandbox`` function in a child process that is
confined before the problem is executed (sandbox.worker.problem_child: its own network namespace, Landlock, a
seccomp filter that denies every socket, ptrace and io_uring, a scrubbed environment with no key or token
variables, a private home that is removed afterwards) and returns what the function returned. The importer and
``check-task`` reach problem.py only through it.

Whatever goes wrong in the child comes back as one ``ProblemCodeError`` line naming the problem: the
function's refusal (a ProblemError), an exception the problem raised, ``sys.exit``, an exit without a reply,
a crash (a signal), output on stdout (a problem must not print: its timing runs would print too), or the
deadline (the child's process group is killed). The child's stderr (warnings) is ignored.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .problem import ProblemError

DEADLINE_S = 300.0
START_S = 180.0  # for the confined process to import torch


class ProblemCodeError(ProblemError):
    """Problem code failed, misbehaved or ran out of time in its confined process (one line, naming the problem)."""


@dataclass
class Outcome:
    result: object
    confinement: dict = field(default_factory=dict)
    cpu_s: float = 0.0   # CPU time of the child that ran the call (its own threads included)


_ENTERED: ContextVar[Session | None] = ContextVar("confined_session", default=None)  # the innermost ``with Session()``


def call(target: str, *args, label: str, deadline_s: float = DEADLINE_S, read: list[str | Path] = (),
         write: list[str | Path] = (), **kwargs) -> Outcome:
    """``target`` ("sandbox.module:function") called with JSON-able ``args`` in a confined child that may also read
    beneath ``read`` (a task folder, say) and write beneath ``write`` (a build cache, the GPU's device files);
    ``label`` names the problem in errors. Raises ProblemCodeError (where
    the function refused with a ProblemError, its message as it is). Runs in the session the caller is inside
    (``with Session():``), so that what an import calls through other modules (check-task's judgement of the task it
    wrote) forks from the process that has torch imported already; outside one, in a session of its own."""
    session = entered()
    if session is not None:
        return session.call(target, *args, label=label, deadline_s=deadline_s, read=read, write=write, **kwargs)
    with Session() as session:
        return session.call(target, *args, label=label, deadline_s=deadline_s, read=read, write=write, **kwargs)


@functools.lru_cache(maxsize=1)
def cuda_layers() -> dict:
    """The confinement under which CUDA starts on this machine (sandbox.worker.cuda_layers), found once per process
    where a GPU is present: ``{"flag", "note"}``, the note saying which layer is off and why ("" where none is)."""
    strongest = {"flag": "10", "note": ""}
    if not glob.glob("/dev/nvidiactl"):
        return strongest
    from ..plumbing.tools import scrubbed_env

    env = scrubbed_env(Path("/tmp"), Path("/tmp"))
    try:
        done = subprocess.run([sys.executable, "-m", "sandbox.worker.cuda_layers", "choose"], capture_output=True,
                              text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return strongest


def entered() -> Session | None:
    """The session the caller is inside (the innermost ``with Session():``), if any."""
    return _ENTERED.get()


class Session:
    """One confined process that has imported torch and forks a fresh child per call (sandbox.worker.problem_child):
    many problems pay for torch's import once. Use it as a context manager; ``call`` as the function above."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.calls = 0
        self.cpu_s = 0.0   # CPU time of every child that ended, summed: what its problems cost
        self._token = None

    def __enter__(self) -> "Session":
        self._token = _ENTERED.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _ENTERED.reset(self._token)
        self.close()

    def _start(self) -> None:
        from ..plumbing import tempdirs
        from ..plumbing.tools import scrubbed_env

        self.home = tempdirs.make("problem")
        (self.home / "tmp").mkdir()
        env = scrubbed_env(self.home, self.home / "cache")
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"   # torch.cuda.is_available() before a fork must not start CUDA
        cmd_r, self._cmd = os.pipe()
        self._events, event_w = os.pipe()
        layers = cuda_layers()
        with open(self.home / "stdout.log", "wb") as out, open(self.home / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "sandbox.worker.problem_child", str(cmd_r), str(event_w),
                                          layers["flag"], layers["note"]],
                                         pass_fds=(cmd_r, event_w), env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, start_new_session=True)
        os.close(cmd_r)
        os.close(event_w)
        self._buffer = b""
        if self._next(lambda e: "ready" in e, time.monotonic() + START_S) is None:
            self.close()
            raise ProblemCodeError(f"the confined process for problem code did not start within {START_S:.0f} s")

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        os.close(self._cmd)
        os.close(self._events)
        _kill(proc)
        shutil.rmtree(self.home, ignore_errors=True)

    def _next(self, wanted, end: float) -> dict | None:
        """The next event that ``wanted`` accepts (others are dropped); None past ``end`` or when the process ended."""
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                event = json.loads(line)
                if wanted(event):
                    return event
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._events], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._events, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk

    def call(self, target: str, *args, label: str, deadline_s: float = DEADLINE_S, read: list[str | Path] = (),
             write: list[str | Path] = (), **kwargs) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self._start()
        self.calls += 1
        home = self.home / f"call{self.calls}"
        (home / "tmp").mkdir(parents=True)
        try:
            return self._call(home, target, args, kwargs, label, deadline_s, read, write)
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def _call(self, home: Path, target: str, args, kwargs, label: str, deadline_s: float, read, write=()) -> Outcome:
        call = wire.Call(id=self.calls, home=str(home), target=target, args=list(args), kwargs=kwargs,
                         read=[str(Path(r).resolve()) for r in read], write=[str(Path(w).resolve()) for w in write])
        os.write(self._cmd, call.to_line())
        end = time.monotonic() + deadline_s
        started = self._next(lambda e: e.get("id") == self.calls, time.monotonic() + START_S)
        if started is None:
            self.close()
            raise ProblemCodeError(f"{label}: the confined process for problem code ended")
        pid = started["pid"]
        ended = self._next(lambda e: e.get("pid") == pid and "status" in e, end)
        if ended is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._next(lambda e: e.get("pid") == pid and "status" in e, time.monotonic() + 30) is None:
                self.close()
            raise ProblemCodeError(f"{label}: ran past its {deadline_s:.0f} s deadline (it was stopped)")
        try:  # what the child's own forks may still be doing is stopped with it
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        cpu_s = float(ended.get("cpu_s") or 0.0)
        self.cpu_s += cpu_s
        outcome = _outcome(home, ended["status"], label)
        outcome.cpu_s = cpu_s
        return outcome


def _outcome(home: Path, code: int, label: str) -> Outcome:
    try:
        data = (home / "reply.json").read_bytes()
    except OSError:
        data = b""
    if not data:
        if code < 0:
            raise ProblemCodeError(f"{label}: crashed ({signal.Signals(-code).name})")
        raise ProblemCodeError(f"{label}: exited (code {code}) before it finished")
    try:
        reply = wire.Reply.from_bytes(data)
    except ValueError:
        raise ProblemCodeError(f"{label}: its process sent an unreadable reply") from None
    if not reply.ok:
        error = (reply.error or "failed").splitlines()[0]
        if reply.kind == "refused":
            raise ProblemCodeError(error)
        raise ProblemCodeError(f"{label}: raised {error}" if reply.kind == "raised" else f"{label}: {error}")
    printed = _first_printed(home / "stdout.log")
    if printed is not None:
        raise ProblemCodeError(f"{label}: printed {printed!r} (a problem must not write to stdout)")
    return Outcome(reply.result, reply.confinement)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _first_printed(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(200)
    except OSError:
        return None
    text = head.decode(errors="replace").strip()
    return (text.splitlines() or [""])[0][:80] if head.strip() else None
