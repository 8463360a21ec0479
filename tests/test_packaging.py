"""Packaging: the package list is complete, dependencies are exactly what the code imports, the
version is written once, and the wheel and sdist ship the licence, citation, changelog and the
typed marker."""

import ast
import os
import pathlib
import re
import stat
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest
import setuptools

import jaxsample

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# distribution name -> import name where they differ
IMPORT_NAME = {"ott-jax": "ott", "vendi-score": "vendi_score", "scikit-learn": "sklearn"}


def _name(requirement):
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip()


def _imports(paths, *, top_level_only):
    """Third-party modules imported by ``paths``: at module level, or anywhere (lazily) too."""
    found = set()
    for path in paths:
        tree = ast.parse(path.read_text())
        nodes = tree.body if top_level_only else ast.walk(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"jaxsample", "__future__"}


SOURCES = [*ROOT.joinpath("jaxsample").rglob("*.py"), *ROOT.joinpath("kernels").rglob("*.py")]
RUNTIME = {IMPORT_NAME.get(_name(dep), _name(dep)) for dep in PROJECT["dependencies"]}
EXTRAS = PROJECT["optional-dependencies"]


def test_package_list_matches_discovery():
    found = set(setuptools.find_packages(str(ROOT), include=["jaxsample", "jaxsample.*"]))
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == found | {"jaxsample.kernels"}


def test_the_source_folder_is_a_complete_package():
    # jaxsample/kernels links to the top-level kernels/, so from the repo root (where the source
    # folder shadows an installed jaxsample) jaxsample.kernels resolves in the checkout too
    link = ROOT / "jaxsample" / "kernels"
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "kernels")
    assert link.resolve() == (ROOT / "kernels").resolve()
    # the build maps kernels/ itself, so the wheel never depends on the link
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"jaxsample.kernels": "kernels"}


def test_the_checkout_imports_on_its_own_from_the_root():
    # as after a non-editable install: the checkout's own folder is what `import jaxsample`
    # finds from the root, so drop an editable install's finder before importing
    source = ("import sys\n"
              "sys.meta_path[:] = [f for f in sys.meta_path if not\n"
              "                    getattr(f, '__module__', '').startswith('__editable__')]\n"
              "import jaxsample, jaxsample.kernels.chunking, jaxsample.demo\n"
              "print(jaxsample.__file__, jaxsample.kernels.__file__)\n")
    done = subprocess.run([sys.executable, "-c", source], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    package, kernels = map(pathlib.Path, done.stdout.split())
    assert package == ROOT / "jaxsample" / "__init__.py"
    assert kernels == ROOT / "jaxsample" / "kernels" / "__init__.py"


def test_runtime_dependencies_are_exactly_the_module_level_imports():
    # jaxlib comes with jax, which pins the matching jaxlib itself
    assert "jaxlib" not in RUNTIME
    used = _imports(SOURCES, top_level_only=True)
    assert used <= RUNTIME, f"imported at import time but not declared: {sorted(used - RUNTIME)}"
    assert RUNTIME <= used, f"declared but never imported at import time: {sorted(RUNTIME - used)}"


def test_lazy_imports_are_in_an_optional_extra_and_in_test():
    lazy = _imports(SOURCES, top_level_only=False) - RUNTIME
    user_extras = {IMPORT_NAME.get(_name(dep), _name(dep))
                   for extra, deps in EXTRAS.items() if extra not in {"test", "bench", "docs"}
                   for dep in deps}
    assert lazy <= user_extras, f"imported lazily but in no extra: {sorted(lazy - user_extras)}"
    # `pip install -e ".[test]"` installs every extra a public function can need
    (self_ref,) = [dep for dep in EXTRAS["test"] if _name(dep) == "jaxsample"]
    included = set(self_ref[self_ref.index("[") + 1:self_ref.index("]")].split(","))
    assert included == set(EXTRAS) - {"test", "bench", "cuda12", "tpu"}


def test_version_is_written_once():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    version = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert version == {"attr": "jaxsample.__version__"}
    cited = re.search(r'^version: "([^"]+)"$', (ROOT / "CITATION.cff").read_text(), re.M)[1]
    assert jaxsample.__version__.split(".dev")[0] == cited
    assert f"## [{cited}]" in (ROOT / "CHANGELOG.md").read_text()


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # the wheel is built from the sdist, so the sdist is checked complete too
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def test_wheel_and_sdist_ship_licence_citation_changelog_and_typed_marker(dists):
    wheel, sdist = dists
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "jaxsample/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert any(n.endswith(".dist-info/licenses/CITATION.cff") for n in names)
    assert "jaxsample/kernels/chunking.py" in names
    assert f"Version: {jaxsample.__version__}" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    assert "Requires-Dist: jaxlib" not in metadata
    with tarfile.open(sdist) as tf:
        members = {name.split("/", 1)[1] for name in tf.getnames() if "/" in name}
    assert {"LICENSE", "CITATION.cff", "CHANGELOG.md", "README.md", "jaxsample/py.typed"} <= members
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence


def test_wheel_and_sdist_hold_real_kernel_files_not_links(dists):
    wheel, sdist = dists
    kernels = sorted(p.name for p in (ROOT / "kernels").glob("*.py"))
    with zipfile.ZipFile(wheel) as zf:
        entries = {info.filename: info for info in zf.infolist()}
        for name in kernels:
            info = entries[f"jaxsample/kernels/{name}"]
            mode = info.external_attr >> 16
            assert not mode or stat.S_ISREG(mode), f"{info.filename} is not a regular file"
            assert zf.read(info) == (ROOT / "kernels" / name).read_bytes()
    with tarfile.open(sdist) as tf:
        links = [m.name for m in tf.getmembers() if m.issym() or m.islnk()]
        members = {m.name.split("/", 1)[1]: m for m in tf.getmembers() if "/" in m.name}
    assert not links, f"the sdist holds links: {links}"
    assert all(members[f"kernels/{name}"].isfile() for name in kernels)
