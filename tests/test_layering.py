"""The layers hold (read from the import statements, no module is imported here):

* kernels import nothing of jaxsample outside ``jaxsample.kernels``;
* ``diagnostics`` imports no family (nor ``demo``): it sits below every family;
* no family imports another family, nor the ``jaxsample`` package itself, whose lazy names hand
  out the families (``from jaxsample import etd`` is ``particles``); two families share code
  through a kernel or a top-level private module, never through each other;
* no module imports another module's private name (``from m import _name``, ``_name`` not a
  submodule), and a private module (``pkg._m``) is imported only from inside ``pkg``;
* bench/ and examples/ never import ``jaxsample.demo``: they take datasets and baselines from the
  library (``jaxsample.datasets``, a family's ``baselines``, ``jaxsample.diagnostics``).

Each rule is also run on a planted violation, so none of them passes vacuously.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAMILIES = ("particles", "diffusion", "gaussian", "softmax", "subset", "risk", "decision", "mcmc",
            "choice")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "kernels":           # shipped as jaxsample.kernels
        parts = ["jaxsample", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[:2] == ["jaxsample", "kernels"]:
        base = ROOT.joinpath("kernels", *parts[2:])
    else:
        base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _family(module: str) -> str | None:
    """The family a module belongs to (``jaxsample.particles.etd``: ``particles``), else None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "jaxsample" and len(parts) > 1 and parts[1] in FAMILIES else None


def _imports(source: str):
    """``(module, name)`` for every absolute import of jaxsample (``name`` None for ``import``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "jaxsample":
                for alias in node.names:
                    yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "jaxsample":
                    yield alias.name, None


def _targets(module: str, name: str | None) -> list[str]:
    """The modules an import statement loads (``from a import b``: ``a.b`` when it is one)."""
    if name is not None and _is_module(f"{module}.{name}"):
        return [f"{module}.{name}"]
    return [module]


def violations(importer: str, source: str, *, script: bool = False) -> list[str]:
    """Every broken rule in ``source``, the code of module ``importer`` (or a bench/example
    script when ``script``)."""
    found = []
    for module, name in _imports(source):
        statement = f"import {module}" if name is None else f"from {module} import {name}"
        shown = f"{importer}: {statement}"
        for target in _targets(module, name):
            if script:
                if target == "jaxsample.demo" or target.startswith("jaxsample.demo."):
                    found.append(f"{shown} (bench/examples never import jaxsample.demo)")
                continue
            if importer.startswith("jaxsample.kernels") and not target.startswith(
                    "jaxsample.kernels"):
                found.append(f"{shown} (a kernel imports only kernels)")
            if importer.startswith("jaxsample.diagnostics") and target.split(".")[1] in (
                    *FAMILIES, "demo"):
                found.append(f"{shown} (diagnostics import no family)")
            family = _family(importer)
            if family and (target == "jaxsample" or _family(target) not in (None, family)):
                found.append(f"{shown} (a family imports no other family)")
            parts = target.split(".")
            for i, part in enumerate(parts):
                package = ".".join(parts[:i])
                if part.startswith("_") and not (importer == package
                                                 or importer.startswith(package + ".")):
                    found.append(f"{shown} (private module of {package})")
                    break
        if (name is not None and name.startswith("_") and not name.startswith("__")
                and not _is_module(f"{module}.{name}")):
            found.append(f"{shown} (another module's private name)")
    return found


def _library_files():
    return sorted([*(ROOT / "jaxsample").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")])


def _script_files():
    return sorted([*(ROOT / "bench").rglob("*.py"), *(ROOT / "examples").rglob("*.py")])


def test_the_library_holds_its_layers():
    found = [v for path in _library_files()
             for v in violations(_module_name(path), path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_bench_and_examples_do_not_import_the_demo():
    found = [v for path in _script_files()
             for v in violations(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"),
                                 script=True)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("importer", "source", "script", "reason"), [
    ("jaxsample.kernels.pairwise", "from jaxsample._checks import check_array", False,
     "a kernel imports only kernels"),
    ("jaxsample.diagnostics.mixing", "from jaxsample.mcmc import stopping", False,
     "diagnostics import no family"),
    ("jaxsample.diagnostics.mixing", "import jaxsample.mcmc.stopping", False,
     "diagnostics import no family"),
    ("jaxsample.mcmc.stopping", "from jaxsample.particles.etd import etd", False,
     "a family imports no other family"),
    ("jaxsample.mcmc.stopping", "import jaxsample.particles", False,
     "a family imports no other family"),
    ("jaxsample.risk", "from jaxsample import decision", False,
     "a family imports no other family"),
    ("jaxsample.mcmc.stopping", "from jaxsample import etd", False,
     "a family imports no other family"),
    ("jaxsample.particles.baselines", "from jaxsample.particles.mmsold import _algorithm", False,
     "another module's private name"),
    ("jaxsample.demo.guidance", "from jaxsample.diffusion._priors import ring_of_gaussians",
     False, "private module of jaxsample.diffusion"),
    ("jaxsample.demo.guidance", "from jaxsample.diffusion import _priors", False,
     "private module of jaxsample.diffusion"),
    ("bench/bench_x.py", "from jaxsample.demo.softmax import clustered_embeddings", True,
     "never import jaxsample.demo"),
    ("examples/x.py", "from jaxsample import demo", True, "never import jaxsample.demo"),
])
def test_each_rule_catches_a_planted_violation(importer, source, script, reason):
    found = violations(importer, source, script=script)
    assert len(found) == 1 and reason in found[0], found


def test_allowed_imports_pass():
    """Private modules from inside their package, public names, the top-level private layer."""
    assert not violations("jaxsample.decision.baselines",
                          "from jaxsample.decision.psrl import PSRLInfo")
    assert not violations("jaxsample.subset.coverage", "from jaxsample._checks import check_int")
    assert not violations("jaxsample.particles.mmsold", "from jaxsample import _pytree")
    assert not violations("jaxsample.particles.mmsold",
                          "from jaxsample.particles._validation import check_data")
    assert not violations("jaxsample.diagnostics.mixing", "from jaxsample.core import run_until")
    # a family imports its own modules, diagnostics and the kernels below it; demo/ and the CLI
    # above the families import any of them
    assert not violations("jaxsample.particles.etd",
                          "from jaxsample.particles.options import Mutation")
    assert not violations("jaxsample.particles.etd",
                          "from jaxsample.diagnostics.criteria import collapse")
    assert not violations("jaxsample.mcmc.mala", "from jaxsample.kernels import langevin")
    assert not violations("jaxsample.demo.stopping", "from jaxsample.mcmc import mala")
    assert not violations("jaxsample.cli", "import jaxsample")
    assert not violations("bench/bench_x.py", "from jaxsample.subset.baselines import GreedyInfo",
                          script=True)
