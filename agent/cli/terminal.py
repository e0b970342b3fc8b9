"""Text from data reaches the terminal shown, never obeyed.

Model notes, compiler logs, task descriptions and trace fields may hold control characters: an escape
sequence in them would recolour, move the cursor, retitle or clear a terminal. ``visible`` maps each control
character to a printable stand-in of one character (the Unicode control pictures: ESC -> ``␛``, NUL -> ``␀``,
DEL -> ``␡``; a C1 control, or a lone surrogate that no terminal encoding can carry -> ``�``), so a text keeps its length and a rich ``Text`` its styled spans. Line
breaks and tabs stay; a carriage return before a line break becomes a space, any other one ``␍``.

``SafeConsole`` is a rich ``Console`` that applies ``visible`` to every string it renders and to every
segment of text it is about to write, whatever renderable (a table cell, a ``Text``, a live display) carries
it. Its own escape codes (colours, cursor moves of a live display) are made after that, and stay.
Markup stays off: brackets in data print as they are.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.segment import Segment

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _picture(m: re.Match) -> str:
    c = ord(m.group(0))
    if c < 0x20:
        return chr(0x2400 + c)
    return "\u2421" if c == 0x7F else "\ufffd"


def visible(text: str) -> str:
    """``text`` with its control characters shown as printable characters (same length; newlines and tabs kept)."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(_picture, text.replace("\r\n", " \n"))


class SafeConsole(Console):
    def render_str(self, text: str, **kwargs):
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable, options=None):
        for segment in super().render(renderable, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style, segment.control)
