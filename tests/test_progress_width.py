"""The terminal's live status line at 120 and at 80 columns: one line that keeps the count of work against its
budget, the GPU-seconds and the time left, said as an upper estimate ("at most")."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

import agent
from agent.cli import optimize as cli_optimize

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    snaps: list[dict] = []
    agent.optimize("vector_add", sandbox="fake", traces=tmp_path_factory.mktemp("t"), sanitize=False,
                   config={"tune": {"max_evaluations": 8}}, on_progress=lambda kind, snap: snaps.append(snap))
    return [s for s in snaps if s]


@pytest.mark.parametrize("width", [120, 80])
def test_the_status_line_keeps_count_gpu_seconds_and_time_left_at_this_width(snapshots, width, monkeypatch):
    monkeypatch.setattr(cli_optimize, "console", Console(width=width))
    with_eta = 0
    for snap in snapshots:
        console = Console(width=width, record=True, file=open("/dev/null", "w"))
        console.print(cli_optimize._progress(snap))
        lines = console.export_text().splitlines()
        status = lines[0]
        assert len(status) <= width and len(lines) == (2 if snap.get("last") else 1), lines
        work = snap["work"]
        count = f"{work['done']}/{work['total']}" if work["total"] is not None else f"{work['done']}"
        assert re.search(rf"\b{re.escape(count)}\b", status), status
        assert f"{snap['gpu_s']:.2f}" in status and "GPU-s" in status, status
        if snap.get("eta_s") is not None:
            with_eta += 1
            assert f"at most {snap['eta_s']:.0f} s left" in status and "about" not in status, status
    assert with_eta, "no snapshot had an estimate of the time left"
