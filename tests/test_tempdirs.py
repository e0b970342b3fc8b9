"""The sandbox's private temp folders name their owner; what a killed process left is removed at the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.plumbing import tempdirs

ROOT = Path(__file__).resolve().parent.parent


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.timeout(30)
def test_only_folders_whose_owner_is_gone_are_swept(tmp_path):
    dead = _dead_pid()
    gone = tmp_path / f"kw-data-{dead}-abc_123"
    mine = tempdirs.make("compile", tmp_path)
    unnamed = tmp_path / "kw-compile-a1b2c3d4"      # an older folder that names no owner: left alone
    other = tmp_path / f"something-{dead}-x"
    for folder in (gone, unnamed, other):
        (folder / "tmp").mkdir(parents=True)
    (tmp_path / f"kw-data-{dead}-file").write_text("a file, not a folder")

    assert tempdirs.sweep([tmp_path]) == [gone]
    assert not gone.exists() and mine.exists() and unnamed.exists() and other.exists()
    assert mine.name.startswith(f"kw-compile-{os.getpid()}-") and (mine.stat().st_mode & 0o777) == 0o700


@pytest.mark.timeout(120)
def test_a_killed_run_leaves_its_compile_folder_and_the_next_start_removes_it(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}, "TMPDIR": str(temp),
           "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    script = ("from sandbox import CompileOnlySandbox; from sandbox.tasks.task import load_task; "
              "from sandbox.candidates.candidate import load_candidate; import time; t = load_task('vector_add'); "
              "sb = CompileOnlySandbox(); sb.compile(t, load_candidate(t.baseline_path)); print('ready', flush=True); "
              "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    left = list(temp.glob(f"kw-compile-{proc.pid}-*"))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(left) == 1 and left[0].is_dir()

    subprocess.run([sys.executable, "-c", "from sandbox import CompileOnlySandbox; CompileOnlySandbox().close()"],
                   cwd=ROOT, env=env, check=True, timeout=60)
    assert not left[0].exists()
