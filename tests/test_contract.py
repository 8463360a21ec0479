"""The one contract test: every method in the registry, the same checks (see tests/contract/).

Every entry also runs with a legacy ``jax.random.PRNGKey`` (the eager calls): it must give what
the new-style key with the same bits gives.

Adding a method: write ``tests/contract/<family>_<module>.py`` with ``ENTRIES`` (the files are
discovered), each entry naming in ``covers`` the public functions its ``build``/``hyper`` call.
``test_registry_covers_every_public_function`` walks every family's ``__all__`` and fails until
every public function that samples, fits or estimates is covered by an entry (and every method
module has one).
"""

import dataclasses
import functools
import importlib
import inspect
import pathlib
import pkgutil
import types

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from contract import KEY

import jaxsample.core

# every registry file tests/contract/<family>_<module>.py, discovered (no hand list)
_MODULES = [importlib.import_module(f"contract.{info.name}") for info in
            pkgutil.iter_modules([str(pathlib.Path(__file__).parent / "contract")])]

REGISTRY = [entry for module in _MODULES for entry in module.ENTRIES]
_FAMILIES = ("particles", "diffusion", "gaussian", "softmax", "subset", "risk", "decision",
             "mcmc", "choice")
_ROOT = pathlib.Path(importlib.import_module("jaxsample").__file__).parent


def _ids(entries):
    return [e.name for e in entries]


def _dtype_cases():
    return [pytest.param(e, d, id=f"{e.name}-{d}") for e in REGISTRY for d in e.dtypes]


def _with_dtype(name):
    return jax.enable_x64(name == "float64")


def _assert_close(a, b, rtol, exact_ints, what):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, what
        if np.issubdtype(x.dtype, np.inexact):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol, err_msg=what)
        elif exact_ints or x.dtype == bool:
            np.testing.assert_array_equal(x, y, err_msg=what)


def _tolerance(entry, dtype):
    return entry.rtol if dtype == "float32" else entry.rtol**2


_PUBLIC_ROOTS = (*_FAMILIES, "diagnostics")

# Public functions that neither sample, fit nor estimate on device, each with why. Every other
# public function returns ``(value, Info)`` or a ``SamplingAlgorithm`` (tests/test_signatures.py
# holds them to that) and has an entry.
_NOT_ESTIMATORS: dict[str, str] = {
    "diagnostics.diagnose": "a host-side report over a finished run's trace: it returns text "
                            "and NumPy statistics (DiagnosisInfo), documented not jittable; the "
                            "estimators it reads, rhat and ess, have entries; "
                            "tests/particles/test_etd_verdict.py holds its verdicts",
}


def _public_functions():
    """``{name: function}`` for every function in the ``__all__`` of a family (and of
    ``diagnostics``), recursing into the library submodules listed there; each function once,
    under the first public name met (``"risk.budget_at"``, ``"diagnostics.mixing.mfpt"``).
    Classes (values, Infos, ask/tell models) and constants are not functions; their methods are
    out of scope."""
    found, seen = {}, set()

    def walk(module, prefix):
        names = list(getattr(module, "__all__", ()))
        # names before submodules: a function re-exported by the family keeps its short name
        for name in sorted(names, key=lambda n: isinstance(getattr(module, n), types.ModuleType)):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                if obj.__name__.startswith("jaxsample.") and obj.__name__ not in seen:
                    seen.add(obj.__name__)
                    walk(obj, f"{prefix}.{name}")
            elif inspect.isfunction(obj) and id(obj) not in seen:
                seen.add(id(obj))
                found[f"{prefix}.{name}"] = obj

    for family in _PUBLIC_ROOTS:
        module = importlib.import_module(f"jaxsample.{family}")
        seen.add(module.__name__)
        walk(module, family)
    return found


def _resolve(name):
    """The object a family-qualified name (``"risk.budget_at"``) designates."""
    return functools.reduce(getattr, name.split("."), importlib.import_module("jaxsample"))


