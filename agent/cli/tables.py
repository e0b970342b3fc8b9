"""Tables that fit the terminal. A table whose columns fit the console's width is printed as a table, each
data column on one line; one that does not is printed as one block per row (its first columns on a line, the
others below it as ``name: value``), never squeezed into columns a few characters wide. Cells are plain
strings or ``rich.text.Text``: printed verbatim, never read as markup."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

MIN_WRAP = 24   # a free-text column narrower than this is unreadable: switch layout instead


@dataclass(frozen=True)
class Col:
    header: str
    wrap: bool = False      # free text (a description, an error): may wrap inside its cell
    right: bool = False     # numbers


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def needed_width(cols: list[Col], rows: list[list[str | Text]]) -> int:
    """Columns at their natural width (a free-text column at MIN_WRAP at least), plus borders and padding."""
    total = 3 * len(cols) + 1
    for i, col in enumerate(cols):
        natural = max([Text(col.header).cell_len] + [_text(r[i]).cell_len for r in rows])
        total += min(natural, MIN_WRAP) if col.wrap else natural
    return total


def fit(cols: list[Col], rows: list[list[str | Text]], width: int, title: str | None = None, key: int = 1) -> RenderableType:
    """A table within ``width`` columns, or, where it cannot be, one block per row (``key`` columns head each block)."""
    if needed_width(cols, rows) <= width:
        table = Table(title=title, title_justify="left")
        for col in cols:
            table.add_column(col.header, no_wrap=not col.wrap, overflow="fold", justify="right" if col.right else "left")
        for row in rows:
            table.add_row(*(_text(c) for c in row))
        return table
    blocks: list[RenderableType] = [Text(title, style="bold")] if title else []
    for row in rows:
        blocks.append(Text("  ").join(_text(c) for c in row[:key]))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for col, cell in zip(cols[key:], row[key:]):
            if _text(cell).plain.strip() not in ("", "-"):
                grid.add_row(f"{col.header}:", _text(cell))
        blocks.append(Padding(grid, (0, 0, 0, 4)))
    return Group(*blocks)
