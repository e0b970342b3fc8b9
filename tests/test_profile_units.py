"""Raw-page values come in the unit ncu finds readable (Gbyte, ms, Kbyte/block): the parser scales them to base units.

The fixture is a capture of tests/fixtures/ncu/capture.sh on an H200 (ncu 2025.3.1): a copy of 2^26 floats,
a strided variant and a naive SGEMM."""

from pathlib import Path

import pytest

from sandbox.profile.counters import summarize
from sandbox.profile.ncu import parse_raw, to_base

RAW = (Path(__file__).parent / "fixtures" / "ncu" / "h200" / "raw.csv").read_text()


def test_units_scale_to_bytes_nanoseconds_and_rates_per_second():
    assert to_base(0.268442, "Gbyte") == (pytest.approx(268.442e6), "byte")
    assert to_base(249.6, "Mbyte") == (pytest.approx(249.6e6), "byte")
    assert to_base(3.14, "ms") == (pytest.approx(3.14e6), "ns")
    assert to_base(2.5, "Kbyte/block") == (pytest.approx(2500.0), "byte/block")
    assert to_base(3.4, "Tbyte/s") == (pytest.approx(3.4e12), "byte/s")
    assert to_base(1.98, "Ghz") == (pytest.approx(1.98e9), "hz")
    assert to_base(40.0, "%") == (40.0, "%")
    assert to_base("text", "byte") == ("text", "byte")


def test_the_captured_copy_kernel_moves_what_it_should():
    launches = parse_raw(RAW)
    copy = next(l for l in launches if "copy" in l["kernel"])
    n_bytes = 4 * (1 << 26)
    assert copy["metrics"]["dram__bytes_read.sum"] == pytest.approx(n_bytes, rel=0.01)
    assert copy["units"]["dram__bytes_read.sum"] == "byte"
    assert copy["metrics"]["gpu__time_duration.sum"] == pytest.approx(197600.0)
    s = summarize(copy["metrics"])
    assert s["dram_bytes"] == pytest.approx(2 * n_bytes, rel=0.1)
    assert 100e3 < s["duration_ns"] < 1e6


def test_pages_are_imported_in_base_units_and_base_units_are_kept_as_they_are():
    from sandbox.profile.ncu import import_command

    for page in ("raw", "details"):
        cmd = import_command("ncu", Path("report.ncu-rep"), page)
        assert cmd[cmd.index("--print-units") + 1] == "base"
    # the spellings ncu uses for base units: values unchanged, units in our spelling
    assert to_base(1318000.0, "nsecond") == (1318000.0, "ns")
    assert to_base(268442000.0, "byte") == (268442000.0, "byte")
    assert to_base(4.1e12, "byte/second") == (pytest.approx(4.1e12), "byte/s")
    assert to_base(1.98e9, "hz") == (1.98e9, "hz")