def _called_names(*fns):
    """Names the functions mention (globals, attributes, the names of functions in their
    closures), following the registry file's own helpers: what ``build``/``hyper`` can call.
    Library functions are not entered (a function that calls another does not cover it)."""
    names, todo, seen = set(), [f for f in fns if f is not None], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            todo += [obj.func, *obj.args, *obj.keywords.values()]
            continue
        if not inspect.isfunction(obj):
            continue
        names.add(obj.__name__)
        if not obj.__module__.startswith("contract"):
            continue
        codes, mentioned = [obj.__code__], set()
        while codes:
            code = codes.pop()
            mentioned.update(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        names |= mentioned
        todo += [obj.__globals__[n] for n in mentioned if n in obj.__globals__]
        for cell in obj.__closure__ or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
    return names


def _coverage_problems(registry, public):
    """``(uncovered public names, problems with the entries' covers)``. An entry may also name
    a public class it drives (an ask/tell model); only functions are required to be covered."""
    covered, problems = set(), []
    for entry in registry:
        if not entry.covers:
            problems.append(f"{entry.name}: covers is empty")
        called = _called_names(entry.build, entry.hyper)
        for name in entry.covers:
            try:
                fn = _resolve(name)
            except AttributeError:
                problems.append(f"{entry.name}: {name} is not a name of jaxsample")
                continue
            parent, _, last = name.rpartition(".")
            if last not in getattr(_resolve(parent), "__all__", ()):
                problems.append(f"{entry.name}: {name} is not public (not in {parent}.__all__)")
            elif fn.__name__ not in called:
                problems.append(f"{entry.name}: covers {name}, which its build/hyper never call")
            covered.add(id(fn))
    uncovered = [name for name, fn in public.items()
                 if id(fn) not in covered and name not in _NOT_ESTIMATORS]
    problems += [f"{name} is excluded as a non-estimator but is not a public function"
                 for name in _NOT_ESTIMATORS if name not in public]
    return uncovered, problems


def _uncovered_modules(registry):
    covered = {e.module for e in registry}
    missing = []
    for family in _FAMILIES:
        for path in sorted((_ROOT / family).glob("*.py")):
            if path.stem.startswith("_") or path.stem == "baselines":
                continue
            module = f"jaxsample.{family}.{path.stem}"
            if module not in covered:
                missing.append(module)
    return missing


def test_registry_covers_every_public_function():
    """Every public function that samples, fits or estimates (every family's ``__all__`` and
    diagnostics') is in some entry's ``covers``, each covered name is public and called by that
    entry's build/hyper, and every method module has an entry."""
    uncovered, problems = _coverage_problems(REGISTRY, _public_functions())
    assert not problems, problems
    assert not uncovered, f"public functions without a contract entry: {uncovered}"
    missing = _uncovered_modules(REGISTRY)
    assert not missing, f"method modules without a contract entry: {missing}"


def test_coverage_check_fails_on_a_gap():
    """The check above can fail: dropping an entry, or a covered name its build never calls,
    is reported."""
    public = _public_functions()
    entry = next(e for e in REGISTRY if e.name == "risk.saber")
    uncovered, _ = _coverage_problems([e for e in REGISTRY if e is not entry], public)
    assert "risk.fit_beta_binomial" in uncovered
    lying = dataclasses.replace(entry, covers=(*entry.covers, "risk.tail_regime"))
    _, problems = _coverage_problems([lying], public)
    assert any("risk.tail_regime" in p and "never call" in p for p in problems), problems
    _, problems = _coverage_problems([dataclasses.replace(entry, covers=("risk.nope",))], public)
    assert any("risk.nope" in p for p in problems), problems


def _skip_without_requirements(entry):
    for module in entry.requires:
        pytest.importorskip(module)


def _legacy(key):
    """The legacy ``uint32[2]`` form of a new-style key (the same bits: the same stream)."""
    return jax.random.key_data(key)


def _infos(info):
    """The Info objects of an entry's output: one, or a tuple/list of them (an entry that runs
    several closed forms returns each one's Info)."""
    return tuple(info) if type(info) in (tuple, list) else (info,)


@pytest.mark.parametrize(("entry", "dtype"), _dtype_cases())
def test_dtype_preserved_and_info_flags(entry, dtype):
    with _with_dtype(dtype):
        # the first dtype runs with a legacy PRNGKey: the eager compilation the jit/vmap test
        # below reuses, so the legacy case costs no extra compilation
        key = _legacy(KEY) if dtype == entry.dtypes[0] else KEY
        _skip_without_requirements(entry)
        out = entry.build(jnp.dtype(dtype))(key)
        # (a str leaf is a host-side verdict of an untraceable entry, e.g. tail_regime's)
        floats = [leaf for leaf in jax.tree.leaves(out) if not isinstance(leaf, str)
                  and jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)]
        assert floats, "the output holds no floating array"
        assert all(leaf.dtype == jnp.dtype(dtype) for leaf in floats), {
            str(leaf.dtype) for leaf in floats}
        for info in _infos(entry.info(out)):
            name = type(info).__name__
            assert hasattr(info, "nonfinite"), f"{name} has no nonfinite flag"
            assert not bool(jnp.any(info.nonfinite)), f"{name}.nonfinite set on a well-posed case"
            for leaf in jax.tree.leaves(info):
                assert isinstance(leaf, jax.Array), f"{name} leaf {leaf!r} is not an array"


