"""Contract entry: Best-of-N accuracy by simulation (``jaxsample.risk.best_of_n``)."""

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

ENTRIES = [
    Entry(
        name="risk.best_of_n",
        module="jaxsample.risk.best_of_n",
        build=_simulate,
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
             "float64 agreement and quadrature accuracy are tested in tests/test_best_of_n.py)",
    ),
]
