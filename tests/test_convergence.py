"""The convergence registry (tests/convergence/): every method's defaults reach the Monte Carlo
floor as its budget grows, or state and flag their limit.

Adding a method: write ``tests/convergence/<family>_<module>.py`` with ``ENTRIES`` (the files are
discovered). ``test_registry_covers_every_budgeted_method`` walks every family's public surface
and fails until every public callable with a budget knob (an iterative constructor, an ask/tell
class, or a function taking one of ``BUDGET_KNOBS``) is covered by an entry or listed in a
registry file's ``NO_BUDGET`` with the reason it has no error that a budget can drive to a floor.
"""

import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import types

import pytest
from convergence import Z, keys, measure
from test_contract import _PUBLIC_ROOTS, _public_functions

_MODULES = [importlib.import_module(f"convergence.{info.name}") for info in
            pkgutil.iter_modules([str(pathlib.Path(__file__).parent / "convergence")])]
REGISTRY = [entry for module in _MODULES for entry in module.ENTRIES]

# argument names that set how much work a method does (and so how close it gets)
BUDGET_KNOBS = ("num_steps", "num_samples", "num_particles", "max_iterations", "num_proposals",
                "num_episodes", "budget", "num_trials", "num_resamples", "max_steps",
                "num_projections", "num_quadrature", "num_smoothing_samples", "bits")

# Public callables with a budget-like argument that is not a convergence budget, each with why:
# each registry file may define ``NO_BUDGET = {name: reason}`` beside its ``ENTRIES``.
NO_BUDGET: dict[str, str] = {name: why for module in _MODULES
                             for name, why in getattr(module, "NO_BUDGET", {}).items()}


def _public_classes():
    """``{name: class}`` for the ask/tell classes reachable from the families' ``__all__``."""
    found = {}

    def walk(module, prefix, seen):
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                if obj.__name__.startswith("jaxsample.") and obj.__name__ not in seen:
                    seen.add(obj.__name__)
                    walk(obj, f"{prefix}.{name}", seen)
            elif inspect.isclass(obj) and callable(getattr(obj, "ask", None)) \
                    and callable(getattr(obj, "tell", None)):
                found.setdefault(f"{prefix}.{name}", obj)

    for family in _PUBLIC_ROOTS:
        module = importlib.import_module(f"jaxsample.{family}")
        walk(module, family, {module.__name__})
    return found


def _budgeted():
    out = {}
    for name, fn in _public_functions().items():
        sig = inspect.signature(fn)
        iterative = "SamplingAlgorithm" in str(sig.return_annotation)
        knobs = [p for p in sig.parameters if p in BUDGET_KNOBS]
        if iterative or knobs:
            out[name] = "iterative (jaxsample.run's num_steps)" if iterative else ", ".join(knobs)
    for name in _public_classes():
        out[name] = "ask/tell (number of rounds)"
    return out


def test_registry_covers_every_budgeted_method():
    covered = {name for entry in REGISTRY for name in entry.covers}
    budgeted = _budgeted()
    missing = {n: why for n, why in budgeted.items() if n not in covered and n not in NO_BUDGET}
    assert not missing, (
        "public callables with a budget knob but no convergence entry (add one in "
        f"tests/convergence/, or a reason in NO_BUDGET): {missing}")
    stale = sorted((covered | set(NO_BUDGET)) - set(budgeted))
    assert not stale, f"entries/exemptions name callables that are not budgeted publics: {stale}"


def test_registry_entries_are_well_formed():
    names = [e.name for e in REGISTRY]
    assert len(names) == len(set(names)), "duplicate entry names"
    for e in REGISTRY:
        assert len(e.budgets) >= 3 and list(e.budgets) == sorted(set(e.budgets)), e.name
        assert e.seeds >= 5, f"{e.name}: at least 5 seeds"
        assert e.floor_formula and e.problem, e.name


@pytest.mark.parametrize("entry", REGISTRY, ids=[e.name for e in REGISTRY])
def test_defaults_reach_the_floor(entry):
    for package in entry.requires:
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"needs {package}")
    if entry.limit is not None:
        # a documented limit: the text and the flag are asserted; its errors by budget are the
        # bench's defaults table (bench/bench_defaults.py), not re-run here
        page = pathlib.Path(__file__).parents[1] / "docs" / entry.limit.page
        assert entry.limit.phrase in page.read_text(), (
            f"{entry.name}: the documented limit must be stated in docs/{entry.limit.page}")
        assert entry.limit.reported(keys(entry)), f"{entry.name}: the Info must flag its limit"
        return
    m = measure(entry)
    table = ", ".join(f"{b}: {m.mean(b):.4g}" for b in entry.budgets)
    report = f"{entry.name} errors by {entry.knob} {{{table}}}, floor {m.floor_mean:.4g}"
    d, allowed = m.excess()
    assert d <= allowed, (f"{report}: excess over the floor {d:.4g} > allowed {allowed:.4g} "
                          f"(slack {entry.slack} x floor + atol {entry.atol} + {Z} se)")
    t, t_allowed = m.trend()
    assert t <= t_allowed, f"{report}: more budget made it worse by {t:.4g} > {t_allowed:.4g}"
