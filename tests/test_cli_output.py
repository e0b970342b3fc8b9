"""What the command line prints: data verbatim (brackets in compiler logs, hints and model text are never markup),
tables that fit an 80-column terminal, --json where a table is printed, and held-out regressions in the headline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import HERE as TRACES, extract  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "tasks"


def kw(*args, columns: int = 200, cwd: Path = ROOT, timeout: int = 240, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    full.update(COLUMNS=str(columns), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=full)


BRACKETS = '''/*@kernelwright
[[launch]]
kernel = "vector_add"
grid = "ceil_div(n, 256)"
block = "256"
args = ["a", "b", "c", "n"]
@*/
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    c[0] = smem[tid]; // needs a [bold] BLOCK, see [redacted] and [/]
}
'''


@pytest.mark.timeout(300)
def test_a_compiler_log_with_brackets_prints_verbatim(tmp_path):
    cand = tmp_path / "brackets.cu"
    cand.write_text(BRACKETS)
    for color in ("0", "1"):
        out = kw("compile", "vector_add", cand, FORCE_COLOR=color) if color == "1" else kw("compile", "vector_add", cand)
        assert out.returncode == 1, out.stderr
        assert "smem[tid]" in out.stdout and "needs a [bold] BLOCK, see [redacted] and [/]" in out.stdout
        assert 'identifier "smem" is undefined' in out.stdout


def test_hints_and_model_text_in_tables_print_verbatim(monkeypatch):
    from typer.testing import CliRunner

    from agent.cli import app
    from agent.cli import doctor as doctor_mod

    rows = [dict(component="Kernel Tuner", status='missing (optional: pip install -e ".[kerneltuner]")',
                 enables="x[i] and [bold]y[/] stay as written")]
    monkeypatch.setattr(doctor_mod, "rows", lambda: rows)
    out = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert 'pip install -e ".[kerneltuner]"' in out.output and "x[i] and [bold]y[/] stay as written" in out.output
    out = CliRunner().invoke(app, ["doctor", "--json"])
    assert json.loads(out.output) == rows


def _lines_fit(text: str, width: int = 80) -> None:
    long = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not long, "\n".join(long)


@pytest.mark.timeout(400)
def test_optimize_and_listing_tables_fit_an_80_column_terminal(tmp_path):
    config = tmp_path / "small.toml"
    config.write_text("[tune]\nmax_evaluations = 3\n")
    out = kw("optimize", "vector_add", "--sandbox", "fake", "--config", config, "--traces", tmp_path / "t",
             "--run-id", "narrow", columns=80)
    assert out.returncode == 0, out.stderr
    table = out.stdout[:out.stdout.index("\nSIMULATED: ")]   # the prose after the table wraps as the terminal does
    _lines_fit(table)
    run = json.loads((tmp_path / "t" / "narrow" / "summary.json").read_text())
    best = run["best"]["id"]
    assert re.search(rf"^{best}\s+ok\s+\d\.\d{{3}}x \[\d\.\d{{3}}, \d\.\d{{3}}\]$", table, re.M), table
    assert re.search(r"^best: .*REGRESSES at \d of 3 held-out sizes", out.stdout, re.M) or "FLAGGED" not in out.stdout
    for args in (["tasks"], ["tasks", EXAMPLES], ["check-task", EXAMPLES / "maxpool2d"]):
        listing = kw(*args, columns=80)
        assert listing.returncode == 0, listing.stderr
        _lines_fit(listing.stdout)
    assert "OH=255, OW=255" in listing.stdout and "every check passed" in listing.stdout


@pytest.mark.timeout(300)
def test_check_task_exit_codes_and_json(tmp_path):
    ok = kw("check-task", EXAMPLES / "argmax", "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["ok"] is True and report["task"] == "argmax" and report["sizes"][0]["label"] == "benchmark"
    broken = tmp_path / "argmax"
    shutil.copytree(EXAMPLES / "argmax", broken)
    base = broken / "baseline.cu"
    base.write_text(base.read_text().replace('args = ["x", "idx", "cols"]', 'args = ["x", "idx"]'))
    bad = kw("check-task", broken)
    assert bad.returncode == 1
    assert "the plan passes 2 arguments, the kernel takes 3 parameters" in " ".join(bad.stdout.split())
    (broken / "task.toml").write_bytes(b"name = \"argmax\"\n\xff\n")
    unloadable = kw("check-task", broken)
    assert unloadable.returncode == 2 and "not UTF-8" in unloadable.stderr and unloadable.stdout == ""


@pytest.mark.timeout(300)
def test_tasks_in_a_folder_compile_inside_a_task_folder_and_a_shadowed_suite_name(tmp_path):
    listed = kw("tasks", EXAMPLES, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["add_rmsnorm_bf16", "argmax", "conv1d_bias_relu", "cross_entropy", "gemm_nt",
                                                             "maxpool2d"]
    missing = kw("tasks", tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    inside = kw("compile", ".", "baseline.cu", cwd=EXAMPLES / "gemm_nt")
    assert inside.returncode == 0, inside.stdout + inside.stderr
    shutil.copytree(ROOT / "kernels" / "vector_add", tmp_path / "vector_add")
    shadow = kw("compile", "vector_add", "vector_add/baseline.cu", cwd=tmp_path)
    assert shadow.returncode == 0, shadow.stderr
    assert "'vector_add' is the suite task; the folder ./vector_add here is not used" in shadow.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize("old, new, message", [
    ('shape = ["N", "C", "OH", "OW"]', 'shape = ["N", "C", "OH // (H - H)", "OW"]', "division by zero"),
    ("benchmark = { N = 16,", "benchmark = { N = 99999999999999999999,", "sizes.benchmark"),
    ('bytes = "4 * N * C * H * W', 'bytes = "4 * N * C * H * W // (W - W)', "roofline.bytes"),
])
def test_a_task_that_cannot_be_evaluated_stops_optimize_before_any_trace_folder(tmp_path, old, new, message):
    folder = tmp_path / "maxpool2d"
    shutil.copytree(EXAMPLES / "maxpool2d", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace(old, new, 1))
    out = kw("optimize", folder, "--sandbox", "fake", "--traces", tmp_path / "t")
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("error: ") and message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


@pytest.mark.timeout(300)
def test_sizes_beyond_int64_or_breaking_a_constraint_are_bad_input():
    out = kw("eval", EXAMPLES / "conv1d_bias_relu", EXAMPLES / "conv1d_bias_relu" / "baseline.cu",
             "--sizes", "N=1,CI=2,CO=3,L=2,KW=3")
    assert out.returncode == 2 and "the constraint 'KW <= L' does not hold" in out.stderr
    out = kw("eval", "vector_add", ROOT / "kernels" / "vector_add" / "baseline.cu", "--sizes", "n=99999999999999999999")
    assert out.returncode == 2 and "int64" in out.stderr


@pytest.mark.timeout(300)
def test_show_json_and_the_headline_names_held_out_regressions(tmp_path):
    from agent.report.views import summary_view
    from agent.trace.reader import read

    run = extract(TRACES / "h200-softmax-tune.tar.gz", tmp_path / "traces")
    view = summary_view(read(run))
    assert view["best"]["regressions"].startswith("REGRESSES at 3 of 3 held-out sizes: 0.651x at rows=100000,cols=1000")
    shown = kw("show", run)
    assert shown.returncode == 0, shown.stderr
    head = next(line for line in shown.stdout.splitlines() if line.startswith("winner "))
    assert "vs baseline: faster" in head and "REGRESSES at 3 of 3 held-out sizes" in head
    as_json = json.loads(kw("show", run, "--json").stdout)
    assert as_json["best"]["regressions"] == view["best"]["regressions"] and as_json["lineage"]
    from agent.report.html import render_report

    import agent

    for html in (render_report(read(run)), agent.load_run(run)._repr_html_()):   # the report, the notebook view
        claim = html[html.index('<p class="claim">'):]
        assert "REGRESSES at 3 of 3 held-out sizes" in claim[:claim.index("</p>")]
