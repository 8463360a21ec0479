"""The README is a front page whose every snippet runs as printed, and whose set-up commands are
the ones CI runs."""

import pathlib
import re

import pytest
from test_docs import FENCE, run_python

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = FENCE.findall(README)


def test_readme_has_python_snippets():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs_on_its_own(index, tmp_path):
    # each block on its own, in a fresh interpreter: no block may lean on another's names
    run_python(BLOCKS[index], cwd=tmp_path)


def test_setup_commands_are_the_ones_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]" && pytest -n 2 --dist loadfile' in README
    assert 'pip install -e ".[test]"' in ci and "pytest -n 2 --dist loadfile" in ci
    assert 'pip install ".[demo]" && jaxsample demo' in README and "jaxsample demo" in ci


def test_links_resolve_and_the_page_stays_a_front_page():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to a missing file: {target}"
    assert len(README.splitlines()) <= 200
    for internal in ("the issue", "issue ", "goal", "this project's"):
        assert internal not in README.lower(), f"README speaks of {internal!r}"
