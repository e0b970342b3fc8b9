"""A tool's target program (``profile_target`` under ncu, ``sanitize_target`` under compute-sanitizer), the parts
both share: ``serve`` is its main, for a request in one go (``PROGRAM REQUEST.json``: a ``wire.TargetStart`` and the
program's request in one JSON object) or for a run started ahead of its request (``PROGRAM --wait SPARE.json``: a
``TargetStart`` and a ``WaitAhead``; the host side is ``sandbox.plumbing.tools.StartedAhead``), which comes up to
its CUDA context, then waits for the request file its starter writes whole (by a rename), while the starter lives
and at most ``wait_s`` seconds. Each program gives a ``start`` (imports, the CUDA context and the harness, into a
stopwatch's parts: ``harness_up``) and a ``work`` (the request's launches); the ``wire.TargetRan`` a request ends
with is written to the start's ``status_file``: ``ran`` with where its seconds went (``split_s``),
``launch_error``, ``crashed`` or ``unused``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from ..wire import TargetRan, TargetStart, WaitAhead, from_json, to_json
from .stopwatch import Stopwatch

POLL_S = 0.002


def serve(argv: list[str], start: Callable, work: Callable, kind: type) -> int:
    """The program's main: ``start(target_start, watch)`` gives the harness (or the ``TargetRan`` of a context that
    broke), ``work(h, req, watch, ahead)`` runs the request, a ``kind`` (``ahead``: on a run started ahead; a
    launch that fails or poisons the context is its status). Exit code 0 when it ran."""
    wait = argv[:1] == ["--wait"]
    text = Path(argv[-1]).read_text()
    if wait:   # a run started ahead: its file names the status file too
        begin, spare = from_json(text, TargetStart, WaitAhead)
        reply = _started_ahead(begin, spare, start, work, kind)
    else:
        begin, req = from_json(text, TargetStart, kind)
        reply = _in_one_go(begin, req, start, work)
    Path(begin.status_file).write_text(to_json(reply))
    return 0 if reply.status == "ran" else 1


def _in_one_go(begin: TargetStart, req, start: Callable, work: Callable) -> TargetRan:
    watch = Stopwatch()
    h = start(begin, watch)
    return h if isinstance(h, TargetRan) else _guarded(work, h, req, watch, False)


def _started_ahead(begin: TargetStart, spare: WaitAhead, start: Callable, work: Callable, kind: type) -> TargetRan:
    """Start up, wait for the request, run it: its parts are those from the request on, and how long the request
    waited for the start-up where it came before the program was up."""
    h = start(begin, Stopwatch())
    if isinstance(h, TargetRan):
        return h
    req, late = wait_for_request(spare, kind)
    if req is None:
        return TargetRan("unused")
    watch = Stopwatch()
    watch.seconds["start-up still running"] = late
    return _guarded(work, h, req, watch, True)


def _guarded(work: Callable, h, req, watch: Stopwatch, ahead: bool) -> TargetRan:
    from .harness import LaunchFailed, Poisoned

    try:
        return work(h, req, watch, ahead)
    except LaunchFailed as exc:
        return TargetRan("launch_error", str(exc))
    except Poisoned as exc:
        return TargetRan("crashed", str(exc))


def harness_up(begin: TargetStart, watch: Stopwatch, pool: bool = True):
    """The device harness of ``begin.arch`` and ``begin.harness_cubin`` with its CUDA context up (``pool``
    False: CuPy's memory pool off first), the imports and the context timed apart; or the ``TargetRan`` of a context
    that broke."""
    with watch("imports"):
        import cupy as cp

        from .harness import Harness, Poisoned

    if not pool:
        cp.cuda.set_allocator(None)
    try:
        with watch("context"):
            h = Harness(begin.arch, Path(begin.harness_cubin).read_bytes())
            h.sync()
    except Poisoned as exc:
        return TargetRan("crashed", str(exc))
    return h


def ran(watch: Stopwatch, **said) -> TargetRan:
    """The ``TargetRan`` of a request that ran: what the program says of it, and where its seconds went."""
    return TargetRan("ran", split_s={part: round(s, 4) for part, s in watch.seconds.items()}, **said)


def wait_for_request(spare: WaitAhead, kind: type) -> tuple:
    """Wait for ``spare.go``: (the request, a ``kind``; the seconds it had waited for this program's start-up where
    it was written before the program was up), or (None, 0.0) where none came: past ``spare.wait_s``, or once the
    process ``spare.owner`` that started this one is gone."""
    ready = time.time()
    go, deadline = Path(spare.go), time.monotonic() + spare.wait_s
    polls = 0
    while not go.exists():
        polls += 1
        if time.monotonic() > deadline or (polls % 100 == 0 and not alive(spare.owner)):
            return None, 0.0
        time.sleep(POLL_S)
    return from_json(go.read_text(), kind)[0], max(0.0, ready - go.stat().st_mtime)


def alive(pid: int) -> bool:
    """Whether the process that started this one still runs (a run whose sandbox is gone ends)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