_TRACEABLE = [e for e in REGISTRY if e.traceable]


@pytest.mark.parametrize("entry", _TRACEABLE, ids=_ids(_TRACEABLE))
def test_jit_vmap_equals_eager_traces_the_hyperparameter_and_compiles_once(entry):
    """``jit(vmap(fn))`` over new-style keys (and, where the entry has ``hyper``, over two values
    of the hyper-parameter) equals eager calls with the legacy PRNGKeys of the same bits, and new
    keys and values do not retrace; for an iterative sampler two values of ``h`` share one
    compilation of ``jaxsample.run``.

    One compiled program checks jit == eager, vmap == loop, the traced hyper-parameter and the
    single trace together: a separate ``jit(fn)``, or a vmap over ``h`` apart from the one over
    keys, would compile the whole program once more per entry. What breaks under ``jit`` alone
    (Python control flow on traced values, a concrete-value check, a host callback) breaks under
    ``jit(vmap)`` too. ``hyper`` calls every function the entry covers
    (``test_hyper_calls_every_covered_function``), so batching it checks them all; ``build``'s
    own configuration runs eagerly in the dtype test above.
    """
    dtype = entry.dtypes[0]
    with _with_dtype(dtype):
        _skip_without_requirements(entry)
        keys = jax.random.split(KEY, 4)
        if entry.hyper is None:
            fn, values = entry.build(jnp.dtype(dtype)), ()
        else:
            fn, values = entry.hyper(jnp.dtype(dtype)), (entry.hyper_values,)
        # chex keys its counter by the call stack and the lambda's source line, which entries
        # share (`lambda key: _run(key, dtype)`): start from zero for this entry
        chex.clear_trace_counter()
        batched = jax.jit(jax.vmap(chex.assert_max_traces(fn, n=1)))
        out = batched(keys[:2], *(jnp.asarray(h, dtype) for h in values))
        for i in range(2):
            # Python floats, as the entries' builds pass them: the eager compilation the dtype
            # test made (legacy key, same structure) serves these calls where they share it
            eager = fn(_legacy(keys[i]), *(h[i] for h in values))
            if i == 0:
                size = jaxsample.core._run._cache_size()
            elif entry.iterative:
                assert jaxsample.core._run._cache_size() == size, "a new value recompiled run"
            _assert_close(jax.tree.map(lambda leaf, i=i: leaf[i], out), eager,
                          _tolerance(entry, dtype), entry.exact_ints,
                          f"jit(vmap)[{i}] (new-style keys) != eager call (legacy PRNGKey)")
        # new keys and new values must not retrace
        batched(keys[2:], *(jnp.asarray(h[::-1], dtype) for h in values))


