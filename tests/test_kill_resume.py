"""`kernelwright optimize` killed with SIGKILL at random moments, and resumed each time, ends with the lineage of
a run that was never interrupted: the same candidate ids, sources, parents and statuses, model phase and tuning.
So does a run stopped after any one of its events (the folder as a kill there leaves it), resumed once."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agent
from agent.trace.events import ProposalEvent
from agent.trace.reader import read
from agent.trace.writer import Trace

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from conftest import private_cache  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KILLS = 5


@pytest.fixture
def answers_run(tmp_path, monkeypatch, compiled_kernels):
    """A stored run whose model answers the others replay: good ones, a compile error, one without code."""
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    steps = [answer(fake="speedup=1.2", variant=1), answer(broken=True, variant=2), "I would unroll the loop.",
             answer(fake="speedup=1.4", variant=3), answer(fake="speedup=1.1", variant=4),
             answer(fake="speedup=1.5", variant=5)]
    server, url = serve_in_background(Script(steps))
    try:
        run = agent.optimize("vector_add", model="scripted", base_url=url, iterations=len(steps), sandbox="fake",
                             tune=False, traces=tmp_path / "source",
                             config={"model": {"name": "scripted", "semantic_retries": 0}})
    finally:
        server.shutdown()
    return run.path


def _lineage(run: Path) -> list[tuple]:
    stored = read(run)
    proposals = [(e.candidate_id, e.phase, e.parents, e.origin, e.request, e.iteration) for e in stored.events
                 if isinstance(e, ProposalEvent)]
    results = {e.id: e.result.status.value for e in stored.entries}
    sources = {p[0]: (run / "candidates" / p[0] / "candidate.cu").read_text() for p in proposals if p[0]}
    return [p + (results.get(p[0], "not evaluated"), sources.get(p[0])) for p in proposals]


@pytest.mark.timeout(300)
def test_a_run_killed_five_times_at_random_moments_resumes_to_the_lineage_of_an_unbroken_run(answers_run, tmp_path, kw):
    config = tmp_path / "run.toml"
    config.write_text("[tune]\nmax_evaluations = 4\n[selection]\nexplore = 0.5\n")
    traces = tmp_path / "t"
    start = ["optimize", "vector_add", "--replay", answers_run, "--sandbox", "fake", "--config", config,
             "--traces", traces, "--no-sanitize", "--quiet"]
    agent.optimize("vector_add", replay=answers_run, sandbox="fake", config=config, sanitize=False, traces=traces,
                   run_id="unbroken")  # in this process, as the CLI would: the same config, no subprocess to start

    seed = random.randrange(10**6)
    rng = random.Random(seed)
    # the kill moments: after a random number of the run's events, five of them spread over the whole run (the
    # unbroken run's event count; a resume adds events of its own, so a kill lands earlier, never past the end),
    # then a random fraction of the next few milliseconds: between events or in the middle of writing one
    total = (traces / "unbroken" / "events.jsonl").read_bytes().count(b"\n")
    targets = sorted(rng.sample(range(2, total - 6), KILLS))
    events, kills = traces / "killed" / "events.jsonl", 0
    for target in targets:
        resuming = (traces / "killed" / "run.json").is_file()
        args = ["optimize", "--resume", "killed", "--traces", traces, "--quiet"] if resuming else [*start, "--run-id", "killed"]
        proc = subprocess.Popen([sys.executable, "-m", "agent", *map(str, args)], cwd=ROOT, env=kw.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and \
                (not events.exists() or events.read_bytes().count(b"\n") < target):
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.01))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
        assert proc.returncode in (0, -signal.SIGKILL), (seed, proc.stderr.read())
    assert kills == KILLS, f"seed {seed}: {KILLS - kills} of the kills came after the run had ended"
    final = agent.optimize(resume=traces / "killed", traces=traces)
    assert final.stop is not None and not final.stop.reason.failed, (seed, final.stop)

    expected, got = _lineage(traces / "unbroken"), _lineage(traces / "killed")
    assert {p[1] for p in expected} == {"setup", "model", "tune"} and len(expected) > 8
    assert got == expected, f"seed {seed}"


@pytest.mark.slow  # one resume per event of a whole run: about two minutes of a 2-core machine
@pytest.mark.timeout(600)
def test_a_run_stopped_after_any_one_of_its_events_resumes_to_the_lineage_of_an_unbroken_run(answers_run, tmp_path,
                                                                                           monkeypatch):
    config = tmp_path / "run.toml"
    config.write_text("[tune]\nmax_evaluations = 4\n[selection]\nexplore = 0.5\n")
    traces, stops = tmp_path / "t", tmp_path / "stops"
    record = Trace.event

    def event_then_copy(trace, event):
        # every event is on disk (fsynced, files written atomically) before the run goes on: the folder copied
        # here is what a SIGKILL right after this event leaves
        written = record(trace, event)
        shutil.copytree(trace.path, stops / f"{written.seq:03d}", ignore=shutil.ignore_patterns(".lock"))
        return written

    monkeypatch.setattr(Trace, "event", event_then_copy)
    agent.optimize("vector_add", replay=answers_run, sandbox="fake", config=config, sanitize=False, traces=traces,
                   run_id="unbroken")
    monkeypatch.setattr(Trace, "event", record)
    expected = _lineage(traces / "unbroken")
    assert {p[1] for p in expected} == {"setup", "model", "tune"} and len(expected) > 8

    differ = []
    for stopped in sorted(stops.iterdir()):
        final = agent.optimize(resume=stopped, traces=stops)
        assert final.stop is not None and not final.stop.reason.failed, (stopped.name, final.stop)
        got = _lineage(stopped)
        if got != expected:
            differ.append((stopped.name, next(((g, e) for g, e in zip(got, expected) if g != e), (got, expected))))
    assert not differ, differ
