"""Contract entries: correlated k-subsets and the conditional Poisson law
(``jaxsample.subset.ksubset``).

``correlated_k_subset`` with the systematic rounding (no weight fit: the ``"cp"`` rounding's fit
and sampler are compiled by ``stable_max_coverage``'s tests and ``tests/subset/test_coverage.py``,
which checks its jit == eager and vmap == loop bitwise; its one float hyper-parameter, the fit's
``tolerance``, takes no part in this scheme). The law's own entry points each have a tiny entry:
``fit_weights`` (m = 6), ``inclusion_probabilities`` and ``conditional_poisson`` on fixed
log-weights.
"""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import subset

_X = np.array([0.6, 0.6, 0.4, 0.4, 0.5, 0.5])


def _systematic(dtype):
    marginals = jnp.asarray(_X, dtype)
    return lambda key: subset.correlated_k_subset(key, marginals, 3, scheme="systematic")


_THETA = np.log([0.5, 1.0, 2.0, 1.5, 0.8, 1.2])


def _fit(dtype):
    marginals = jnp.asarray(_X, dtype)
    return lambda key: subset.fit_weights(marginals, 3)     # deterministic: the key is unused


def _inclusion(dtype):
    theta = jnp.asarray(_THETA, dtype)
    return lambda key: subset.inclusion_probabilities(theta, 3)


def _inclusion_hyper(dtype):
    theta = jnp.asarray(_THETA, dtype)
    return lambda key, shift: subset.inclusion_probabilities(theta.at[0].add(shift), 3)


def _conditional_poisson(dtype):
    theta = jnp.asarray(_THETA, dtype)

    def fn(key):
        # the mask is bool: the Info's residual (0) is the float leaf the dtype check reads
        return subset.conditional_poisson(key, theta, 3)

    return fn


def _call(marginals=_X[:4], k=2, **kwargs):
    return lambda: subset.correlated_k_subset(KEY, jnp.asarray(marginals), k, **kwargs)


ENTRIES = [
    Entry(
        name="subset.ksubset/systematic",
        module="jaxsample.subset.ksubset",
        build=_systematic,
        covers=("subset.correlated_k_subset",),
        bad_inputs=(
            BadInput(_call(marginals=[1.2, 0.8, 0.0, 0.0]), ValueError, "marginals"),
            BadInput(_call(marginals=[-0.1, 0.9, 0.6, 0.6]), ValueError, "marginals"),
            BadInput(_call(marginals=[0.5, 0.5, 0.5, 0.2]), ValueError, "marginals"),
            BadInput(_call(k=5), ValueError, "k"),
            BadInput(_call(scheme="pipage"), ValueError, "scheme"),
            BadInput(_call(max_iterations=0), ValueError, "max_iterations"),
            BadInput(lambda: subset.correlated_k_subset(None, _X[:4], 2), TypeError, "key"),
            BadInput(lambda: subset.fit_weights(jnp.asarray(_X[:4]), 3), ValueError,
                     "marginals"),
            BadInput(lambda: subset.inclusion_probabilities(np.full(4, -np.inf), 2),
                     ValueError, "log_weights"),
        ),
        note="no traced hyper-parameter (see the module docstring)",
    ),
    Entry(
        name="subset.ksubset/fit_weights",
        module="jaxsample.subset.ksubset",
        build=_fit,
        covers=("subset.fit_weights",),
        bad_inputs=(
            BadInput(lambda: subset.fit_weights(jnp.asarray(_X), 3, max_iterations=0),
                     ValueError, "max_iterations"),
        ),
        note="a deterministic fit (the key is unused); its tolerance sets a loop bound only",
    ),
    Entry(
        name="subset.ksubset/inclusion_probabilities",
        module="jaxsample.subset.ksubset",
        build=_inclusion,
        covers=("subset.inclusion_probabilities",),
        hyper=_inclusion_hyper,
        hyper_values=(0.0, 0.5),
        bad_inputs=(
            BadInput(lambda: subset.inclusion_probabilities(_THETA, 7), ValueError, "k"),
        ),
        note="deterministic (the key is unused); the traced value shifts one log-weight",
    ),
    Entry(
        name="subset.ksubset/conditional_poisson",
        module="jaxsample.subset.ksubset",
        build=_conditional_poisson,
        covers=("subset.conditional_poisson",),
        bad_inputs=(
            BadInput(lambda: subset.conditional_poisson(None, _THETA, 3), TypeError, "key"),
            BadInput(lambda: subset.conditional_poisson(KEY, [np.nan] * 6, 3), ValueError,
                     "log_weights"),
        ),
        note="no float hyper-parameter (the log-weights are the input)",
    ),
]
