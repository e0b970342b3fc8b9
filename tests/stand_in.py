"""Stand-in command-line tools (ncu, compute-sanitizer) for tests: a Python script that follows the real tool's
command-line contract, appends each call's arguments to ``calls.jsonl`` and reads its behaviour from ``mode``,
all in its own folder; ``wait_for_go(spare)`` is a run started ahead waiting for its request."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

HEADER = """#!{python}
import json, os, pathlib, sys, time
here = pathlib.Path(__file__).parent
mode = (here / "mode").read_text().strip()
args = sys.argv[1:]
with open(here / "calls.jsonl", "a") as f:
    f.write(json.dumps(args) + "\\n")


def wait_for_go(spare):
    # as a target program started ahead does: wait for its request, or end once its starter is gone
    go = pathlib.Path(spare["go"])
    while not go.exists():
        if mode == "spare-dies":
            sys.exit(3)
        try:
            os.kill(spare["owner"], 0)
        except ProcessLookupError:
            sys.exit(0)
        time.sleep(0.005)
    return json.loads(go.read_text())
"""


def install(folder: Path, name: str, body: str, mode: str) -> Path:
    """Write the executable ``folder/name`` (the header, then ``body``) and its first ``mode``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text(HEADER.format(python=sys.executable) + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    (folder / "mode").write_text(mode)
    return exe
