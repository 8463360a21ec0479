"""The package list in pyproject.toml is complete and every runtime import is declared."""

import ast
import pathlib
import sys
import tomllib

import setuptools

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_package_list_matches_discovery():
    found = set(setuptools.find_packages(str(ROOT), include=["jaxsample", "jaxsample.*"]))
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == found | {"jaxsample.kernels"}


def test_runtime_imports_are_declared_dependencies():
    import_names = {"jax": "jax", "jaxlib": "jaxlib", "optax": "optax", "equinox": "equinox",
                    "ott": "ott-jax", "lineax": "lineax", "optimistix": "optimistix",
                    "numpy": "numpy", "scipy": "scipy", "matplotlib": "matplotlib"}
    declared = {dep.split(">")[0].split("=")[0].split("[")[0].strip()
                for dep in PYPROJECT["project"]["dependencies"]}
    used = set()
    sources = [*ROOT.joinpath("jaxsample").rglob("*.py"), *ROOT.joinpath("kernels").rglob("*.py")]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                used |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                used.add(node.module.split(".")[0])
    third_party = used - set(sys.stdlib_module_names) - {"jaxsample", "__future__"}
    # optional imports guarded at run time (progress bars, a demo peer) are listed explicitly
    optional = {"tqdm", "blackjax"}
    undeclared = {name for name in third_party - optional
                  if import_names.get(name, name) not in declared}
    assert not undeclared, f"imported at run time but not declared: {sorted(undeclared)}"
