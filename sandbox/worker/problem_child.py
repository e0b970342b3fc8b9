"""A process that runs a PyTorch problem's code, confined: ``python -m sandbox.worker.problem_child REQUEST_FD REPLY_FD``.

The host (sandbox.pytorch.confined) starts one per request, with a scrubbed environment (no key or token
variables) and a private home as its working folder. Before any problem code runs, this process
- leaves the network: a new user and network namespace (no interface but a loopback that is down), where
  the kernel allows one;
- imports what the request needs (torch, NumPy, the function to call), so that nothing is read later;
- confines itself with Landlock (sandbox.worker.landlock): it may read Python's installation, the
  ``sandbox`` package and the shared libraries it has loaded, and write only beneath its home. ``/home``,
  ``/root``, ``/etc``, ``/proc`` and the output folder cannot be opened; TCP bind and connect are denied.

The request and reply are JSON (sandbox.pytorch.wire). A function that raises, or problem code that calls
``sys.exit``, is a reply with ``ok`` false and one line saying what happened; a problem that calls
``os._exit``, crashes or hangs leaves no reply, and the host says so.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from pathlib import Path

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000


def leave_network() -> str:
    """A new network namespace (inside a new user namespace, mapping this user to itself); '' or why not.
    Must run while the process has one thread: the kernel refuses a new user namespace otherwise."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return f"unshare: {os.strerror(ctypes.get_errno())}"
    try:  # unmapped, this user could create no file (EOVERFLOW)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:
        return f"user namespace map: {exc.strerror}"
    return ""


def confine(home: Path, extra: list[str]) -> dict:
    """Landlock: read Python, the loaded libraries and ``extra``, write beneath ``home``; what was done, or why not."""
    from . import landlock
    from .confine import python_folders

    read, write = python_folders() + list(extra), [str(home), "/dev/null"]
    try:
        abi = landlock.restrict(sorted(set(read) - set(write)), write)
    except landlock.LandlockUnavailable as exc:
        return {"landlock": False, "reason": f"Landlock unavailable: {exc}"}
    except OSError as exc:
        return {"landlock": False, "reason": f"Landlock failed: {exc}"}
    return {"landlock": True, "landlock_abi": abi}


def _target(name: str):
    module, _, function = name.partition(":")
    if not module.startswith("sandbox.") or not function:
        raise ValueError(f"not a sandbox function: {name!r}")
    return getattr(importlib.import_module(module), function)


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)


def main(argv: list[str]) -> None:
    req_fd, rep_fd = int(argv[1]), int(argv[2])
    offline = leave_network()
    from ..pytorch import wire

    request = wire.loads(_read_all(req_fd))
    try:
        for name in request.get("warm", []):
            importlib.import_module(name)
        fn = _target(request["target"])
    except Exception as exc:
        _write_all(rep_fd, wire.dumps({"ok": False, "kind": "setup", "error": _first_line(exc)}))
        os._exit(0)
    state = confine(Path.cwd(), request.get("read", []))
    state["network"] = "none (own namespace)" if not offline else f"TCP denied by Landlock only ({offline})"
    try:
        reply = {"ok": True, "result": fn(*request.get("args", []), **request.get("kwargs", {}))}
    except SystemExit as exc:
        reply = {"ok": False, "kind": "exit", "error": f"it called sys.exit({exc.code!r})"}
    except BaseException as exc:  # the problem's own code, or a refusal (ProblemError) naming what failed
        from ..task import TaskError

        kind = "refused" if isinstance(exc, TaskError) else "raised"
        reply = {"ok": False, "kind": kind, "error": str(exc) if kind == "refused" else _first_line(exc)}
    reply["confinement"] = state
    try:
        data = wire.dumps(reply)
    except (TypeError, ValueError) as exc:
        data = wire.dumps({"ok": False, "kind": "setup", "error": f"the reply cannot be sent: {exc}"})
    sys.stdout.flush()
    _write_all(rep_fd, data)
    os._exit(0)  # no atexit handler a problem registered runs


if __name__ == "__main__":
    main(sys.argv)
