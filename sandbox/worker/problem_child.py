"""The processes that run a PyTorch problem's code, confined: ``python -m sandbox.worker.problem_child CMD_FD EVENT_FD [LAYERS NOTE]``.

The host (sandbox.pytorch.confined) starts this process with a scrubbed environment (no key or token variables)
and a private home. It leaves the network first (a new user and network namespace: no interface but a loopback
that is down, where the kernel allows one; this must happen while the process has one thread), imports torch
and NumPy once, and then forks one child per request (so that each problem starts from a fresh process without
paying for torch's import again). Each child, before any problem code runs:
- becomes its own process group (the host kills it there at its deadline) and drops the pipes to the host;
- sends its stdout and stderr to files in its own folder, and works there (``HOME``, ``TMPDIR``);
- confines itself with Landlock (sandbox.worker.landlock): it may read Python's installation, the ``sandbox``
  package, the shared libraries loaded and the folders the request names (a task folder), and write only beneath
  its own folder. ``/home``, ``/root``, ``/etc``, ``/proc`` (other processes' included) and the output folder
  cannot be opened; TCP bind and connect, abstract Unix sockets and signals to processes outside are denied
  (Landlock ABI 4 and 6, where the kernel has them);
- installs the socket filter (sandbox.worker.seccomp): no socket of any family can be created (a pathname Unix
  socket on the host, an ssh-agent's, is out of reach too), no ptrace, no io_uring. ``execve``, ``ioctl`` and
  device files are untouched: CUDA and compilers run under the same rules.

It writes its reply (JSON, sandbox.pytorch.wire) to ``reply.json`` in its folder. A function that raises, or
problem code that calls ``sys.exit``, is a reply with ``ok`` false and one line saying what happened; a problem
that calls ``os._exit``, crashes or hangs leaves no reply, and the host says so. This process reports each child's
process id when it starts and its exit status and CPU time when it ends, as JSON lines on EVENT_FD.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import sys
from pathlib import Path

from ..pytorch.wire import Call, Reply

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG = 1
WARM = ("numpy", "torch", "torch.func", "torch.utils.flop_counter", "torch.nn.functional", "torch._dynamo",
        "sandbox.pytorch.importer", "sandbox.tasks.task")


def leave_network() -> str:
    """A new network namespace (inside a new user namespace, mapping this user to itself); '' or why not."""
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


def flags(argv: list[str], at: int = 3) -> tuple[bool, bool]:
    """(leave the network, whole /dev writable) from ``argv[at]``; both the strongest where it is absent."""
    flag = argv[at] if len(argv) > at else "10"
    return flag[0] == "1", flag[1] == "1"


def gpu_granted(write) -> bool:
    """Whether a call may write the GPU's device files: it is to run CUDA."""
    return any(str(w).startswith("/dev/nvidia") for w in write)


def grants(write: list[str], whole_dev: bool) -> list[str]:
    """``write`` with what starting CUDA needs where it grants a GPU device file: the process's own ``/proc/self``
    (the driver writes there: without it ``cuInit`` fails with 304 under Landlock, as bisected on an H100), and
    ``/dev`` where ``whole_dev`` is on."""
    if not gpu_granted(write):
        return list(write)
    return [*write, "/proc/self", *(["/dev"] if whole_dev else [])]


def confine(home: Path, extra: list[str], writable: list[str] = ()) -> dict:
    """Landlock (read Python, the loaded libraries and ``extra``, write beneath ``home`` and ``writable``), then the
    socket filter (sandbox.worker.seccomp); what each layer did, or why it could not."""
    from . import landlock, seccomp
    from .confine import python_folders

    read, write = python_folders() + list(extra), [str(home), "/dev/null", *writable]
    try:
        abi = landlock.restrict(sorted(set(read) - set(write)), write)
        state = {"landlock": True, "landlock_abi": abi, "landlock_covers": landlock.covers(abi)}
    except landlock.LandlockUnavailable as exc:
        state = {"landlock": False, "reason": f"Landlock unavailable: {exc}"}
    except OSError as exc:
        state = {"landlock": False, "reason": f"Landlock failed: {exc}"}
    if gpu_granted(writable):
        state["cuda"] = start_cuda()
    return state | seccomp.install()


