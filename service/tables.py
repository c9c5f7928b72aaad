"""Plain-text tables, each column as wide as its widest cell: how the CLI tools and Spark jobs print rows.

Pure formatting; the caller decides where the text goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["format_table"]


def format_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """``header`` then ``rows``, one line each, cells left-aligned two spaces apart; ``None`` is blank."""
    cells = [[str(c) for c in header], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in cells
    )
