"""`kernelwright.optimize` in Jupyter shows its progress as an ipywidgets widget (the `notebook` extra): a notebook
run by nbclient displays the widget, stores its state (the bar at its end, the count, the GPU-seconds), and warns
of no missing IProgress."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(240)
def test_optimize_in_a_notebook_draws_a_progress_widget(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    code = (f"import kernelwright as kw\n"
            f"run = kw.optimize('vector_add', sandbox='fake', sanitize=False, traces={str(tmp_path / 't')!r},\n"
            f"                  config={{'tune': {{'max_evaluations': 6}}}})\n"
            f"print(run.id, run.best.id)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(nb, timeout=200, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"], outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "IProgress not found" not in text and "TqdmWarning" not in text, text
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert views, outputs
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    bars = [m["state"] for m in state.values() if m["model_name"] == "FloatProgressModel"]
    labels = [m["state"]["value"].replace("\u2007", " ") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert bars and any(b["max"] and b["value"] == b["max"] for b in bars), bars
    assert any(label.startswith("search: configurations measured:") for label in labels), labels
    counted = [label for label in labels if re.match(r" \d+/\d+ \[", label)]   # the text right of the bar
    assert counted and all("GPU-s (simulated)" in label for label in counted), labels
    assert not any("<00:" in label for label in labels), labels   # no time-left that assumes the whole budget