def start_cuda() -> str:
    """CUDA's driver started, and the first device's primary context made, in this process: before the socket filter,
    which the driver's start does not survive (``cuInit`` fails with 304 under it, as seen on an H100); the code that
    runs afterwards uses this context, and can create no socket itself. 'started', or what failed."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no CUDA driver: {exc}"
    code = lib.cuInit(0)
    if code:
        return f"cuInit failed ({code})"
    device, context = ctypes.c_int(), ctypes.c_void_p()
    code = lib.cuDeviceGet(ctypes.byref(device), 0) or lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    return f"no context on device 0 ({code})" if code else "started"


def layers() -> dict:
    """Every layer applied to this process as to a problem's (own network, Landlock, seccomp): for ``doctor``."""
    offline = leave_network()
    state = confine(Path("/dev/null"), [])
    return state | {"network": "own namespace" if not offline else f"shared ({offline})"}


def _target(name: str):
    module, _, function = name.partition(":")
    if not module.startswith("sandbox.") or not function:
        raise ValueError(f"not a sandbox function: {name!r}")
    return getattr(importlib.import_module(module), function)


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def serve(call: Call, offline: str, whole_dev: bool = False) -> None:
    """In the forked child: confine, run the call, write the reply; never returns."""
    from ..tasks.task import TaskError

    home = Path(call.home)
    _die_with_parent()
    os.setsid()
    for fd, name in ((1, "stdout.log"), (2, "stderr.log")):
        os.dup2(os.open(home / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(home)
    os.environ.update(HOME=str(home), TMPDIR=str(home / "tmp"))
    try:
        fn = _target(call.target)
        _one_call_only()
    except Exception as exc:
        reply = Reply(ok=False, kind="setup", error=_first_line(exc))
    else:
        state = confine(home, call.read, grants(call.write, whole_dev))
        state["network"] = "none (own namespace)" if not offline else f"host's ({offline})"
        try:
            reply = Reply(ok=True, result=fn(*call.args, **call.kwargs))
        except SystemExit as exc:
            reply = Reply(ok=False, kind="exit", error=f"it called sys.exit({exc.code!r})")
        except BaseException as exc:  # the problem's own code, or a refusal (a ProblemError) naming what failed
            kind = "refused" if isinstance(exc, TaskError) else "raised"
            reply = Reply(ok=False, kind=kind, error=str(exc) if kind == "refused" else _first_line(exc))
        reply.confinement = state
    try:
        data = reply.to_bytes()
    except (TypeError, ValueError) as exc:
        data = Reply(ok=False, kind="setup", error=f"the reply cannot be sent: {exc}").to_bytes()
    sys.stdout.flush()
    (home / "reply.part").write_bytes(data)
    os.replace(home / "reply.part", home / "reply.json")
    os._exit(0)  # no atexit handler a problem registered runs


def _one_call_only() -> None:
    """This child runs one request and ends: a PyTorch task's runtime may keep the modules it builds."""
    from ..pytorch.runtime import keep_modules  # imports no torch

    keep_modules()


def _die_with_parent() -> None:
    """SIGKILL when the parent ends: a child outlives neither this process nor this process the host."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def main(argv: list[str]) -> None:
    cmd_fd, event_fd = int(argv[1]), int(argv[2])
    _die_with_parent()
    netns, whole_dev = flags(argv)
    note = argv[4] if len(argv) > 4 else ""
    offline = leave_network() if netns else (note or "left off")
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:  # torch missing: each request says so
            pass
    events = os.fdopen(event_fd, "w", buffering=1)

    def send(**event) -> None:
        events.write(json.dumps(event) + "\n")

    send(ready=True, offline=offline)
    buffer, alive = b"", set()
    while True:
        ready, _, _ = select.select([cmd_fd], [], [], 0.1)
        while alive:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if not pid:
                break
            alive.discard(pid)
            send(pid=pid, status=os.waitstatus_to_exitcode(status), cpu_s=usage.ru_utime + usage.ru_stime)
        if not ready:
            continue
        chunk = os.read(cmd_fd, 1 << 20)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            call = Call.from_line(line)
            pid = os.fork()
            if pid == 0:
                os.close(cmd_fd)
                events.close()
                serve(call, offline, whole_dev)
            alive.add(pid)
            send(id=call.id, pid=pid)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--layers"]:
        print(json.dumps(layers()))
    else:
        main(sys.argv)
