"""The roofline figure's names (the winner's, the baseline's) and its legend never cover one another, for a
compute-bound task and for one that counts no FLOPs, however close the points lie."""

from __future__ import annotations

import itertools

import pytest

import agent
from agent.report.plots import roofline
from agent.trace.reader import read
from sandbox.tasks.task import load_task

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("task", ["vector_add", "sgemm", "softmax"])
def test_the_roofline_labels_do_not_overlap(task, tmp_path):
    run = agent.optimize(task, sandbox="fake", sanitize=False, traces=tmp_path, progress=False,
                         config={"tune": {"max_evaluations": 6}})
    fig = roofline(read(run.path), load_task(task))
    assert fig is not None
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_text()]
    assert {t.get_text().split()[0] for t in names} >= {"c0000"}
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in names]
    boxes.append(("legend", ax.get_legend().get_window_extent(renderer)))
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), f"{a!r} overlaps {b!r}"
