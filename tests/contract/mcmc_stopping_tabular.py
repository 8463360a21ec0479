"""Contract entries for the exact finite-state stopping theory (jaxsample.mcmc.stopping_tabular).

A three-state birth-death chain: the minimal-flow classifier and the terminal law it gives. The
mixing weight of two target laws is the traced float (the solves are closed forms; the key is
unused).
"""

import jax.numpy as jnp
import numpy as np

from contract import BadInput, Entry
from jaxsample.mcmc import optimal_stop_tabular, terminal_law

_K = np.array([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]])
_P0 = np.array([1.0, 0.0, 0.0])
_PI = np.array([0.25, 0.5, 0.25])
_FLAT = np.full(3, 1 / 3)


def _solve(dtype, weight):
    k, p0 = jnp.asarray(_K, dtype), jnp.asarray(_P0, dtype)
    pi = (1 - weight) * jnp.asarray(_PI, dtype) + weight * jnp.asarray(_FLAT, dtype)
    sigma, info = optimal_stop_tabular(k, p0, pi)
    terminal, _ = terminal_law(k, p0, sigma)
    return terminal, info


def _build(dtype):
    def fn(key):
        del key  # dense solves: deterministic
        return _solve(dtype, 0.0)

    return fn


def _hyper(dtype):
    def fn(key, weight):
        del key
        return _solve(dtype, jnp.asarray(weight, dtype))

    return fn


ENTRIES = [Entry(
    name="mcmc.stopping_tabular",
    module="jaxsample.mcmc.stopping_tabular",
    build=_build,
    covers=("mcmc.optimal_stop_tabular", "mcmc.terminal_law"),
    hyper=_hyper,
    hyper_values=(0.0, 0.5),
    exact_ints=False,
    rtol=1e-4,
    bad_inputs=(
        BadInput(lambda: optimal_stop_tabular(np.array([[0.5, 0.6], [0.5, 0.5]]), _P0[:2],
                                              _P0[:2]), ValueError, "transition"),
        BadInput(lambda: terminal_law(_K, _P0, np.array([0.5, 1.5, 0.5])), ValueError, "sigma"),
        BadInput(lambda: optimal_stop_tabular(_K, np.array([0.7, 0.7, 0.0]), _PI), ValueError,
                 "init_probs"),
    ),
    note="optimal_stop_tabular(K, p0, pi) -> (sigma, TabularStopInfo) and terminal_law(K, p0, "
         "sigma) -> (p_T, TabularStopInfo), composed; the traced float mixes two targets.",
)]
