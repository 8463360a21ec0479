"""Contract entries: Best-of-N accuracy (``jaxsample.risk.best_of_n``).

By simulation; the closed forms and the tail estimators (quadrature accuracy, pool accuracy, the
tail tension's GPD fits) in one program; the tail regime, decided on the host (not jittable).
"""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import risk


def _laws(dtype):
    return (risk.Normal(jnp.asarray(1.0, dtype), jnp.asarray(1.0, dtype)),
            risk.Normal(jnp.asarray(0.0, dtype), jnp.asarray(1.5, dtype)))


def _simulate(dtype):
    correct, incorrect = _laws(dtype)
    p = jnp.asarray(0.3, dtype)
    return lambda key: risk.bon_simulate(key, 4, p, correct, incorrect, num_trials=64,
                                         method="direct")


def _simulate_p(dtype):
    correct, incorrect = _laws(dtype)
    return lambda key, p: risk.bon_simulate(key, 4, p, correct, incorrect, num_trials=64,
                                            method="direct")


_N01 = risk.Normal(0.0, 1.0)

# rewards of 120 correct and 200 incorrect responses, the incorrect tail wider (tail_tension's
# doctest law, fewer draws): each class has tens of rewards above the pooled 0.9 quantile
_RNG = np.random.default_rng(0)
_CORRECT, _INCORRECT = _RNG.normal(1.0, 1.0, 120), _RNG.normal(0.0, 1.5, 200)
_SCORES = np.concatenate([_CORRECT, _INCORRECT])
_LABELS = np.arange(320) < 120


def _closed_forms(dtype, p, p_tail):
    correct, incorrect = _laws(dtype)
    scores = jnp.asarray(_SCORES, dtype)
    n = jnp.asarray([1, 4, 16], jnp.int32)
    return (risk.bon_accuracy(n, p, correct, incorrect, num_nodes=8),
            risk.bon_pool_accuracy(scores, _LABELS, n),
            risk.tail_tension(scores, _LABELS, n=n, p_correct=p_tail))


def _closed_forms_build(dtype):
    def fn(key):
        del key  # quadrature, exact pool averages and GPD fits: deterministic
        p = jnp.asarray(0.3, dtype)
        return _closed_forms(dtype, p, p)

    return fn


def _closed_forms_hyper(dtype):
    def fn(key, p):
        del key
        # p traced through the quadrature only: the tension's GPD fits (their compilation
        # batched over p would double this entry's cost) take p_correct as the build does
        return _closed_forms(dtype, p, jnp.asarray(0.3, dtype))

    return fn


def _regime(dtype):
    correct, incorrect = jnp.asarray(_CORRECT, dtype), jnp.asarray(_INCORRECT, dtype)

    def fn(key):
        del key  # GPD fits and tests: deterministic
        return risk.tail_regime(correct, incorrect, min_exceedances=5)

    return fn

ENTRIES = [
    Entry(
        name="risk.best_of_n",
        module="jaxsample.risk.best_of_n",
        build=_simulate,
        covers=("risk.bon_simulate",),
        hyper=_simulate_p,
        hyper_values=(0.3, 0.6),
        bad_inputs=(
            BadInput(lambda: risk.bon_accuracy(4, 1.5, _N01, _N01), ValueError, "p_correct"),
            BadInput(lambda: risk.bon_accuracy(0, 0.5, _N01, _N01), ValueError, "n must be"),
            BadInput(lambda: risk.bon_simulate(KEY, 4, 0.5, _N01, "normal", num_trials=8),
                     TypeError, "incorrect"),
            BadInput(lambda: risk.bon_simulate(KEY, 4, 0.5, _N01, _N01, num_trials=0),
                     ValueError, "num_trials"),
            BadInput(lambda: risk.bon_simulate(None, 4, 0.5, _N01, _N01, num_trials=8),
                     TypeError, "key"),
            BadInput(lambda: risk.Empirical(np.array([0.0, np.nan, 1.0])), ValueError,
                     "scores must be finite"),
            BadInput(lambda: risk.tail_tension(np.arange(10.0), np.array([2] + [0] * 9)),
                     ValueError, "labels"),
        ),
        note="bon_simulate(key, n, p, correct, incorrect, *, num_trials) -> (accuracy, "
             "BoNSimulationInfo); the hyper-parameter p_correct is traced (bon_accuracy's float32/"
             "float64 agreement and quadrature accuracy are tested in "
             "tests/risk/test_best_of_n.py)",
    ),
    Entry(
        name="risk.best_of_n/closed_forms",
        module="jaxsample.risk.best_of_n",
        build=_closed_forms_build,
        covers=("risk.bon_accuracy", "risk.bon_pool_accuracy", "risk.tail_tension"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_closed_forms_hyper,
        hyper_values=(0.3, 0.6),
        exact_ints=False,
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: risk.bon_pool_accuracy(_SCORES, _LABELS, np.array([321])),
                     ValueError, "n must be <= the pool size"),
            BadInput(lambda: risk.bon_pool_accuracy(_SCORES, _LABELS[:5], np.array([2])),
                     ValueError, "labels"),
            BadInput(lambda: risk.tail_tension(_SCORES, _LABELS, threshold_quantile=1.5),
                     ValueError, "threshold_quantile"),
            BadInput(lambda: risk.bon_accuracy(4, 0.5, _N01, _N01, num_nodes=0), ValueError,
                     "num_nodes"),
        ),
        note="bon_accuracy (8 nodes), bon_pool_accuracy and tail_tension at N = 1, 4, 16 on one "
             "pool of 320 rewards: one program, a tuple of (value, Info); p_correct is traced "
             "through bon_accuracy (the simulation entry traces it too). The tension's GPD "
             "fits stop at a tolerance: floats at rtol 1e-3, iteration counts not compared",
    ),
    Entry(
        name="risk.best_of_n/tail_regime",
        module="jaxsample.risk.best_of_n",
        build=_regime,
        covers=("risk.tail_regime",),
        traceable=False,
        bad_inputs=(
            BadInput(lambda: risk.tail_regime(_CORRECT, _INCORRECT, level=1.5), ValueError,
                     "level"),
            BadInput(lambda: risk.tail_regime(_CORRECT, _INCORRECT, min_exceedances=1000),
                     ValueError, "min_exceedances"),
        ),
        note="tail_regime(correct, incorrect) -> (regime str, TailRegimeInfo) is not jittable: "
             "the regime is a string decided on the host from the fits. The float32/float64 "
             "Info and its nonfinite flag are checked; the fits it runs are the ones "
             "tail_tension runs under jit and vmap in risk.best_of_n/closed_forms",
    ),
]
