"""The visible search on a real GPU: screened configurations measured on the device, the roofline against the
device's measured ceilings, and progress against the budget."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.timeout(600)
def test_a_short_gpu_search_lists_its_screenings_and_plots_them_against_measured_ceilings(tmp_path, kw):
    from matplotlib.figure import Figure

    import agent
    from agent.loop.progress import status_line
    from agent.report.html import render_report
    from agent.trace.reader import read

    lines: list[str] = []
    run = agent.optimize("vector_add", sandbox="gpu", sanitize=False, traces=tmp_path / "t", run_id="gpu-search",
                         config={"tune": {"max_evaluations": 12}},
                         on_progress=lambda kind, snap: lines.append(status_line(snap)))
    rows = run.screened()
    assert rows and all(r.ms is not None for r in rows if r.status == "ok")
    assert any("configurations measured" in l and "/12" in l for l in lines)
    ceilings = next(e.result.env.ceilings for e in run.entries if e.result.env.ceilings)
    assert "simulated" not in (ceilings.method or "")
    assert isinstance(run.plot("space"), Figure) and isinstance(run.plot("roofline"), Figure)
    html = render_report(read(run.path)).replace("\n", "")
    assert '<figure class="plot" id="plot-space"><svg' in html and '<figure class="plot" id="plot-roofline"><svg' in html
    shown = json.loads(kw("show", "gpu-search", "--traces", tmp_path / "t", "--json").stdout)
    assert shown["screened"] == [r.to_json() for r in rows]


@pytest.mark.timeout(300)
def test_on_a_gpu_machine_doctor_names_the_gpu_and_eval_measures(kw):
    from pathlib import Path

    doctor = kw("doctor", "--json")
    gpu = next(r for r in json.loads(doctor.stdout) if r["component"] == "GPU")
    assert not gpu["status"].startswith("none")
    base = Path(__file__).resolve().parent.parent / "kernels" / "vector_add" / "baseline.cu"
    out = kw("eval", "vector_add", base)
    assert out.returncode == 0 and "SIMULATED" not in out.stdout
