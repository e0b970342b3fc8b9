"""compute-sanitizer's output is read into error counts, the first error and its kernel."""

from pathlib import Path

import pytest

from sandbox.judging.sanitizer_report import SanitizeReport, overall, parse, verdict
from sandbox.wire import TargetRan

FIXTURES = Path(__file__).parent / "fixtures" / "sanitizer"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_an_out_of_bounds_write_is_counted_with_its_kernel_and_line():
    out = parse("memcheck", read("memcheck_oob.txt"))
    assert out.errors == 2
    assert out.kernel == "k"
    assert out.location == "candidate.cu:12"
    assert out.first_error.splitlines() == [
        "Invalid __global__ write of size 4 bytes", "at k+0x1b0 in candidate.cu:12",
        "by thread (7,0,0) in block (3,0,0)", "Access at 0x7f3a2c0013ec is out of bounds"]
    assert len(out.reports) == 2


def test_a_clean_memcheck_run_has_zero_errors_and_ignores_the_programs_own_lines():
    out = parse("memcheck", read("memcheck_clean.txt"))
    assert (out.errors, out.reports, out.kernel, out.first_error) == (0, [], None, "")


def test_errors_past_the_print_limit_still_count():
    out = parse("memcheck", read("memcheck_over_limit.txt"))
    assert out.errors == 256
    assert out.kernel == "void tile<32>(float const *, float *, int)"
    assert out.first_error.startswith("Invalid __shared__ read of size 16 bytes")


def test_a_hardware_exception_is_the_first_error():
    out = parse("memcheck", read("memcheck_hardware_exception.txt"))
    assert out.errors == 2
    assert out.first_error.startswith("Warp Illegal Address")
    assert out.kernel == "k"


def test_a_race_is_an_error_with_both_accesses():
    out = parse("racecheck", read("racecheck_race.txt"))
    assert (out.errors, out.warnings) == (1, 0)
    assert out.kernel == "k"
    assert out.location == "candidate.cu:12"
    assert out.first_error.splitlines()[1] == "and Read access at k+0x1e0 in candidate.cu:15 [248 hazards]"


def test_racecheck_warnings_are_not_errors():
    out = parse("racecheck", read("racecheck_warning_only.txt"))
    assert (out.errors, out.warnings) == (0, 1)
    assert out.first_error == "" and out.kernel is None


def test_a_clean_racecheck_run():
    out = parse("racecheck", read("racecheck_clean.txt"))
    assert (out.errors, out.warnings, out.reports) == (0, 0, [])


def test_a_run_without_a_summary_has_no_error_count():
    out = parse("memcheck", read("tool_stopped.txt"))
    assert out.errors is None
    assert out.reports[0] == ["Error: Target application terminated before first instrumented API call"]


def test_an_unknown_tool_is_refused():
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool"):
        parse("leakcheck", "")


RAN = TargetRan("ran")


def test_a_verdict_needs_the_target_to_have_run():
    clean = verdict("memcheck", 0, read("memcheck_clean.txt"), RAN, 2.0, 60)
    assert (clean.status, clean.errors, clean.seconds) == ("clean", 0, 2.0)
    died = verdict("racecheck", 1, read("racecheck_clean.txt"), TargetRan("crashed", "segfault"), 2.0, 60)
    assert died.status == "failed" and "crashed: segfault" in died.reason
    silent = verdict("memcheck", 0, read("memcheck_clean.txt"), None, 1.0, 60)
    assert silent.status == "failed" and "wrote no status" in silent.reason


def test_errors_stand_even_when_the_target_then_crashed_or_timed_out():
    crashed = verdict("memcheck", 86, read("memcheck_hardware_exception.txt"), TargetRan("crashed", "x"), 1, 60)
    assert crashed.status == "errors" and crashed.kernel == "k"
    killed = verdict("racecheck", None, read("racecheck_race.txt"), None, 60, 60)
    assert killed.status == "errors"
    assert verdict("racecheck", None, "", None, 60, 60).reason == "passed its 60 s limit and was killed"


def test_no_summary_is_no_verdict():
    v = verdict("memcheck", 1, read("tool_stopped.txt"), RAN, 1, 60)
    assert v.status == "failed"
    assert "Target application terminated before first instrumented API call" in v.reason


def test_the_report_says_what_each_tool_found_in_one_line():
    race = verdict("racecheck", 86, read("racecheck_race.txt"), RAN, 3, 60)
    clean = verdict("memcheck", 0, read("memcheck_clean.txt"), RAN, 2, 60)
    report = SanitizeReport(status=overall([clean, race]), sizes=[{"n": 7}], tools=[clean, race])
    assert report.status == "errors" and report.seconds == 5
    assert report.text() == ("memcheck: clean; racecheck: 1 error in k at candidate.cu:12: "
                             "Error: Race reported between Write access at k+0x140 in candidate.cu:12")
    assert overall([clean]) == "clean" and overall([clean, verdict("memcheck", 0, "", None, 0, 1)]) == "failed"
    missing = SanitizeReport(status="unavailable", reason="no compute-sanitizer")
    assert missing.text() == "not sanitized (no compute-sanitizer)"


def test_older_releases_words_for_where_an_error_is_are_read_too():
    mem = parse("memcheck", read("memcheck_older_format.txt"))
    assert (mem.errors, mem.kernel, mem.location) == (1, "void tile<32>(float const *, float *, int)", None)
    race = parse("racecheck", read("racecheck_older_format.txt"))
    assert (race.errors, race.kernel, race.location) == (1, "k(float const *, float const *, float*, int)",
                                                         "candidate.cu:12")
