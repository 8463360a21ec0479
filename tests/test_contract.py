"""The one contract test: every method in the registry, the same checks (see tests/contract/).

Every entry also runs with a legacy ``jax.random.PRNGKey`` (the eager calls): it must give what
the new-style key with the same bits gives.

Adding a method: write ``tests/contract/<family>_<module>.py`` with ``ENTRIES`` (the files are
discovered). ``test_registry_covers_every_method_module`` fails until every method module of
every family has an entry.
"""

import importlib
import pathlib
import pkgutil

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


def test_registry_covers_every_method_module():
    """Every public method module of every family has at least one registry entry."""
    covered = {e.module for e in REGISTRY}
    missing = []
    for family in _FAMILIES:
        for path in sorted((_ROOT / family).glob("*.py")):
            if path.stem.startswith("_") or path.stem == "baselines":
                continue
            module = f"jaxsample.{family}.{path.stem}"
            if module not in covered:
                missing.append(module)
    assert not missing, f"method modules without a contract entry: {missing}"


def _legacy(key):
    """The legacy ``uint32[2]`` form of a new-style key (the same bits: the same stream)."""
    return jax.random.key_data(key)


@pytest.mark.parametrize(("entry", "dtype"), _dtype_cases())
def test_dtype_preserved_and_info_flags(entry, dtype):
    with _with_dtype(dtype):
        # the first dtype runs with a legacy PRNGKey: the eager compilation the jit and vmap
        # tests below reuse, so the legacy case costs no extra compilation
        key = _legacy(KEY) if dtype == entry.dtypes[0] else KEY
        out = entry.build(jnp.dtype(dtype))(key)
        floats = [leaf for leaf in jax.tree.leaves(out)
                  if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)]
        assert floats, "the output holds no floating array"
        assert all(leaf.dtype == jnp.dtype(dtype) for leaf in floats), {
            str(leaf.dtype) for leaf in floats}
        info = entry.info(out)
        assert hasattr(info, "nonfinite"), f"{type(info).__name__} has no nonfinite flag"
        assert not bool(jnp.any(info.nonfinite)), "nonfinite set on a well-posed configuration"
        for leaf in jax.tree.leaves(info):
            assert isinstance(leaf, jax.Array), f"Info leaf {leaf!r} is not an array"


@pytest.mark.parametrize("entry", REGISTRY, ids=_ids(REGISTRY))
def test_jit_equals_eager_and_compiles_once(entry):
    dtype = entry.dtypes[0]
    with _with_dtype(dtype):
        fn = entry.build(jnp.dtype(dtype))
        # chex keys its counter by the call stack and the lambda's source line, which entries
        # share (`lambda key: _run(key, dtype)`): start from zero for this entry
        chex.clear_trace_counter()
        jitted = jax.jit(chex.assert_max_traces(fn, n=1))
        key_a, key_b = jax.random.split(KEY)
        # a legacy PRNGKey eagerly, the new-style key under jit: one stream, one result
        _assert_close(jitted(key_a), fn(_legacy(key_a)), _tolerance(entry, dtype),
                      entry.exact_ints, "jit (new-style key) != eager (legacy PRNGKey)")
        jitted(key_b)  # a second key must not retrace


@pytest.mark.parametrize("entry", REGISTRY, ids=_ids(REGISTRY))
def test_vmap_over_keys_equals_loop(entry):
    dtype = entry.dtypes[0]
    with _with_dtype(dtype):
        fn = entry.build(jnp.dtype(dtype))
        keys = jax.random.split(KEY, 2)
        batched = jax.vmap(fn)(keys)
        for i in range(2):
            single = jax.tree.map(lambda leaf, i=i: leaf[i], batched)
            _assert_close(single, fn(_legacy(keys[i])), _tolerance(entry, dtype),
                          entry.exact_ints, f"vmap[{i}] != call (legacy PRNGKey)")


_HYPER = [e for e in REGISTRY if e.hyper is not None]


@pytest.mark.parametrize("entry", _HYPER, ids=_ids(_HYPER))
def test_hyperparameter_is_traced(entry):
    dtype = entry.dtypes[0]
    with _with_dtype(dtype):
        fn = entry.hyper(jnp.dtype(dtype))
        h0, h1 = entry.hyper_values
        first = fn(KEY, h0)
        size = jaxsample.core._run._cache_size()
        second = fn(KEY, h1)
        if entry.iterative:
            assert jaxsample.core._run._cache_size() == size, "a new value recompiled run"
        batched = jax.vmap(fn, in_axes=(None, 0))(KEY, jnp.asarray([h0, h1], dtype))
        for i, single in enumerate((first, second)):
            _assert_close(jax.tree.map(lambda leaf, i=i: leaf[i], batched), single,
                          _tolerance(entry, dtype), entry.exact_ints, f"vmap over h[{i}]")
        # (no separate jax.jit check: the vmap above already traces h, and a jitted fn called
        # with two arrays of one dtype cannot retrace; the run-cache check covers the eager path)


_BAD = [pytest.param(bad, id=f"{e.name}-{i}") for e in REGISTRY
        for i, bad in enumerate(e.bad_inputs)]


@pytest.mark.parametrize("bad", _BAD)
def test_bad_input_raises_clear_error(bad):
    with pytest.raises(bad.error, match=bad.match):
        bad.call()


def test_every_entry_declares_bad_inputs():
    assert all(entry.bad_inputs for entry in REGISTRY), [
        e.name for e in REGISTRY if not e.bad_inputs]
