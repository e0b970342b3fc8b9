"""The clocks a result reports are the ones its timed rounds ran at: readings after every timed launch, with
their spread, and older results whose only clock was read at a worker's start say so."""

from __future__ import annotations

import sys
from pathlib import Path

from sandbox.judging.environment import Environment
from sandbox.plumbing.envinfo import ClockSampler

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import HERE as TRACES, extract  # noqa: E402

TIMED = {"sm_clock_mhz": {"median": 1980, "min": 1965, "max": 1980, "samples": 36},
         "mem_clock_mhz": {"median": 3201, "min": 3201, "max": 3201, "samples": 36}}


def test_the_sampler_summarizes_what_it_read_and_reads_nothing_without_nvml():
    sampler = ClockSampler()
    if sampler._nvml is None:          # no GPU here: nothing is read, and nothing is made up
        sampler.sample()
        assert sampler.summary() == {}
    sampler.readings = {"sm_clock_mhz": [1980, 1965, 1980, 1980], "mem_clock_mhz": [], "temperature_c": [41, 43, 42],
                        "power_w": []}
    assert sampler.summary() == {"sm_clock_mhz": {"median": 1980.0, "min": 1965, "max": 1980, "samples": 4},
                                 "temperature_c": {"median": 42, "min": 41, "max": 43, "samples": 3}}


def test_a_reading_says_when_it_was_taken():
    env = Environment.model_validate({"sm_clock_mhz": 1980, "clocks_timed": TIMED})
    assert env.describe_reading("sm_clock_mhz") == "1980 (median of 36 readings during the timed rounds, 1965 to 1980)"
    assert Environment(sm_clock_mhz=345).describe_reading("sm_clock_mhz") == \
        "345 (read when the GPU worker started, not during timing)"
    assert Environment().describe_reading("sm_clock_mhz") is None


def test_envelope_and_verify_show_the_timed_clocks_or_say_they_are_the_idle_ones(tmp_path):
    from agent.claims.verify import environment
    from agent.report.views import envelope
    from agent.trace.reader import read

    stored = read(extract(TRACES / "h200-softmax.tar.gz", tmp_path / "traces"))
    rows = {r["key"]: r["value"] for r in envelope(stored, stored.best)}
    assert rows["sm_clock_mhz"].endswith("(read when the GPU worker started, not during timing)")
    then = stored.best.result.env
    now = Environment.model_validate({**then.model_dump(), "sm_clock_mhz": 1980, "clocks_timed": TIMED})
    shown = {r["key"]: r for r in environment(stored, then, now, {})[0]}
    assert shown["sm_clock_mhz"]["now"].startswith("1980 (median of 36 readings during the timed rounds")
    assert shown["sm_clock_mhz"]["run"].endswith("not during timing)")
