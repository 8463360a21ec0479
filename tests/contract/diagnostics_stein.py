"""Contract entry for the reference-free Stein check (``jaxsample.diagnostics.stein``).

``stein_check`` is a deterministic estimator (``(value, Info)``): the cloud is drawn at the
entry's dtype from the key, its scores are those of ``N(0, I)``. ``level`` (the family-wise
false-alarm level of the funnel flag) is its traced hyper-parameter.
"""

import jax
import jax.numpy as jnp

from contract import BadInput, Entry
from jaxsample import diagnostics


def _cloud(key, dtype):
    x = jax.random.normal(key, (16, 3), dtype)
    return x, -x


def _check(dtype):
    return lambda key: diagnostics.stein_check(*_cloud(key, dtype), band=(0.6, 1.4))


def _check_hyper(dtype):
    return lambda key, level: diagnostics.stein_check(*_cloud(key, dtype), band=(0.6, 1.4),
                                                      level=level)


_X = jnp.zeros((10, 3))

ENTRIES = [
    Entry(
        name="diagnostics.stein/stein_check",
        module="jaxsample.diagnostics.stein",
        build=_check,
        covers=("diagnostics.stein_check",),
        hyper=_check_hyper,
        hyper_values=(0.01, 0.1),
        bad_inputs=(
            BadInput(lambda: diagnostics.stein_check(_X, jnp.zeros((10, 2))), ValueError,
                     "scores must have the shape"),
            BadInput(lambda: diagnostics.stein_check(_X[:7], _X[:7]), ValueError, "positions"),
            BadInput(lambda: diagnostics.stein_check(_X, _X, band=(1.0, 2.0)), ValueError,
                     "band"),
            BadInput(lambda: diagnostics.stein_check(_X, _X, level=1.0), ValueError, "level"),
        ),
    ),
]
