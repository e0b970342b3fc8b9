"""A tool's target program (``profile_target`` under ncu, ``sanitize_target`` under compute-sanitizer), the parts
both share: ``serve`` is its main, for a request in one go (``PROGRAM REQUEST.json``) or for a run started ahead of
its request (``PROGRAM --wait SPARE.json``; the host side is ``sandbox.plumbing.tools.StartedAhead``), which comes
up to its CUDA context, then waits for the request file its starter writes whole (by a rename), while the starter
lives and at most ``wait_s`` seconds. Each program gives a ``start`` (imports, the CUDA context and the harness,
into a stopwatch's parts: ``harness_up``) and a ``work`` (the request's launches); the status a request ends with
is written to its ``status_file``: ``ran`` with where its seconds went (``split_s``), ``launch_error``,
``crashed`` or ``unused``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from .stopwatch import Stopwatch

POLL_S = 0.002


def serve(argv: list[str], start: Callable, work: Callable) -> int:
    """The program's main: ``start(req, watch)`` gives the harness (or the status of a context that broke),
    ``work(h, req, watch, ahead)`` runs the request (``ahead``: on a run started ahead; a launch that fails or
    poisons the context is its status)."""
    from .harness import serve_request

    if argv[:1] == ["--wait"]:   # a run started ahead: its file names the status file too
        return serve_request(argv[1:], lambda spare: _started_ahead(spare, start, work))
    return serve_request(argv, lambda req: _in_one_go(req, start, work))


def _in_one_go(req: dict, start: Callable, work: Callable) -> dict:
    watch = Stopwatch()
    h = start(req, watch)
    return h if isinstance(h, dict) else _guarded(work, h, req, watch, False)


def _started_ahead(spare: dict, start: Callable, work: Callable) -> dict:
    """Start up, wait for the request, run it: its parts are those from the request on, and how long the request
    waited for the start-up where it came before the program was up."""
    h = start(spare, Stopwatch())
    if isinstance(h, dict):
        return h
    req, late = wait_for_request(spare)
    if req is None:
        return {"status": "unused"}
    watch = Stopwatch()
    watch.seconds["start-up still running"] = late
    return _guarded(work, h, req, watch, True)


def _guarded(work: Callable, h, req: dict, watch: Stopwatch, ahead: bool) -> dict:
    from .harness import LaunchFailed, Poisoned

    try:
        return work(h, req, watch, ahead)
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}


def harness_up(req: dict, watch: Stopwatch, pool: bool = True):
    """The device harness of ``req["arch"]`` and ``req["harness_cubin"]`` with its CUDA context up (``pool``
    False: CuPy's memory pool off first), the imports and the context timed apart; or the status of a context
    that broke."""
    with watch("imports"):
        import cupy as cp

        from .harness import Harness, Poisoned

    if not pool:
        cp.cuda.set_allocator(None)
    try:
        with watch("context"):
            h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
            h.sync()
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return h


def ran(watch: Stopwatch, **said) -> dict:
    """The status of a request that ran: what the program says of it, and where its seconds went."""
    return {"status": "ran", **said, "split_s": {part: round(s, 4) for part, s in watch.seconds.items()}}


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
