"""A tool's target program started ahead of its request (a profiling run under ncu, a sanitizer run under
compute-sanitizer; the host side is ``sandbox.plumbing.tools.StartedAhead``): it comes up to its CUDA context, then
waits for the request file its starter writes whole (by a rename), while the starter lives and at most ``wait_s``
seconds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

POLL_S = 0.002


def wait_for_request(spare: dict) -> tuple[dict | None, float]:
    """Wait for ``spare["go"]``: (the request, the seconds it had waited for this program's start-up where it was
    written before the program was up), or (None, 0.0) where none came: past ``spare["wait_s"]``, or once the
    process ``spare["owner"]`` that started this one is gone."""
    ready = time.time()
    go, deadline = Path(spare["go"]), time.monotonic() + spare["wait_s"]
    polls = 0
    while not go.exists():
        polls += 1
        if time.monotonic() > deadline or (polls % 100 == 0 and not alive(spare["owner"])):
            return None, 0.0
        time.sleep(POLL_S)
    return json.loads(go.read_text()), max(0.0, ready - go.stat().st_mtime)


def alive(pid: int) -> bool:
    """Whether the process that started this one still runs (a run whose sandbox is gone ends)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
