"""Contract entries for the two-sample distances and DAMV (``jaxsample.diagnostics.distances``).

The samples are drawn at the entry's dtype from the key. ``mmd``'s bandwidth is its traced
hyper-parameter; ``energy_distance`` runs chunked, ``sliced_wasserstein`` takes the key for its
directions, ``damv`` a traced target variance.
"""

import jax
import jax.numpy as jnp

from contract import KEY, BadInput, Entry
from jaxsample import diagnostics


def _pair(key, dtype):
    kx, ky = jax.random.split(key)
    return (jax.random.normal(kx, (12, 2), dtype),
            jax.random.normal(ky, (9, 2), dtype) + jnp.asarray(0.5, dtype))


def _mmd(dtype):
    return lambda key: diagnostics.mmd(*_pair(key, dtype), chunk_size=5)


def _mmd_hyper(dtype):
    return lambda key, h: diagnostics.mmd(*_pair(key, dtype), h)


def _energy(dtype):
    return lambda key: diagnostics.energy_distance(*_pair(key, dtype), chunk_size=5)


def _sliced(dtype):
    def fn(key):
        key_pair, key_directions = jax.random.split(key)
        return diagnostics.sliced_wasserstein(key_directions, *_pair(key_pair, dtype),
                                              num_projections=8)

    return fn


def _damv(dtype):
    return lambda key: diagnostics.damv(_pair(key, dtype)[0], jnp.asarray([1.0, 2.0], dtype))


def _damv_hyper(dtype):
    return lambda key, variance: diagnostics.damv(_pair(key, dtype)[0], variance)


_X, _Y = jnp.zeros((3, 2)), jnp.zeros((3, 1))

ENTRIES = [
    Entry(
        name="diagnostics.distances/mmd",
        module="jaxsample.diagnostics.distances",
        build=_mmd,
        covers=("diagnostics.mmd",),
        hyper=_mmd_hyper,
        hyper_values=(0.7, 1.3),
        bad_inputs=(
            BadInput(lambda: diagnostics.mmd(_X, _X, -1.0), ValueError, "bandwidth"),
            BadInput(lambda: diagnostics.mmd(_X, _Y), ValueError, "same dim"),
            BadInput(lambda: diagnostics.mmd(_X[:1], _X), ValueError, "at least 2"),
        ),
    ),
    Entry(
        name="diagnostics.distances/energy_distance",
        module="jaxsample.diagnostics.distances",
        build=_energy,
        covers=("diagnostics.energy_distance",),
        bad_inputs=(
            BadInput(lambda: diagnostics.energy_distance(jnp.zeros(3), _Y), ValueError,
                     "x must have 2"),
            BadInput(lambda: diagnostics.energy_distance(_X, _X, chunk_size=0), ValueError,
                     "chunk_size"),
        ),
        note="no float hyper-parameter",
    ),
    Entry(
        name="diagnostics.distances/sliced_wasserstein",
        module="jaxsample.diagnostics.distances",
        build=_sliced,
        covers=("diagnostics.sliced_wasserstein",),
        bad_inputs=(
            BadInput(lambda: diagnostics.sliced_wasserstein(KEY, _X, _X, num_projections=0),
                     ValueError, "num_projections"),
            BadInput(lambda: diagnostics.sliced_wasserstein(None, _X, _X), TypeError, "key"),
        ),
        note="no float hyper-parameter (p is an int order)",
    ),
    Entry(
        name="diagnostics.distances/damv",
        module="jaxsample.diagnostics.distances",
        build=_damv,
        covers=("diagnostics.damv",),
        hyper=_damv_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: diagnostics.damv(jnp.zeros((1, 2))), ValueError, "x needs"),
            BadInput(lambda: diagnostics.damv(_X, jnp.ones(3)), ValueError, "target_var"),
        ),
    ),
]
