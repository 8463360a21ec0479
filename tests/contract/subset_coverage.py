"""Contract entries: stable maximum coverage (``jaxsample.subset.coverage``).

One entry, ``stable_max_coverage`` (mirror ascent with the KL projection, the common-seed rounding,
the coverage of the result) with the systematic rounding: the conditional Poisson rounding adds a
weight fit and a second sampler to each of the registry's compilations, about 5 CPU-seconds in
all, so its jit == eager, vmap == loop and bitwise reproducibility are checked once in
``tests/subset/test_coverage.py`` (``test_compiled_batch_equals_eager_calls_bitwise``) and its
float32 path by the module's doctests. The bad inputs cover the other entry points of the
module (and the greedy baseline); the rounding's own are in ``subset_ksubset.py``.
"""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import subset

_RNG = np.random.default_rng(0)
_INCIDENCE = _RNG.random((24, 8)) < 0.3
_WEIGHTS = _RNG.uniform(0.5, 1.5, 24)


def _stable(dtype):
    incidence, weights = jnp.asarray(_INCIDENCE, dtype), jnp.asarray(_WEIGHTS, dtype)
    return lambda key: subset.stable_max_coverage(key, incidence, 3, reg=0.5, weights=weights,
                                                  scheme="systematic")


def _stable_hyper(dtype):
    incidence, weights = jnp.asarray(_INCIDENCE, dtype), jnp.asarray(_WEIGHTS, dtype)
    return lambda key, h: subset.stable_max_coverage(key, incidence, 3, reg=h, weights=weights,
                                                     scheme="systematic")


def _coverage(dtype):
    incidence, weights = jnp.asarray(_INCIDENCE, dtype), jnp.asarray(_WEIGHTS, dtype)
    mask = jnp.asarray(np.arange(8) % 3 == 0)
    return lambda key: subset.coverage.coverage(incidence, mask, weights)   # key unused


def _coverage_hyper(dtype):
    incidence, weights = jnp.asarray(_INCIDENCE, dtype), jnp.asarray(_WEIGHTS, dtype)
    mask = jnp.asarray(np.arange(8) % 3 == 0)
    return lambda key, scale: subset.coverage.coverage(incidence, mask, scale * weights)


def _relaxation(dtype, reg):
    incidence, weights = jnp.asarray(_INCIDENCE, dtype), jnp.asarray(_WEIGHTS, dtype)
    return (subset.max_coverage_relaxation(incidence, 3, reg=reg, weights=weights),
            subset.greedy_max_coverage(incidence, 3, weights))


def _relaxation_build(dtype):
    def fn(key):
        del key  # mirror ascent and greedy: deterministic
        return _relaxation(dtype, jnp.asarray(0.5, dtype))

    return fn


def _relaxation_hyper(dtype):
    def fn(key, reg):
        del key
        return _relaxation(dtype, reg)

    return fn


def _stable_call(**kwargs):
    args = dict(incidence=_INCIDENCE, k=3, reg=0.5)
    args.update(kwargs)
    incidence, k = args.pop("incidence"), args.pop("k")
    return lambda: subset.stable_max_coverage(KEY, incidence, k, num_steps=5, **args)


_NAN_INCIDENCE = _INCIDENCE.astype(np.float32)
_NAN_INCIDENCE[3, 2] = np.nan

ENTRIES = [
    Entry(
        name="subset.coverage/stable_systematic",
        module="jaxsample.subset.coverage",
        build=_stable,
        covers=("subset.stable_max_coverage",),
        hyper=_stable_hyper,
        hyper_values=(0.3, 1.0),
        bad_inputs=(
            BadInput(_stable_call(k=9), ValueError, "k"),
            BadInput(_stable_call(weights=-np.ones(24)), ValueError, "weights"),
            BadInput(_stable_call(weights=np.ones(23)), ValueError, "weights"),
            BadInput(_stable_call(incidence=_NAN_INCIDENCE), ValueError, "incidence"),
            BadInput(_stable_call(incidence=2.0 * _INCIDENCE), ValueError, "incidence"),
            BadInput(_stable_call(reg=0.0), ValueError, "reg"),
            BadInput(_stable_call(scheme="pipage"), ValueError, "scheme"),
            BadInput(_stable_call(gap_tolerance=-1e-3), ValueError, "gap_tolerance"),
            BadInput(lambda: subset.PaddedIncidence.from_indices(np.array([[0, 9]]), num_sets=8),
                     ValueError, "indices"),
            BadInput(lambda: subset.PaddedIncidence.from_indices(np.array([[1, 1]]), num_sets=8),
                     ValueError, "indices"),
            BadInput(lambda: subset.PaddedIncidence.from_indices(np.array([[1, 1]]), num_sets=0),
                     ValueError, "num_sets"),
            BadInput(lambda: subset.coverage.coverage(_INCIDENCE, np.ones(7, bool)), ValueError,
                     "mask"),
            BadInput(lambda: subset.greedy_max_coverage(_INCIDENCE, 9), ValueError, "k"),
        ),
        note=("the bad inputs also cover PaddedIncidence.from_indices, coverage and "
              "greedy_max_coverage"),
    ),
    Entry(
        name="subset.coverage/coverage",
        module="jaxsample.subset.coverage",
        build=_coverage,
        covers=("subset.coverage.coverage",),
        hyper=_coverage_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: subset.coverage.coverage(_INCIDENCE, np.ones(8)), TypeError,
                     "mask"),
        ),
        note="deterministic (the key is unused); the traced value scales the weights",
    ),
    Entry(
        name="subset.coverage/relaxation_greedy",
        module="jaxsample.subset.coverage",
        build=_relaxation_build,
        covers=("subset.max_coverage_relaxation", "subset.greedy_max_coverage"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_relaxation_hyper,
        hyper_values=(0.3, 1.0),
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: subset.max_coverage_relaxation(_INCIDENCE, 3, reg=-1.0), ValueError,
                     "reg"),
            BadInput(lambda: subset.max_coverage_relaxation(_INCIDENCE, 3, reg=0.5,
                                                            num_steps=0), ValueError,
                     "num_steps"),
            BadInput(lambda: subset.max_coverage_relaxation(_INCIDENCE, 3, reg=0.5,
                                                            tolerance=2.0), ValueError,
                     "tolerance"),
            BadInput(lambda: subset.greedy_max_coverage(_INCIDENCE, 3, -np.ones(24)),
                     ValueError, "weights"),
        ),
        note="max_coverage_relaxation (the stable sampler's relaxed problem, mirror ascent to "
             "its default relative gap; reg traced) and the greedy baseline on the same 24 × 8 "
             "incidence: one "
             "program, a tuple of (value, Info)",
    ),
]
