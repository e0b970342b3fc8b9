"""Control characters from data (a model's note, a compiler log, task text, trace fields) are shown on the
terminal, never obeyed, while brackets stay verbatim and the console's own styling still works."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text

from agent.cli.app import styled
from agent.cli.terminal import SafeConsole, visible

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "agent"))
from answers import answer  # noqa: E402
from scripted_server import Script, serve_in_background  # noqa: E402

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31m[bold]red[/bold]\x9b1m\x00"


@pytest.mark.timeout(10)
def test_control_characters_become_visible_one_for_one():
    assert visible(EVIL) == "␛]0;owned␇␛[2J␛[31m[bold]red[/bold]\ufffd1m␀"
    assert len(visible(EVIL)) == len(EVIL)
    assert visible("a\tb\nc\r\nd\re\x7f") == "a\tb\nc \nd␍e␡"
    assert visible("smem[tid] plain") == "smem[tid] plain"


@pytest.mark.timeout(10)
def test_the_console_styles_its_own_text_and_shows_the_datas_escapes():
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", markup=False, highlight=False,
                          width=200)
    console.print(styled(("best:", "bold"), " ", EVIL))
    console.print(EVIL)
    table = Table("note")
    table.add_row(Text(EVIL))  # a Text made elsewhere, inside another renderable
    console.print(table)
    text = out.getvalue()
    assert "\x1b[1m" in text, "the console's own bold stays"
    assert "\x1b]0;" not in text and "\x1b[2J" not in text and "\x1b[31m" not in text and "\x00" not in text
    assert text.count("␛]0;owned␇␛[2J") == 2 and "[bold]red[/bold]" in text
    assert text.count("␛]0;owned") == 3  # (rich itself drops the bell from a Text it was handed)


@pytest.mark.timeout(240)
def test_escape_sequences_from_a_model_and_a_compiler_log_reach_no_terminal(kw, tmp_path):
    broken = answer(note=f"Note {EVIL}").replace("int n4 = n / 4;", f'#error "{EVIL}"\n    int n4 = n / 4;')
    script = Script([answer(note=f"A note {EVIL}"), broken])
    server, url = serve_in_background(script)
    traces = tmp_path / "t"
    try:
        run = kw("optimize", "vector_add", "--model", "scripted", "--base-url", url, "--iterations", "2",
                 "--sandbox", "compile-only", "--no-tune", "--traces", traces, "--run-id", "esc")
    finally:
        server.shutdown()
    assert run.returncode in (0, 1), run.stderr
    shown = [run]
    for args in (("show", "esc"), ("show", "esc", "c0002"), ("report", "esc")):
        shown.append(kw(*args, "--traces", traces))
    screen = "".join(r.stdout + r.stderr for r in shown)
    assert "␛[2J" in screen, "the escapes are shown"
    assert "\x1b" not in screen and "\x07" not in screen and "\x00" not in screen