def _hyper_gaps(entry):
    """The names an entry covers that its ``hyper`` never calls (none without a ``hyper``)."""
    if entry.hyper is None:
        return []
    called = _called_names(entry.hyper)
    return [name for name in entry.covers if _resolve(name).__name__ not in called]


def test_hyper_calls_every_covered_function():
    """The jit/vmap test batches ``hyper`` in place of ``build`` where an entry has one: it must
    reach every public function the entry covers. A hyper that skips one is reported."""
    gaps = {entry.name: _hyper_gaps(entry) for entry in REGISTRY}
    assert not any(gaps.values()), gaps
    entry = next(e for e in REGISTRY if e.name == "diffusion.guidance/time_predictor")
    lying = dataclasses.replace(entry, hyper=lambda dtype: lambda key, h: None)
    assert _hyper_gaps(lying) == list(entry.covers)


def test_untraceable_entries_say_why():
    """An entry that skips the jit/vmap checks documents a host-side result and has no hyper."""
    for entry in REGISTRY:
        if not entry.traceable:
            assert entry.hyper is None and "not jittable" in entry.note, entry.name


_RESUMABLE = [e for e in REGISTRY if e.start is not None]


@pytest.mark.parametrize("entry", _RESUMABLE, ids=_ids(_RESUMABLE))
def test_a_run_continued_from_its_state_equals_one_long_run(entry):
    """``run(k, alg, s, 2)`` then ``run(k, alg, s2, 2)``, the natural call (the state's ``step``
    counter numbers the step keys), equals ``run(k, alg, s, 4)``: final states and traces, bit
    for bit. The two programs differ only in the scan's trip count: both run the one step
    body XLA compiled for it on the same inputs and keys, so nothing may differ, not even
    round-off."""
    dtype = entry.dtypes[0]
    with _with_dtype(dtype):
        _skip_without_requirements(entry)
        alg, state = entry.start(jnp.dtype(dtype))
        half, first = jaxsample.run(KEY, alg, state, 2)
        resumed, second = jaxsample.run(KEY, alg, half, 2)
        whole, trace = jaxsample.run(KEY, alg, state, 4)
    assert int(half.step) == int(state.step) + 2 and int(resumed.step) == int(state.step) + 4
    for x, y in zip(jax.tree.leaves(resumed), jax.tree.leaves(whole), strict=True):
        np.testing.assert_array_equal(x, y, err_msg="2 + 2 steps != 4 steps (final state)")
    joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), first, second)
    for x, y in zip(jax.tree.leaves(joined), jax.tree.leaves(trace), strict=True):
        np.testing.assert_array_equal(x, y, err_msg="2 + 2 steps != 4 steps (trace)")


def _unresumable(registry, public):
    """The public iterative constructors (``-> SamplingAlgorithm``) that no entry's ``start``
    calls."""
    starts = [_called_names(e.start) for e in registry if e.start is not None]
    return [name for name, fn in public.items()
            if "SamplingAlgorithm" in str(inspect.signature(fn).return_annotation)
            and not any(fn.__name__ in called for called in starts)]


def test_every_iterative_constructor_is_resumed():
    """Every public function returning a ``SamplingAlgorithm`` is run in two segments by some
    entry's ``start``; dropping one is reported."""
    public = _public_functions()
    assert not _unresumable(REGISTRY, public)
    entry = next(e for e in REGISTRY if e.name == "mcmc.tempering")
    assert _unresumable([e for e in REGISTRY if e is not entry], public) == [
        "mcmc.parallel_tempering"]


_BAD = [pytest.param(bad, id=f"{e.name}-{i}") for e in REGISTRY
        for i, bad in enumerate(e.bad_inputs)]


@pytest.mark.parametrize("bad", _BAD)
def test_bad_input_raises_clear_error(bad):
    with pytest.raises(bad.error, match=bad.match):
        bad.call()


def test_every_entry_declares_bad_inputs():
    assert all(entry.bad_inputs for entry in REGISTRY), [
        e.name for e in REGISTRY if not e.bad_inputs]
