"""A session that will profile starts a profiling run ahead of its first profile (``Sandbox.warm_profiler``), so
that the baseline's profile, the first prompt's, pays no start-up either; one that will not profile starts none."""

from __future__ import annotations

import dataclasses

import pytest

import agent
from agent.protocols import Proposal
from sandbox import FakeSandbox, load_candidate, load_task

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))


class One:
    """A model stand-in with one answer: the baseline at another block size."""

    name = "one"

    def __init__(self):
        base = load_candidate(load_task("vector_add").baseline_path)
        self.left = [dataclasses.replace(base.with_knobs({"BLOCK": 512}), label="answer")]

    def propose(self, request):
        return [Proposal(self.left.pop(), [request.baseline.id], "model")] if self.left else []

    def observe(self, entry):
        pass


@pytest.fixture
def warmed(monkeypatch):
    calls = []
    monkeypatch.setattr(FakeSandbox, "warm_profiler", lambda sb: calls.append("warm_profiler"))
    real = FakeSandbox.evaluate

    def evaluate(sb, *args, **kwargs):
        calls.append("evaluate")
        return real(sb, *args, **kwargs)

    monkeypatch.setattr(FakeSandbox, "evaluate", evaluate)
    return calls


@pytest.mark.parametrize("profile", ["prompt", "promising", "all"])
def test_a_model_run_that_profiles_starts_a_profiling_run_before_its_baseline_is_evaluated(warmed, tmp_path, profile):
    agent.optimize("vector_add", proposer=One(), sandbox="fake", traces=tmp_path / "traces", progress=False,
                   config={"budget": {"iterations": 1}, "tune": {"enabled": False}, "profile": profile})
    assert warmed[:2] == ["warm_profiler", "evaluate"] and warmed.count("warm_profiler") == 1


@pytest.mark.parametrize("config", [{"profile": "none"},                                  # a model run that never profiles
                                    {"tune": {"enabled": True, "strategy": "exhaustive"}}])  # no model reads a diagnosis
def test_a_run_that_will_not_profile_starts_none(warmed, tmp_path, config):
    model = {"proposer": One()} if "profile" in config else {}
    agent.optimize("vector_add", sandbox="fake", traces=tmp_path / "traces", progress=False,
                   config={"budget": {"iterations": 1}, **config}, **model)
    assert "warm_profiler" not in warmed and "evaluate" in warmed
