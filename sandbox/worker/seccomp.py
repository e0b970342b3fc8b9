"""A seccomp filter that takes sockets away from a process, for good: ``deny_sockets()``.

Landlock (sandbox.worker.landlock) confines files, TCP, abstract Unix sockets and signals, but up to its ABI 7 not
``connect`` to a *pathname* Unix socket (an ssh-agent's, a container runtime's): a socket file is reached by its
path without being opened. A network namespace does not help either (those sockets live in the file system). This
filter closes that door and the others beside it. After ``deny_sockets()`` the process and every process it starts:

- cannot create a socket of any family (``socket`` fails with EACCES: Unix pathname and abstract, TCP, UDP,
  netlink, packet...); ``socketpair`` stays allowed (an unnamed pair reaches nothing outside);
- cannot use io_uring (whose requests would open and connect sockets without a system call the filter sees),
  ``ptrace``, or ``process_vm_readv``/``process_vm_writev``;
- cannot make a system call of another ABI (32-bit ``socketcall`` on x86_64, x32).

``execve``, ``open``, ``ioctl`` and ``mmap`` are untouched: CUDA (``/dev/nvidia*`` and its ioctls), compilers and
ninja run as before. The filter is classic BPF built here and installed with the ``seccomp`` system call (with
``TSYNC``, so that every thread of the process gets it); ``PR_SET_NO_NEW_PRIVS`` is set first, as the kernel
requires. Only ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_ABS_W, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
X32_BIT = 0x40000000

# (audit arch, seccomp, {name: number}) per machine
ARCHES = {
    "x86_64": (0xC000003E, 317, {"socket": 41, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                                 "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}),
    "aarch64": (0xC00000B7, 277, {"socket": 198, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                                  "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}),
}


class SeccompUnavailable(Exception):
    """This machine cannot install the filter; the message says why."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one), as the kernel reads it."""
    machine = machine or platform.machine()
    if platform.system() != "Linux" or machine not in ARCHES:
        raise SeccompUnavailable(f"the socket filter is built for Linux on {' or '.join(ARCHES)} "
                                 f"(this is {platform.system()} on {machine})")
    arch, _, numbers = ARCHES[machine]
    denied = sorted(numbers.values())
    deny = RET_ERRNO | errno.EACCES
    # the last two instructions: allow, then deny; each check jumps to deny when it matches
    checks = [_insn(JGE_K, X32_BIT)] + [_insn(JEQ_K, nr) for nr in denied]
    body = b"".join(check[:2] + bytes([len(checks) - i, 0]) + check[4:] for i, check in enumerate(checks))
    return (_insn(LD_ABS_W, 4) + _insn(JEQ_K, arch, jt=1) + _insn(RET_K, deny) + _insn(LD_ABS_W, 0)
            + body + _insn(RET_K, RET_ALLOW) + _insn(RET_K, deny))


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_sockets() -> list[str]:
    """Install the filter on this process (all its threads) and its future children; returns the system calls denied.

    Raises SeccompUnavailable (nothing was changed) or OSError."""
    code = program()
    _, seccomp_nr, numbers = ARCHES[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    if libc.syscall(seccomp_nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EINVAL):
            raise SeccompUnavailable(f"the kernel refuses seccomp filters ({os.strerror(err)})")
        raise OSError(err, f"seccomp(SET_MODE_FILTER): {os.strerror(err)}")
    return ["socket (every family)", *sorted(n for n in numbers if n != "socket"), "foreign-ABI calls"]


def install() -> dict:
    """``deny_sockets()`` as a layer's report: ``{"seccomp": what it denies}``, or an empty list and why not."""
    try:
        return {"seccomp": deny_sockets()}
    except SeccompUnavailable as exc:
        return {"seccomp": [], "seccomp_reason": str(exc)}
    except OSError as exc:
        return {"seccomp": [], "seccomp_reason": f"seccomp failed: {exc}"}
