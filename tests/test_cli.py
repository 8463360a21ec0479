"""The command line and the demo registry."""

import os
import re
import subprocess
import sys

import pytest

import jaxsample
from jaxsample.cli import main
from jaxsample.demo import DEMO_TIME, available_sections, run_demo


def _cli(*args, block=()):
    """``python -m jaxsample ARGS`` in a fresh interpreter where the modules in ``block`` cannot
    be imported (as on an install without the extra that brings them)."""
    source = ("import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
              + "import runpy; sys.argv = ['jaxsample', *sys.argv[1:]]\n"
              + "runpy.run_module('jaxsample', run_name='__main__')\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", source, *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_demo_help_explains_and_states_the_measured_time():
    result = subprocess.run([sys.executable, "-m", "jaxsample", "demo", "--help"],
                            capture_output=True, text=True, check=True)
    assert "--out" in result.stdout and "figures" in result.stdout
    assert " ".join(DEMO_TIME.split()) in " ".join(result.stdout.split())


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"jaxsample {jaxsample.__version__}"


def test_no_command_prints_help_and_names_a_command(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "usage: jaxsample" in err and "jaxsample demo" in err


def test_list_and_demo_without_matplotlib():
    # the base install has neither matplotlib nor blackjax
    listed = _cli("demo", "--list", block=("matplotlib", "blackjax"))
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == [s.name for s in available_sections()]
    demo = _cli("demo", "--only", "basics", block=("matplotlib",))
    assert demo.returncode == 1
    assert 'pip install "jaxsample[demo]"' in demo.stderr and "Traceback" not in demo.stderr


def test_sections_are_discovered():
    names = [s.name for s in available_sections()]
    assert "basics" in names and names == sorted(names, key=names.index)


def test_basics_section_runs_prints_in_order_and_writes_checked_figure(tmp_path, capsys):
    reports = run_demo(tmp_path, only=["basics"])
    report = reports["basics"]
    assert all(f.exists() for f in report.figures)
    assert report.figure_problems == {str(f): [] for f in report.figures}
    rows = {row[0]: row for row in report.rows}
    # the diagnostics must rank the biased sampler below the accurate one
    assert rows["ULA h=0.3"][1] > rows["ULA h=0.05"][1]
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("## run + diagnostics: Langevin on a 2-D Gaussian")
    progress = [i for i, line in enumerate(lines) if re.match(r"ULA h=\S+, .*: step \d+/", line)]
    table = next(i for i, line in enumerate(lines) if "energy dist." in line)
    # the progress lines name their run, and sit between the section's header and its table
    assert len(progress) == 8 and header < progress[0] and progress[-1] < table
    assert {lines[i].split(",")[0] for i in progress} == {"ULA h=0.05", "ULA h=0.3"}
    assert re.fullmatch(r"\(basics: \d+\.\d s, compilation included\)",
                        next(line for line in lines[table:] if line.startswith("(basics")))
    assert re.fullmatch(r"jaxsample demo: 1 section\(s\) in \d+\.\d s \(\d+\.\d min\), "
                        r"compilation included", lines[-1])


def test_unknown_section_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown demo section"):
        run_demo(tmp_path, only=["nope"])
    assert main(["demo", "--out", str(tmp_path), "--only", "nope"]) == 2
