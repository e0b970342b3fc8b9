"""Problem code runs only here: ``call(target, ...)`` runs a ``sandbox`` function in a child process that is
confined before the problem is executed (sandbox.worker.problem_child: no network, Landlock, a scrubbed
environment with no key or token variables, a private home that is removed afterwards) and returns what the
function returned. The importer and ``check-task`` reach problem.py only through it.

Whatever goes wrong in the child comes back as one ``ProblemCodeError`` line naming the problem: the
function's refusal (a ProblemError), an exception the problem raised, ``sys.exit``, an exit without a reply,
a crash (a signal), output on stdout (a problem must not print: its timing runs would print too), or the
deadline (the child's process group is killed). The child's stderr (warnings) is ignored.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .problem import ProblemError

DEADLINE_S = 300.0
WARM = ("numpy", "torch", "torch.func", "torch.utils.flop_counter", "torch.nn.functional")


class ProblemCodeError(ProblemError):
    """Problem code failed, misbehaved or ran out of time in its confined process (one line, naming the problem)."""


@dataclass
class Outcome:
    result: object
    confinement: dict = field(default_factory=dict)


def call(target: str, *args, label: str, deadline_s: float = DEADLINE_S, read: list[str | Path] = (),
         **kwargs) -> Outcome:
    """``target`` ("sandbox.module:function") called with JSON-able ``args`` in a confined child that may also read
    beneath ``read`` (a task folder, say); ``label`` names the problem in errors. Raises ProblemCodeError (where
    the function refused with a ProblemError, its message as it is)."""
    from ..host import tempdirs
    from ..host.pool import scrubbed_env

    home = tempdirs.make("problem")
    (home / "tmp").mkdir()
    env = scrubbed_env(home, home / "cache")
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    try:
        with open(home / "stdout.log", "wb") as out, open(home / "stderr.log", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "sandbox.worker.problem_child", str(req_r), str(rep_w)],
                                    pass_fds=(req_r, rep_w), env=env, cwd=home, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
        os.close(req_r)
        os.close(rep_w)
        req_r = rep_w = -1
        request = wire.dumps({"target": target, "args": list(args), "kwargs": kwargs, "warm": list(WARM),
                               "read": [str(Path(r).resolve()) for r in read]})
        ends, req_w, rep_r = (req_w, rep_r), -1, -1
        try:
            data = _exchange(proc, *ends, request, deadline_s)
        finally:
            _kill(proc)
        if data is None:
            raise ProblemCodeError(f"{label}: ran past its {deadline_s:.0f} s deadline (it was stopped)")
        printed = _first_printed(home / "stdout.log")
        if not data:
            code = proc.returncode
            if code is not None and code < 0:
                raise ProblemCodeError(f"{label}: crashed ({signal.Signals(-code).name})")
            raise ProblemCodeError(f"{label}: exited (code {code}) before it finished")
        try:
            reply = wire.loads(data)
        except (ValueError, KeyError, TypeError):
            raise ProblemCodeError(f"{label}: its process sent an unreadable reply") from None
        if not isinstance(reply, dict) or "ok" not in reply:
            raise ProblemCodeError(f"{label}: its process sent an unreadable reply")
        if not reply["ok"]:
            error = str(reply.get("error", "failed")).splitlines()[0] if reply.get("error") else "failed"
            if reply.get("kind") == "refused":
                raise ProblemCodeError(error)
            raise ProblemCodeError(f"{label}: {error}" if reply.get("kind") != "raised" else f"{label}: raised {error}")
        if printed is not None:
            raise ProblemCodeError(f"{label}: printed {printed!r} (a problem must not write to stdout)")
        return Outcome(reply.get("result"), reply.get("confinement") or {})
    finally:
        for fd in (req_r, rep_w, req_w, rep_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        shutil.rmtree(home, ignore_errors=True)


def _exchange(proc: subprocess.Popen, req_w: int, rep_r: int, request: bytes, deadline_s: float) -> bytes | None:
    """Send the request and read the reply until the child closes it; None past the deadline. Closes both ends."""
    fds = [req_w, rep_r]
    try:
        return _pump(proc, fds, request, deadline_s)
    finally:
        for fd in fds:
            if fd >= 0:
                os.close(fd)


def _pump(proc: subprocess.Popen, fds: list[int], request: bytes, deadline_s: float) -> bytes | None:
    req_w, rep_r = fds
    end = time.monotonic() + deadline_s
    pending, chunks = memoryview(request), []
    writing = True
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        readable, writable, _ = select.select([rep_r], [req_w] if writing else [], [], min(left, 1.0))
        if writable:
            try:
                pending = pending[os.write(req_w, pending[:1 << 16]):]
            except BrokenPipeError:
                pending = pending[:0]
            if not pending:
                os.close(req_w)
                fds[0] = -1
                writing = False
        if readable:
            chunk = os.read(rep_r, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
        elif proc.poll() is not None and not writing:
            # the child is gone; read what it left in the pipe (its own forks may still hold the write end)
            ready, _, _ = select.select([rep_r], [], [], 0.1)
            if not ready:
                return b"".join(chunks)


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
