"""Contract entry: Condorcet-winner identification (``jaxsample.decision.dueling``)."""

import jax
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


def _ask_tell(dtype, delta=0.1):
    q = jnp.asarray(_Q, dtype)

    def fn(key, delta=delta):
        m = decision.CondorcetIdentification(4, delta=delta, budget=400)
        return m.run(key, lambda k, i, j: jax.random.uniform(k, (), dtype) < q[i, j],
                     dtype=dtype)

    return fn


def _ask_tell_delta(dtype):
    return lambda key, h: _ask_tell(dtype)(key, delta=h)


_M = decision.CondorcetIdentification(4)
_STATE = _M.init(KEY)

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
    Entry(
        name="decision.dueling/ask-tell",
        module="jaxsample.decision.dueling",
        build=_ask_tell,
        covers=("decision.CondorcetIdentification",),
        hyper=_ask_tell_delta,
        hyper_values=(0.05, 0.2),
        bad_inputs=(
            BadInput(lambda: decision.CondorcetIdentification(1), ValueError, "num_arms"),
            BadInput(lambda: decision.CondorcetIdentification(3, delta=0.0), ValueError,
                     "delta"),
            BadInput(lambda: decision.CondorcetIdentification(3, budget=0), ValueError,
                     "budget"),
            BadInput(lambda: decision.CondorcetIdentification(3, strategy="rucb"), ValueError,
                     "strategy"),
            BadInput(lambda: _M.tell(_STATE, 0, 1, 2.0), ValueError, "outcome"),
            BadInput(lambda: _M.tell(_STATE, 0, 1, "win"), TypeError, "outcome"),
            BadInput(lambda: _M.tell(_STATE, 0, 0, True), ValueError, "different arms"),
            BadInput(lambda: _M.tell(_STATE, 0, 4, True), ValueError, "j must be"),
            BadInput(lambda: _M.ask(None, _STATE), TypeError, "key"),
            BadInput(lambda: _M.ask(KEY, "state"), TypeError, "state"),
            BadInput(lambda: _M.run(KEY, lambda k, i, j: jnp.ones(3)), ValueError, "oracle"),
        ),
        note="CondorcetIdentification(K, *, delta, budget, strategy, schedule): init(key), "
             "ask(key, state) -> (i, j), tell(state, i, j, outcome), result(state); fn(key) runs "
             "run(key, oracle) with a matrix oracle (delta traced); the ask/tell loop equals the "
             "run bit for bit in tests/decision/test_dueling.py",
    ),
]
