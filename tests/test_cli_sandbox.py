"""The CLI on a machine with no GPU: tasks, compile and doctor work; bad input is exit code 2 with one clear line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def kw(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.timeout(120)
def test_tasks_lists_the_suite_with_categories():
    out = kw("tasks", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    names = {r["name"]: r for r in rows}
    assert {"vector_add", "softmax", "sgemm"} <= set(names)
    assert names["sgemm"]["category"] == "compute"


@pytest.mark.timeout(120)
def test_compile_reports_resources_and_exit_codes():
    ok = kw("compile", "softmax", "kernels/softmax/baseline.cu", "--json")
    assert ok.returncode == 0, ok.stderr
    record = json.loads(ok.stdout)
    assert record["status"] == "compiled" and record["compile"]["kernels"]["softmax_rows"]["registers"] > 0
    table = kw("compile", "softmax", "kernels/softmax/baseline.cu")
    assert "softmax_rows" in table.stdout and "registers" in table.stdout


@pytest.mark.timeout(120)
def test_compile_error_is_exit_1_with_the_compiler_message(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text((ROOT / "kernels/vector_add/baseline.cu").read_text().replace("a[i] + b[i]", "a[i] +"))
    out = kw("compile", "vector_add", str(bad))
    assert out.returncode == 1
    assert "compile_error" in out.stdout and "error: expected an expression" in out.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, message", [
    (["compile", "no_such_task", "kernels/softmax/baseline.cu"], "no such task"),
    (["compile", "softmax", "missing.cu"], "no such file"),
    (["compile", "vector_add", "kernels/softmax/baseline.cu"], "unknown names"),
    (["eval", "vector_add", "kernels/vector_add/baseline.cu", "--sizes", "n=abc"], "--sizes"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    out = kw(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.timeout(180)
def test_doctor_says_what_is_found_and_what_it_enables():
    out = kw("doctor")
    assert out.returncode == 0, out.stderr
    for word in ("NVRTC", "CuPy", "GPU", "ncu", "compute-sanitizer", "compile confinement", "Kernel Tuner",
                 "what it enables"):
        assert word in out.stdout
    from sandbox.worker import landlock

    try:
        landlock.abi_version()
        assert "Landlock ABI" in out.stdout
    except landlock.LandlockUnavailable:
        assert "the source filter alone" in " ".join(out.stdout.split())


def test_eval_summary_prints_a_real_h200_result(tmp_path, capsys):
    """The printer of `kernelwright eval` on a Result measured on an H200 (from the stored softmax run)."""
    import tarfile

    from agent.cli.app import console
    from agent.cli.sandbox import print_result
    from sandbox.judging.result import Result

    with tarfile.open(ROOT / "tests" / "fixtures" / "traces" / "h200-softmax.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    result = Result.from_json((tmp_path / "h200-softmax" / "candidates" / "c0003" / "result.json").read_text())
    assert result.ok and result.env.gpu == "NVIDIA H200"
    width = console.width
    console.width = 200  # a wide terminal: the checks below look for phrases a narrow one would wrap
    try:
        print_result(result)
    finally:
        console.width = width
    out = capsys.readouterr().out
    assert "c0003" in out or result.candidate in out
    for text in ("ok", "interleaved rounds", "L2 flushed", "baseline", "vendor", "% of roofline", "NVIDIA H200",
                 f"{result.timing.speedup['baseline'].value:.3f}x"):
        assert text in out, text


@pytest.mark.timeout(120)
def test_version_prints_the_package_version():
    import tomllib

    out = kw("--version")
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out.returncode == 0 and out.stdout.strip() == f"kernelwright {expected}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["optimize", "batch"])
def test_run_commands_group_their_options_and_document_their_exit_codes(command):
    from agent.cli.exits import ExitCode

    out = subprocess.run([sys.executable, "-m", "agent", command, "--help"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    panels = [line.strip("╭─ ").split(" ")[0] for line in out.stdout.splitlines() if line.startswith("╭─ ")]
    assert panels[-4:] == ["Model", "Budget", "Sandbox", "Output"], panels
    text = " ".join(out.stdout.split())
    codes = [ExitCode.OK, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.NO_DEVICE]
    codes += [ExitCode.INTERRUPTED] if command == "optimize" else []
    assert "Exit codes:" in text and all(f" {c.value} " in text.split("Exit codes:")[1] for c in codes)
