"""Plain-text and Markdown tables shared by ``jaxsample demo`` and the benchmarks."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["format_value", "markdown_table"]


def format_value(value) -> str:
    """Formats a table cell: 4 significant digits for floats, ``-`` for ``None``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A GitHub-flavoured Markdown table whose columns are padded to line up in a terminal.

    Example:
        >>> print(markdown_table(["method", "time"], [["etd", 0.5]]))
        | method | time |
        | ------ | ---- |
        | etd    | 0.5  |
    """
    cells = [[str(h) for h in headers]] + [[format_value(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
             for r in cells]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)
