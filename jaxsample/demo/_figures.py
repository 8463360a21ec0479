"""What every demo figure must show a reader, read back from its Axes before it is saved."""

from __future__ import annotations

__all__ = ["figure_problems"]


def _label(ax, which: str) -> str:
    return (ax.get_xlabel() if which == "x" else ax.get_ylabel()).strip()


def _shared_label(ax, which: str) -> bool:
    """An axis shared with a sibling panel (``sharex``/``sharey``) may leave its label there."""
    group = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    return any(other is not ax and _label(other, which) for other in group.get_siblings(ax))


def _reference_lines(ax):
    """Lines drawn across the panel by ``axhline``/``axvline`` (in axis-blended coordinates)."""
    blended = (ax.get_xaxis_transform(which="grid"), ax.get_yaxis_transform(which="grid"))
    return [line for line in ax.get_lines() if any(line.get_transform() is t for t in blended)]


def figure_problems(fig) -> list[str]:
    """The reader's questions a figure leaves open, one string each (empty: none).

    Each visible panel needs a title and a label on both axes (a panel sharing an axis with a
    labelled sibling may leave that label to it), and each reference line a legend entry that
    says what it marks.
    """
    problems = []
    panels = [ax for ax in fig.get_axes() if ax.get_visible() and ax.axison]
    for number, ax in enumerate(panels, 1):
        title = (ax.get_title() or ax.get_title(loc="left") or ax.get_title(loc="right")).strip()
        where = f"panel {number} of {len(panels)}" + (f" ({title!r})" if title else "")
        if not title:
            problems.append(f"{where} has no title")
        for which in ("x", "y"):
            if not _label(ax, which) and not _shared_label(ax, which):
                problems.append(f"{where} has no {which}-axis label")
        legend = ax.get_legend()
        shown = {text.get_text() for text in legend.get_texts()} if legend is not None else set()
        for line in _reference_lines(ax):
            if line.get_label().startswith("_") or line.get_label() not in shown:
                problems.append(f"{where} has a reference line with no legend entry")
    return problems
