"""The child processes the sandbox starts: their scrubbed environment (``scrubbed_env``: workers, the confined
process of PyTorch problems, profiled and sanitized programs) and one-shot tools (ncu, compute-sanitizer) run
with a wall-clock limit."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

OUTPUT_LIMIT = 200_000

# Variables a worker may inherit; everything else (API keys, seeds, tokens) is dropped.
PASS_ENV = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
            "LANG", "LC_ALL", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "KERNELWRIGHT_CACHE_DIR",
            "CUPY_GPU_MEMORY_LIMIT", "VIRTUAL_ENV")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding ``sandbox``: first on a child's PYTHONPATH


def scrubbed_env(home: Path, cupy_cache: Path) -> dict[str, str]:
    """A child process's environment: the variables in ``PASS_ENV``, a private home and temp folder (``home``
    and ``home/tmp``), CuPy's kernel cache at ``cupy_cache``, and this ``sandbox`` first on PYTHONPATH."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update(HOME=str(home), TMPDIR=str(home / "tmp"), CUPY_CACHE_DIR=str(cupy_cache), PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return env


_bytecode_started = False


def compile_bytecode_ahead() -> threading.Thread | None:
    """The sandbox package's bytecode written, on a thread of its own, where it is missing or stale: a child started
    with ``scrubbed_env`` never writes its own (a process that ran a candidate is not trusted to write code that
    later processes run), so without it every worker compiled the modules only it imports from source at each
    start. Here the trusted host writes it, once per process, unless it writes no bytecode itself
    (``PYTHONDONTWRITEBYTECODE``). The thread, or None where none was started."""
    global _bytecode_started
    if _bytecode_started or sys.dont_write_bytecode:
        return None
    _bytecode_started = True

    def run():
        import compileall

        compileall.compile_dir(PACKAGE_ROOT / "sandbox", quiet=2)

    thread = threading.Thread(target=run, name="bytecode", daemon=True)
    thread.start()
    return thread


def find_tool(name: str, env_var: str, globs: tuple[str, ...]) -> str | None:
    """``$env_var`` (only if executable), then ``name`` on PATH, then the install folders ``globs`` (newest first)."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which(name)
    if on_path:
        return on_path
    for pattern in globs:
        for path in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            if os.access(path, os.X_OK):
                return path
    return None


def _version_key(path: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"[^0-9A-Za-z]+", path)]


def run_tool(cmd: list[str], cwd: Path, env: dict, timeout: float, keep_stdout_only: bool = False) -> tuple[int | None, str, float]:
    """(exit code or None on timeout, output, seconds); the process group is killed on timeout."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err if keep_stdout_only else subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return 127, f"==ERROR== cannot run {cmd[0]}: {exc}", time.perf_counter() - t0
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            code = None
        text = _read(out, None if keep_stdout_only else OUTPUT_LIMIT)
        if keep_stdout_only and code != 0:
            text += _read(err, OUTPUT_LIMIT)
    return code, text, time.perf_counter() - t0


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a process started in a session of its own (``start_new_session``) with everything it started, and
    reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _read(f, tail: int | None) -> str:
    """The whole file, or its last ``tail`` bytes (a candidate's printf may flood the output)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0 if tail is None else max(0, size - tail))
    return f.read().decode(errors="replace")


WAIT_AHEAD_S = 1800.0   # a run started ahead that no request reached by then ends by itself


class StartedAhead:
    """A tool's run started ahead of its request (``start_ahead``): the tool's process, with its target program
    (``sandbox.worker.ahead``) up to its CUDA context and waiting in ``work`` for the request file ``go.json``;
    the tool's output goes to ``work/output``."""

    def __init__(self, proc: subprocess.Popen, work: Path):
        self.proc, self.work = proc, work
        self.handed: float | None = None   # when the request was handed over (perf_counter)

    @property
    def waiting(self) -> bool:
        return self.proc.poll() is None

    def hand_over(self, request: str) -> None:
        """Write the request (its JSON text) whole (a rename: the program never reads half of it)."""
        (self.work / "go.tmp").write_text(request)
        self.handed = time.perf_counter()
        os.replace(self.work / "go.tmp", self.work / "go.json")

    def finish(self, timeout: float) -> tuple[int | None, str, float]:
        """After ``hand_over``: (exit code or None when killed at ``timeout`` seconds from now, the tool's output
        (its last ``OUTPUT_LIMIT`` bytes), seconds since the request was handed over)."""
        t0 = self.handed if self.handed is not None else time.perf_counter()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            code = None
        seconds = time.perf_counter() - t0
        try:
            with open(self.work / "output", "rb") as f:
                text = _read(f, OUTPUT_LIMIT)
        except OSError:
            text = ""
        return code, text, seconds

    def close(self) -> None:
        """End it (if it still waits) and remove its folder."""
        if self.proc.poll() is None:
            kill_group(self.proc)
        shutil.rmtree(self.work, ignore_errors=True)


def start_ahead(cmd_for, work: Path, env: dict, spare) -> StartedAhead | None:
    """Start a tool's run ahead of its request in ``work`` (its own folder: ``cwd`` for the tool, ``spare.json``
    for the program): ``cmd_for(spare_json)`` is the tool's command line around the program's ``--wait`` run;
    ``spare(go, wait_s, owner)`` the JSON text the program reads: where its request will come, how long it waits
    for it, and while which process lives. None where it cannot start."""
    (work / "cwd").mkdir(exist_ok=True)
    (work / "spare.json").write_text(spare(str(work / "go.json"), WAIT_AHEAD_S, os.getpid()))
    out = open(work / "output", "wb")
    try:
        proc = subprocess.Popen(cmd_for(work / "spare.json"), cwd=work / "cwd", env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        return None
    finally:
        out.close()
    return StartedAhead(proc, work)
