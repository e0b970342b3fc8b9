"""Confined problem code reaches nothing outside its folder, whatever the channel: each channel below is tried by a
problem's own code (the importer runs it confined, sandbox.pytorch.confined) against a live listener, process or
file of this test, and each attempt is denied. The same attempts from this test's process succeed, so a denial is
the confinement's doing."""

from __future__ import annotations

import glob
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

pytest.importorskip("torch")

from sandbox.pytorch import confined  # noqa: E402
from sandbox.pytorch.problem import ProblemError  # noqa: E402
from sandbox.worker import landlock, seccomp  # noqa: E402

pytestmark = pytest.mark.timeout(300)
CANARY = "kw-canary-7f3a9c-do-not-leak"

ATTEMPTS = '''import ctypes, os, socket
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []


def attempt(name, fn):
    try:
        fn()
        seen.append(name + "=reached")
    except Exception as e:
        seen.append(name + "=" + type(e).__name__)

def tcp():
    socket.create_connection(("127.0.0.1", {tcp_port}), timeout=3).sendall(b"tcp")

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"udp", ("127.0.0.1", {udp_port}))

def unix_path():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({unix_path!r})
    s.sendall(b"unix-path")

def unix_abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({abstract!r})
    s.sendall(b"unix-abstract")

def netlink():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.bind((0, 0))

def files():
    open({secret!r}).read()

def signals():
    os.kill({victim}, 15)

def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, {victim}, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

def environment():
    found = [k for k, v in os.environ.items() if {canary!r} in v or {canary!r} in k]
    if found:
        raise SystemError(found)
    raise LookupError("no canary")

def other_proc():
    open("/proc/{victim}/environ").read()

def proc_list():
    os.listdir("/proc")

seen = []
for name, fn in [("tcp", tcp), ("udp", udp), ("unix_path", unix_path), ("unix_abstract", unix_abstract),
                 ("netlink", netlink), ("files", files), ("signals", signals), ("ptrace", ptrace),
                 ("environment", environment), ("other_proc", other_proc), ("proc_list", proc_list)]:
    attempt(name, fn)
raise RuntimeError("SEEN " + " ".join(seen))
'''

# what a denied attempt raises; "reached" never counts as denied
DENIED = {"tcp": {"PermissionError", "OSError", "ConnectionRefusedError"}, "udp": {"PermissionError", "OSError"},
          "unix_path": {"PermissionError"}, "unix_abstract": {"PermissionError", "ConnectionRefusedError"}, "netlink": {"PermissionError"},
          "files": {"PermissionError"}, "signals": {"PermissionError"}, "ptrace": {"OSError", "PermissionError"},
          "environment": {"LookupError"}, "other_proc": {"PermissionError"}, "proc_list": {"PermissionError"}}


class Listeners:
    """A TCP, a UDP, a pathname and an abstract Unix listener, each recording what reaches it."""

    def __init__(self, folder: Path):
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = str(folder / "agent.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        self.abstract = "\0kw-test-" + uuid.uuid4().hex
        self.abs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abs.bind(self.abstract)
        self.abs.listen()
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in (self.tcp, self.unix, self.abs)]
        self.threads.append(threading.Thread(target=self._datagrams, daemon=True))
        for t in self.threads:
            t.start()

    def _accept(self, sock):
        sock.settimeout(0.3)
        while not self._stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                self.received.append(conn.recv(100) or b"(connected)")
            except OSError:
                self.received.append(b"(connected)")
            conn.close()

    def _datagrams(self):
        self.udp.settimeout(0.3)
        while not self._stop.is_set():
            try:
                self.received.append(self.udp.recv(100))
            except OSError:
                continue

    def close(self):
        self._stop.set()
        for t in self.threads:
            t.join(5)
        for s in (self.tcp, self.udp, self.unix, self.abs):
            s.close()


def _reach_from_here(listeners: Listeners) -> None:
    socket.create_connection(listeners.tcp.getsockname(), timeout=3).sendall(b"control")
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"control", listeners.udp.getsockname())
    for address in (listeners.unix_path, listeners.abstract):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        s.sendall(b"control")
        s.close()


@pytest.fixture(scope="module")
def attempts(tmp_path_factory):
    """What the confined problem saw per channel, what reached the listeners, and the victim process's fate."""
    tmp = tmp_path_factory.mktemp("channels")
    secret = tmp / "id_ed25519"
    secret.write_text(CANARY)
    listeners = Listeners(tmp)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    os.environ["KW_CHANNELS_TEST_TOKEN"] = CANARY
    os.environ["KW_CHANNELS_PLAIN"] = CANARY
    try:
        _reach_from_here(listeners)
        deadline = threading.Event()
        while len(listeners.received) < 4 and not deadline.wait(0.1):
            pass
        control = sorted(listeners.received)
        listeners.received.clear()
        source = ATTEMPTS.format(tcp_port=listeners.tcp.getsockname()[1], udp_port=listeners.udp.getsockname()[1],
                                 unix_path=listeners.unix_path, abstract=listeners.abstract, secret=str(secret),
                                 victim=victim.pid, canary=CANARY)
        problem = tmp / "channels.py"
        problem.write_text(source)
        with pytest.raises(ProblemError) as caught:
            confined.call("sandbox.pytorch.importer:survey", source, str(problem), "channels", label=str(problem),
                          deadline_s=120)
        threading.Event().wait(1.0)  # a datagram or connection in flight arrives
        found = re.search(r"SEEN (.*)", str(caught.value))
        assert found, str(caught.value)
        seen = dict(item.split("=", 1) for item in found.group(1).split())
        yield {"seen": seen, "received": list(listeners.received), "control": control,
               "victim_alive": victim.poll() is None}
    finally:
        os.environ.pop("KW_CHANNELS_TEST_TOKEN", None)
        os.environ.pop("KW_CHANNELS_PLAIN", None)
        victim.kill()
        victim.wait()
        listeners.close()


