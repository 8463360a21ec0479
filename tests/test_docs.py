"""The documentation site: every page's Python blocks run (in order, in a fresh interpreter, as a
reader would paste them), and the API reference covers every public name of every family."""

import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest
from _xla import flags_without

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = sorted(p for p in DOCS.rglob("*.md") if FENCE.search(p.read_text()))


def python_blocks(path: pathlib.Path) -> list[str]:
    return FENCE.findall(path.read_text())


def run_python(source: str, *, cwd: pathlib.Path, timeout: float = 600) -> None:
    """Run ``source`` in a fresh interpreter (no test-suite jax config), failing with its stderr."""
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    # the suite's fake devices are not what a reader has; its backend optimisation level 0 is
    # dropped too: the pages run real workloads (hundreds of ETD steps), which run ~1.4x slower
    # at level 0 than their compilation saves (getting-started.md: 37.6 s against 26.8 s); the
    # legacy fusion emitter, which only speeds compilation, is kept
    env["XLA_FLAGS"] = " ".join(flags_without("device_count", "optimization_level"))
    done = subprocess.run([sys.executable, "-c", source], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{done.stderr[-4000:]}"


def test_every_page_with_code_is_found():
    assert PAGES, "no docs page has a python block"
    assert DOCS / "getting-started.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_code_runs(page, tmp_path):
    # blocks of one page build on each other, like a tutorial: run them in order in one process
    run_python("\n".join(python_blocks(page)), cwd=tmp_path)


def test_method_pages_state_paper_fidelity_benchmark_and_limits():
    for page in sorted((DOCS / "methods").glob("*.md")):
        text = page.read_text()
        for needed in ("**Fidelity.**", "## Example", "## Benchmarks", "## Known limits", "2-core"):
            assert needed in text, f"{page.name} lacks {needed!r}"
        assert re.search(r"\*\*Papers?\.\*\*", text), f"{page.name} cites no paper"
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{page.name} does not date its bench"


def test_every_method_page_is_in_the_nav_and_the_choosing_table():
    nav = (ROOT / "mkdocs.yml").read_text()
    choosing = (DOCS / "choosing.md").read_text()
    for page in (DOCS / "methods").glob("*.md"):
        assert f"methods/{page.name}" in nav
        assert f"methods/{page.name}" in choosing


FAMILIES = ["jaxsample.particles", "jaxsample.diffusion.shs", "jaxsample.diffusion.vmf",
            "jaxsample.diffusion.guidance", "jaxsample.gaussian", "jaxsample.softmax",
            "jaxsample.subset", "jaxsample.risk", "jaxsample.mcmc", "jaxsample.decision",
            "jaxsample.choice", "jaxsample.diagnostics", "jaxsample.targets",
            "jaxsample.datasets", "jaxsample.sharding", "jaxsample.interop", "jaxsample.core",
            "jaxsample.progress"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_site_builds_without_warnings_and_documents_every_public_name(site):
    anchors = set()
    for html in (site / "api").rglob("index.html"):
        anchors |= set(re.findall(r'id="((?:jaxsample|kernels)\.[\w.]+)"', html.read_text()))
    short = {anchor.rsplit(".", 1)[-1] for anchor in anchors}
    missing = []
    for family in FAMILIES:
        module = importlib.import_module(family)
        for name in module.__all__:
            if isinstance(getattr(module, name), type(module)):
                continue  # a submodule: its members are listed under their own names
            if f"{family}.{name}" not in anchors and name not in short:
                missing.append(f"{family}.{name}")
    assert not missing, f"public names without an API entry: {missing}"
    assert (site / "index.html").exists() and (site / "methods" / "etd" / "index.html").exists()
