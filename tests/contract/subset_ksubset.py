"""Contract entry: correlated k-subsets (``jaxsample.subset.ksubset``).

One entry, ``correlated_k_subset`` with the systematic rounding (no weight fit: the conditional
Poisson rounding's fit and sampler are compiled by ``stable_max_coverage``'s tests and
``tests/test_coverage.py``, which checks its jit == eager and vmap == loop bitwise). Its one float
hyper-parameter, the ``"cp"`` fit's ``tolerance``, takes no part in this scheme, hence no traced
hyper-parameter check here. The bad inputs cover ``fit_weights`` and ``inclusion_probabilities``
too.
"""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import subset

_X = np.array([0.6, 0.6, 0.4, 0.4, 0.5, 0.5])


def _systematic(dtype):
    marginals = jnp.asarray(_X, dtype)
    return lambda key: subset.correlated_k_subset(key, marginals, 3, scheme="systematic")


def _call(marginals=_X[:4], k=2, **kwargs):
    return lambda: subset.correlated_k_subset(KEY, jnp.asarray(marginals), k, **kwargs)


ENTRIES = [
    Entry(
        name="subset.ksubset/systematic",
        module="jaxsample.subset.ksubset",
        build=_systematic,
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
]