def test_every_listener_is_reachable_from_the_test_process_itself(attempts):
    assert attempts["control"] == [b"control"] * 4


@pytest.mark.parametrize("channel", ["tcp", "udp", "unix_path", "unix_abstract", "netlink", "files", "environment",
                                     "other_proc", "proc_list", "ptrace"])
def test_confined_problem_code_is_denied_each_channel(attempts, channel):
    outcome = attempts["seen"][channel]
    assert outcome in DENIED[channel], f"{channel}: {outcome}"
    tag = channel.replace("_", "-").encode()
    assert not [r for r in attempts["received"] if r == tag or r == b"(connected)"], attempts["received"]


def _abi() -> int:
    try:
        return landlock.abi_version()
    except landlock.LandlockUnavailable:
        return 0


@pytest.mark.skipif(_abi() < 6, reason="signal scoping needs Landlock ABI 6 (Linux 6.12)")
def test_confined_problem_code_cannot_signal_or_trace_a_process_outside(attempts):
    assert attempts["seen"]["signals"] == "PermissionError"
    assert attempts["victim_alive"]


def test_the_socket_filter_denies_every_family_but_keeps_socketpair_subprocesses_and_threads(tmp_path):
    code = """
import socket, subprocess, threading
from sandbox.worker import seccomp
print("denies", ",".join(seccomp.deny_sockets()))
for fam, kind in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_UNIX, socket.SOCK_DGRAM),
                  (socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),
                  (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(fam, kind)
        print("made", int(fam))
    except PermissionError:
        print("denied", int(fam))
a, b = socket.socketpair()
a.sendall(b"pair")
print("pair", b.recv(4).decode())
print("child", subprocess.run(["sh", "-c", "grep Seccomp: /proc/self/status"], capture_output=True, text=True).stdout.split())
box = []
def later():
    try:
        socket.socket()
        box.append("made")
    except PermissionError:
        box.append("denied")
t = threading.Thread(target=later)
t.start()
t.join()
print("thread", box[0])
"""
    env = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent), "PATH": "/usr/bin:/bin"}
    try:
        seccomp.program()
    except seccomp.SeccompUnavailable as exc:
        pytest.skip(str(exc))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith("denied ") for line in lines) == 6 and not any(line.startswith("made") for line in lines)
    assert "pair pair" in lines and "thread denied" in lines
    assert "child ['Seccomp:', '2']" in lines   # the filter goes on through execve
    assert "ptrace" in lines[0] and "io_uring_setup" in lines[0]


def test_the_confined_call_reports_every_layer():
    state = confined.call("sandbox.tasks.dtypes:itemsize", "float16", label="x.py").confinement
    assert state["network"] == "none (own namespace)" or "host's" in state["network"]
    if _abi() >= 6:
        assert state["landlock"] and {"files", "TCP", "abstract Unix sockets", "signals"} <= set(state["landlock_covers"])
    assert state["seccomp"] or state.get("seccomp_reason")
    try:
        seccomp.program()
    except seccomp.SeccompUnavailable:
        return
    assert "socket (every family)" in state["seccomp"]


@pytest.mark.gpu
def test_confined_problem_code_still_runs_pytorch_on_the_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    problem = tmp_path / "gpu.py"
    source = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
              "def get_inputs():\n    return [torch.randn(64)]\n\n\ndef get_init_inputs():\n    return []\n\n\n"
              "x = torch.ones(1024, device='cuda')\ny = (x * 2).sum().item()\n"
              "import socket\ntry:\n    socket.socket(socket.AF_UNIX)\n    net = 'reached'\n"
              "except PermissionError:\n    net = 'denied'\n"
              "raise RuntimeError(f'GPU SUM {y} sockets {net}')\n")
    problem.write_text(source)
    from sandbox.pytorch.modelnew_judge import TOOLCHAIN_READ

    devices = sorted(glob.glob("/dev/nvidia*")) + ["/dev/dri"]   # the grants a ModelNew solution on the GPU gets
    with pytest.raises(ProblemError, match="GPU SUM 2048.0 sockets denied"):
        confined.call("sandbox.pytorch.importer:survey", source, str(problem), "gpu", label=str(problem),
                      deadline_s=120, read=list(TOOLCHAIN_READ), write=devices)
