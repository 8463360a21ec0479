"""The README is a front page whose every snippet runs as printed from the clone's root, whose
set-up commands are the ones CI runs, and whose demo time is the one `jaxsample demo --help`
states."""

import pathlib
import re

import pytest
from test_docs import FENCE, run_python

from jaxsample.demo import DEMO_TIME

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = FENCE.findall(README)


def test_readme_has_python_snippets():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs_on_its_own(index):
    # each block on its own, in a fresh interpreter: no block may lean on another's names; from
    # the root, where a newcomer pastes it (the source folder jaxsample/ is what imports there)
    run_python(BLOCKS[index], cwd=ROOT)


def test_setup_commands_are_the_ones_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]" && pytest -n 2 --dist loadfile' in README
    assert 'pip install -e ".[test]"' in ci and "pytest -n 2 --dist loadfile" in ci
    # the newcomer's path: the demo's non-editable install in a fresh environment, then the
    # snippets, the demo and the documentation as the README builds it
    assert ('python3 -m venv .venv && . .venv/bin/activate && pip install ".[demo]" && '
            "jaxsample demo") in README
    newcomer = ci[ci.index('newcomer="$out/newcomer"'):]
    for command in ('python3 -m venv "$newcomer"', '. "$newcomer/bin/activate"',
                    'pip install --quiet ".[demo]"', "import jaxsample", "README.md",
                    "jaxsample demo --list", "jaxsample demo --strict",
                    'pip install --quiet ".[docs]"', "mkdocs build --strict"):
        assert command in newcomer, f"CI's newcomer step lacks {command!r}"
    docs = README[README.index("## Documentation"):]
    assert 'pip install ".[docs]"' in docs and "mkdocs build --strict" in docs


def test_the_demo_time_is_one_measured_number():
    # the README and `jaxsample demo --help` (tests/test_cli.py) quote jaxsample.demo.DEMO_TIME
    assert " ".join(DEMO_TIME.split()) in " ".join(README.split())
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    assert " ".join(DEMO_TIME.split()) in " ".join(guide.split())
    claims = re.findall(r"(?:about|under|within) [\w ]*(?:s|min|minutes?|seconds?) of run time",
                        README)
    assert not claims, f"a second demo time in the README: {claims}"


def test_links_resolve_and_the_page_stays_a_front_page():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to a missing file: {target}"
    assert len(README.splitlines()) <= 200
    for internal in ("the issue", "issue ", "goal", "this project's"):
        assert internal not in README.lower(), f"README speaks of {internal!r}"
