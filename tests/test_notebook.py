"""The notebook API on stored runs (no GPU): ``agent.load_run``, the objects' HTML, ``run.plot()``, the lineage
records, one candidate's diff; and the example notebook executed end to end in a python3 kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.trace.records import EntryRow

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import run_dir, simulated_run  # noqa: E402,F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "explore_a_run.ipynb"


@pytest.mark.timeout(60)
def test_load_run_opens_a_stored_run_with_its_lineage_as_records(run_dir):
    import agent

    run = agent.load_run(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert run.id == summary["run_id"] and len(run.entries) == summary["candidates"]
    assert run.simulated == summary["simulated"]
    rows = run.rows()
    assert {r.id for r in rows} == {e.id for e in run.entries}
    if summary["best"]:
        assert rows[0].id == summary["best"]["id"] == run.best.id
    assert all(isinstance(r, EntryRow) for r in rows)


@pytest.mark.timeout(60)
def test_load_run_by_id_under_a_traces_folder(simulated_run):
    from agent.api import load_run

    run = load_run(simulated_run.name, traces=simulated_run.parent)
    assert run.path == simulated_run and run.best.id == run.summary.best.id


@pytest.mark.timeout(60)
@pytest.mark.parametrize("over, label", [("evaluations", "candidates evaluated"), ("tokens", "model tokens"),
                                         ("gpu_s", "GPU-seconds"), ("wall_s", "wall time")])
def test_plot_draws_the_best_so_far_curve_as_a_figure(simulated_run, over, label):
    from matplotlib.figure import Figure

    import agent

    run = agent.load_run(simulated_run)
    fig = run.plot(over)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert label in ax.get_xlabel() and "(SIMULATED)" in ax.get_title()
    best_line = next(line for line in ax.get_lines() if line.get_label() == "best so far")
    best = run.best.result.speedup("baseline").value
    assert best_line.get_ydata()[-1] == pytest.approx(best)


@pytest.mark.timeout(60)
def test_plot_refuses_an_unknown_axis(simulated_run):
    import agent

    with pytest.raises(ValueError, match="over: expected one of evaluations, tokens, gpu_s, wall_s"):
        agent.load_run(simulated_run).plot("money")


@pytest.mark.timeout(60)
def test_run_candidate_entry_and_result_render_themselves_as_escaped_html(simulated_run):
    import agent

    run = agent.load_run(simulated_run)
    page = run._repr_html_()
    assert "<svg" in page and "SIMULATED RUN" in page and f'href="#{run.best.id}"' in page
    assert "<script" not in page.lower()
    view = run.candidate("c0001")
    html = view._repr_html_()
    assert "diff against c0000" in html and "&lt;script&gt;alert(&#39;not escaped&#39;)" in html
    assert "<script>alert" not in html
    assert "vector_add4" in view.diff() and view.diff().startswith("--- c0000/candidate.cu")
    entry_html = run.entries[1]._repr_html_()
    assert "&lt;script&gt;alert" in entry_html and "<script>alert" not in entry_html
    result_html = run.best.result._repr_html_()
    assert "speedup vs baseline" in result_html and "SIMULATED" in result_html


@pytest.mark.timeout(60)
def test_a_result_renders_its_failure_escaped(simulated_run):
    import agent

    run = agent.load_run(simulated_run)
    broken = next(e for e in run.entries if e.result.status.value == "compile_error").result
    html = broken.model_copy(update={"error": "error: <img src=x onerror=alert(1)>"})._repr_html_()
    assert "compile_error" in html and "compile failed for" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html
    wrong = next(e for e in run.entries if e.result.status.value == "wrong").result._repr_html_()
    assert "5 of 6 checks passed" in wrong and "[0]: got 0.0, expected 1.0" in wrong


@pytest.mark.timeout(60)
def test_asking_for_a_candidate_that_was_not_evaluated_names_those_that_were(simulated_run):
    import agent

    run = agent.load_run(simulated_run)
    with pytest.raises(KeyError, match=r"c0006.*no evaluated candidate of that id .*\(evaluated: c0000, c0001"):
        run.candidate("c0006")


@pytest.mark.timeout(60)
def test_load_run_of_an_unfinished_run_says_so(simulated_run):
    import agent

    (simulated_run / "summary.json").unlink()
    run = agent.load_run(simulated_run)
    assert any("did not finish" in n for n in run.summary.notes)
    assert run.best is not None and run.best.id == run.rows()[0].id


@pytest.mark.timeout(60)
def test_the_committed_example_notebook_has_no_outputs():
    import nbformat

    nb = nbformat.read(EXAMPLE, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("trace", ["vector_add-simulated", "h200-softmax"])
def test_the_example_notebook_runs_from_a_stored_trace_without_a_gpu(trace):
    """As committed (the simulated run), and pointed at the run a scripted model made on an H200."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(EXAMPLE, as_version=4)
    committed = '"../tests/fixtures/traces/vector_add-simulated.tar.gz"'
    setup = next(c for c in nb.cells if c.cell_type == "code" and committed in c.source)
    setup.source = setup.source.replace(committed, f'"../tests/fixtures/traces/{trace}.tar.gz"')
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLE.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    kinds = [set(o.get("data", {})) for o in outputs]
    assert sum("image/png" in k for k in kinds) == 2
    htmls = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("<svg" in h for h in htmls)
    if trace.startswith("h200"):
        assert any("NVIDIA H200" in h for h in htmls) and not any("SIMULATED RUN" in h for h in htmls)
    else:
        assert any("SIMULATED RUN" in h for h in htmls)
