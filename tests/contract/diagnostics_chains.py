"""Contract entry for the chain diagnostics (``jaxsample.diagnostics.chains``).

``rhat`` and ``ess`` are deterministic estimators (``(value, Info)``), run on small chains drawn
at the entry's dtype from the key. Neither has a float hyper-parameter.
"""

import jax
import jax.numpy as jnp

from contract import BadInput, Entry
from jaxsample import diagnostics


def _build(estimator):
    def build(dtype):
        return lambda key: estimator(jax.random.normal(key, (3, 16, 2), dtype))

    return build


ENTRIES = [
    Entry(
        name="diagnostics.chains/rhat",
        module="jaxsample.diagnostics.chains",
        build=_build(diagnostics.rhat),
        covers=("diagnostics.rhat",),
        bad_inputs=(
            BadInput(lambda: diagnostics.rhat(jnp.zeros(10)), ValueError, "chains must have"),
        ),
        note="no float hyper-parameter",
    ),
    Entry(
        name="diagnostics.chains/ess",
        module="jaxsample.diagnostics.chains",
        build=_build(diagnostics.ess),
        covers=("diagnostics.ess",),
        bad_inputs=(
            BadInput(lambda: diagnostics.ess(jnp.zeros((2, 3))), ValueError, "at least 4 draws"),
        ),
        note="no float hyper-parameter",
    ),
]
