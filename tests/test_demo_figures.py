"""Every demo figure explains itself: each panel has a title and labelled axes, and each reference
line a legend entry. The check reads the Axes back before saving (``jaxsample demo`` runs it on
every figure; ``jaxsample demo --strict``, which CI runs, fails on a problem); here it is held to
planted figures and run on the cheap sections (the basics section's figure is checked in
tests/test_cli.py)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from jaxsample.cli import main
from jaxsample.demo import run_demo
from jaxsample.demo._figures import figure_problems


@pytest.fixture
def figure():
    fig, axes = plt.subplots(1, 2, sharey=True)
    yield fig, axes
    plt.close(fig)


def test_a_complete_figure_passes(figure):
    fig, (left, right) = figure
    for ax in (left, right):
        ax.plot([0, 1], [0, 1], label="data")
        ax.axhline(0.5, ls=":", label="reference")
        ax.set(title="panel", xlabel="x")
        ax.legend()
    left.set_ylabel("y")  # the right panel shares its y axis with the left one
    assert figure_problems(fig) == []


def test_each_missing_piece_is_named(figure):
    fig, (left, right) = figure
    left.plot([0, 1], [0, 1])
    left.axvline(0.5)
    left.set_title("left")
    right.set_xlabel("x")
    assert figure_problems(fig) == [
        "panel 1 of 2 ('left') has no x-axis label",
        "panel 1 of 2 ('left') has no y-axis label",
        "panel 1 of 2 ('left') has a reference line with no legend entry",
        "panel 2 of 2 has no title",
        "panel 2 of 2 has no y-axis label",
    ]


def test_a_labelled_reference_line_outside_the_legend_is_a_problem(figure):
    fig, (left, _) = figure
    left.plot([0, 1], [0, 1], label="data")
    left.legend()  # drawn before the line was added: the line is not in it
    left.axhline(0.5, label="reference")
    assert "panel 1 of 2 has a reference line with no legend entry" in figure_problems(fig)


def test_cheap_sections_figures_pass(tmp_path, capsys):
    reports = run_demo(tmp_path, only=["stopping", "risk"])
    checked = {figure: found for report in reports.values()
               for figure, found in report.figure_problems.items()}
    assert set(checked) == {str(tmp_path / "stopping_mixing.png"),
                            str(tmp_path / "risk_asr_bon.png")}
    assert all(found == [] for found in checked.values()), checked
    assert "figure check" not in capsys.readouterr().out


def test_strict_fails_on_a_figure_problem(tmp_path, monkeypatch, capsys):
    import jaxsample.demo._figures as figures

    monkeypatch.setattr(figures, "figure_problems", lambda fig: ["panel 1 of 1 has no title"])
    assert main(["demo", "--strict", "--only", "stopping", "--out", str(tmp_path)]) == 3
    assert "stopping_mixing.png: panel 1 of 1 has no title" in capsys.readouterr().err
