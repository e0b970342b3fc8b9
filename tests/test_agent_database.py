"""The program database (agent.loop.database): islands with migration, the archive of behaviour cells, the
inspirations, and a scripted run that shows which island and why each parent was picked, in the trace, the prompt,
``show`` and the report."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

import agent
from agent.loop import database
from agent.loop.database import Point, Settings
from agent.report import html, views
from agent.trace.events import RequestEvent, read_events
from agent.trace.reader import read

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script  # noqa: E402

pytestmark = pytest.mark.timeout(180)

ISLANDS = Settings(policy="islands", explore=0.0, islands=2, migration_interval=5)


def _points(*specs) -> list[Point]:
    return [Point(f"c{i}", score, iteration, cell) for i, (score, iteration, cell) in enumerate(specs)]


def test_each_island_grows_its_own_line_until_its_neighbour_s_best_migrates_in():
    points = _points((1.0, 0, ()), (1.5, 1, ()), (1.2, 2, ()), (1.1, 3, ()))   # islands 0, 1, 0
    assert database.pick(points, ISLANDS, 4, random.Random(0)) == database.Pick("c2", "island 1: the best", 1)
    assert database.pick(points, ISLANDS, 5, random.Random(0)).id == "c1"
    points.append(Point("c4", 0.9, 4, ()))
    # five evaluations in: island 0's best (c1) has migrated into island 1, and now leads there
    assert [p.id for p in database.island_members(points, ISLANDS, 1)] == ["c0", "c2", "c4", "c1"]
    assert database.pick(points, ISLANDS, 6, random.Random(0)) == database.Pick(
        "c1", "island 1: the best (migrated from island 0)", 1)


def test_the_archive_keeps_the_best_of_each_cell_and_explores_other_cells():
    points = _points((1.0, 0, ("a",)), (2.0, 1, ("a",)), (1.2, 2, ("b",)), (1.9, 3, ("a",)), (None, 4, ("c",)))
    assert {cell: p.id for cell, p in database.elites(points).items()} == {("a",): "c1", ("b",): "c2"}
    always = Settings(policy="archive", explore=1.0)
    assert database.pick(points, always, 5, random.Random(0)).id == "c2"
    assert database.pick(points, Settings(policy="archive", explore=0.0), 5, random.Random(0)).why == "archive: the best"


def test_inspirations_are_the_k_best_then_the_k_elites_most_unlike_the_parent():
    cell = lambda r, t: (("roofline", r), ("techniques", t))  # noqa: E731
    points = _points((1.0, 0, cell(1, ())), (2.0, 1, cell(3, ("vector",))), (1.8, 2, cell(3, ("vector",))),
                     (1.3, 3, cell(1, ("shared",))), (1.2, 4, cell(2, ("shuffle",))))
    found = [(p.id, why) for p, why in database.inspirations(points, "c1", 1)]
    assert found == [("c2", "one of the best"),
                     ("c3", "different: 20-40% of roofline; techniques: shared")]
    assert database.inspirations(points, "c1", 0) == []


def test_describe_reads_roofline_registers_shared_memory_and_techniques():
    from sandbox.judging.result import Result, Status
    from types import SimpleNamespace as NS

    kernels = {"k": NS(registers=40, static_shared=8192)}
    result = NS(timing=NS(impls={"candidate": NS(pct_of_roofline=67.0)}), compile=NS(ok=True, kernels=kernels))
    source = "__shared__ float s[256];\nfloat4 v = x[i];\nv.x = __shfl_xor_sync(~0u, v.x, 1);"
    cell = database.describe(result, source)
    assert cell == (("roofline", 3), ("registers", 1), ("shared", 1), ("techniques", ("vector", "shuffle", "shared")))
    assert database.describe_cell(cell) == ("60-80% of roofline; <=64 registers; <=16 KiB static shared memory; "
                                            "techniques: vector, shuffle, shared")
    failed = Result(status=Status.compile_error, task="t", task_fingerprint="f", candidate="c", candidate_key="k")
    assert database.describe(failed, "") == (("roofline", None), ("registers", None), ("shared", None),
                                             ("techniques", ()))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-database-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_a_run_with_islands_records_show_and_reports_which_island_and_why(httpserver, tmp_path):
    script = Script([answer(fake=f"speedup={1.2 + 0.1 * k}", variant=k) for k in range(1, 6)])
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.werkzeug)
    run = agent.optimize("vector_add", model="scripted", base_url=httpserver.url_for("/v1"), iterations=5,
                         sandbox="fake", tune=False, sanitize=False, traces=tmp_path / "t", progress=False,
                         config={"selection": {"explore": 0.0},
                                 "lineage": {"policy": "islands", "islands": 2, "migration_interval": 3}})
    requests = [e for e in read_events(run.path) if isinstance(e, RequestEvent) and e.phase == "model"]
    assert [r.island for r in requests] == [0, 1, 0, 1, 0]
    assert [r.parents for r in requests] == [["c0000"], ["c0000"], ["c0002"], ["c0002"], ["c0003"]]
    assert requests[2].why == "island 0: the best (migrated from island 1)"
    assert requests[3].inspirations[0] == "c0003: one of the best"
    assert "Other candidates, for ideas" in script.user_messages[2]
    assert json.loads((run.path / "run.json").read_text())["config"]["lineage"]["policy"] == "islands"

    stored = read(run.path)
    lines = {n["id"]: n for n in views.lineage_lines(stored)}
    assert lines["c0003"]["picked"].startswith("parent by island 0: the best (migrated from island 1); "
                                               "inspirations c0001: one of the best")
    assert "parent by island 1: the best" in html.render_report(stored)
