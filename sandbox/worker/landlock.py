"""Landlock (Linux >= 5.13): a process gives up its access to the file system, for good.

``restrict(read, write)`` confines the calling process and every process it starts later: files
and folders beneath ``read`` may be read (and executed), beneath ``write`` read and written;
everything else (``/etc``, ``/home``, ``/proc``, trace folders...) cannot be opened at all. Where
the kernel offers them, TCP bind/connect (ABI 4) and signals and abstract sockets outside the
process (ABI 6) are denied too. It cannot be undone, and ``PR_SET_NO_NEW_PRIVS`` is set first, as
the kernel requires. Only ctypes and the three system calls: 444 ``landlock_create_ruleset``, 445
``landlock_add_rule``, 446 ``landlock_restrict_self`` (the same numbers on x86_64 and aarch64).

Landlock checks opening, not ``stat``: a confined process can still learn that a path exists,
but not read it. Files opened before ``restrict`` stay usable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path
from typing import Iterable

SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ABI1 = (1 << 13) - 1  # execute ... make_sym: the 13 rights of ABI 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV  # what a rule on a file may hold
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


class LandlockUnavailable(Exception):
    """This kernel or machine offers no Landlock; the message says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _numbers() -> tuple[int, int, int]:
    machine = platform.machine()
    if platform.system() != "Linux" or machine not in SYSCALLS:
        raise LandlockUnavailable(f"Landlock needs Linux on {' or '.join(SYSCALLS)} (this is {platform.system()} "
                                  f"on {machine})")
    return SYSCALLS[machine]


def abi_version() -> int:
    """The kernel's Landlock ABI version; raises LandlockUnavailable where there is none."""
    create, _, _ = _numbers()
    libc = _libc()
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        why = {errno.ENOSYS: "the kernel has no Landlock (Linux >= 5.13 built with it), or a seccomp filter hides it",
               errno.EOPNOTSUPP: "Landlock is built in but disabled (boot with lsm=...,landlock)"}
        raise LandlockUnavailable(why.get(err, f"landlock_create_ruleset failed: {os.strerror(err)}"))
    return int(abi)


def covers(abi: int) -> list[str]:
    """What a ruleset of this ABI denies, in words."""
    return ["files"] + (["TCP"] if abi >= 4 else []) + (["abstract Unix sockets", "signals"] if abi >= 6 else [])


def restrict(read: Iterable[str | Path], write: Iterable[str | Path]) -> int:
    """Confine this process to ``read`` (read-only) and ``write`` (read-write) subtrees; returns the ABI used.

    Paths that do not exist are skipped. Raises LandlockUnavailable (nothing was changed) or OSError."""
    create, add_rule, restrict_self = _numbers()
    abi = abi_version()
    libc = _libc()
    fs = FS_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(fs, NET_TCP if abi >= 4 else 0, SCOPES if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct as this ABI knows it
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _os_error("landlock_create_ruleset")
    try:
        for rights, paths in ((READ_RIGHTS, read), (fs, write)):
            for path in paths:
                _allow(libc, add_rule, ruleset, Path(path), rights & fs)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _os_error("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _os_error("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _allow(libc, add_rule: int, ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        if libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise _os_error(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _os_error(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")
