"""Contract entry: Condorcet-winner identification (``jaxsample.decision.dueling``)."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import decision

_Q = np.array([[0.5, 0.7, 0.75, 0.8],
               [0.3, 0.5, 0.8, 0.8],
               [0.25, 0.2, 0.5, 0.6],
               [0.2, 0.2, 0.4, 0.5]])


def _identify(dtype):
    prefs = decision.PreferenceMatrix(jnp.asarray(_Q, dtype))
    return lambda key: decision.identify_condorcet(key, prefs, delta=0.1, budget=400)


def _identify_delta(dtype):
    prefs = decision.PreferenceMatrix(jnp.asarray(_Q, dtype))
    return lambda key, delta: decision.identify_condorcet(key, prefs, delta=delta, budget=400)


_CYCLE = np.array([[0.5, 0.7, 0.3], [0.3, 0.5, 0.7], [0.7, 0.3, 0.5]])

ENTRIES = [
    Entry(
        name="decision.dueling",
        module="jaxsample.decision.dueling",
        build=_identify,
        covers=("decision.identify_condorcet",),
        hyper=_identify_delta,
        hyper_values=(0.05, 0.2),
        bad_inputs=(
            BadInput(lambda: decision.PreferenceMatrix(np.array([[0.5, 0.7], [0.4, 0.5]])),
                     ValueError, "complementary"),
            BadInput(lambda: decision.PreferenceMatrix(np.array([[0.5, 1.2], [-0.2, 0.5]])),
                     ValueError, r"\[0, 1\]"),
            BadInput(lambda: decision.PreferenceMatrix(_CYCLE), ValueError,
                     "no strict Condorcet winner"),
            BadInput(lambda: decision.PreferenceMatrix(np.full((2, 3), 0.5)), ValueError,
                     "square"),
            BadInput(lambda: decision.identify_condorcet(KEY, _Q, delta=1.5), ValueError,
                     "delta"),
            BadInput(lambda: decision.identify_condorcet(KEY, _Q, budget=0), ValueError,
                     "budget"),
            BadInput(lambda: decision.identify_condorcet(KEY, _Q, strategy="rucb"), ValueError,
                     "strategy"),
        ),
        note="identify_condorcet(key, preferences, *, delta, budget, strategy, schedule) -> "
             "(winner, DuelInfo); delta is traced; a matrix without a strict Condorcet winner is "
             "refused when concrete (traced: the run ends with determined=False)",
    ),
]
