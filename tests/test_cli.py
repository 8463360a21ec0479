"""The command line and the demo registry."""

import subprocess
import sys

import pytest

from jaxsample.cli import main
from jaxsample.demo import available_sections, run_demo


def test_demo_help_explains():
    result = subprocess.run([sys.executable, "-m", "jaxsample", "demo", "--help"],
                            capture_output=True, text=True, check=True)
    assert "--out" in result.stdout and "figures" in result.stdout


def test_sections_are_discovered():
    names = [s.name for s in available_sections()]
    assert "basics" in names and names == sorted(names, key=names.index)


def test_basics_section_runs_and_writes_figure(tmp_path, capsys):
    reports = run_demo(tmp_path, only=["basics"])
    report = reports["basics"]
    assert all(f.exists() for f in report.figures)
    rows = {row[0]: row for row in report.rows}
    # the diagnostics must rank the biased sampler below the accurate one
    assert rows["ULA h=0.3"][1] > rows["ULA h=0.05"][1]
    assert "energy dist." in capsys.readouterr().out


def test_unknown_section_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown demo section"):
        run_demo(tmp_path, only=["nope"])
    assert main(["demo", "--out", str(tmp_path), "--only", "nope"]) == 2
