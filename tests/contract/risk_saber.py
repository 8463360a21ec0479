"""Contract entry: SABER beta-binomial fits and closed forms (``jaxsample.risk.saber``)."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import risk

# 24 prompts, 20 attempts each, clearly over-dispersed (a well-determined fit)
_SUCCESSES = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16,
                       19, 20])


def _data(dtype):
    return jnp.asarray(_SUCCESSES, dtype), jnp.asarray(20.0, dtype)


def _fit(dtype):
    successes, trials = _data(dtype)

    def fn(key):
        del key  # the fit is deterministic (bootstrap_fits is the keyed variant)
        return risk.fit_beta_binomial(successes, trials)

    return fn


def _closed_form(dtype):
    alpha, beta = jnp.asarray(0.3, dtype), jnp.asarray(6.0, dtype)

    def fn(key, pi0):
        del key  # the closed forms are deterministic
        return risk.asr_at_n(1000, alpha, beta, pi0)

    return fn


ENTRIES = [
    Entry(
        name="risk.saber",
        module="jaxsample.risk.saber",
        build=_fit,
        hyper=_closed_form,
        hyper_values=(0.0, 0.2),
        exact_ints=False,
        rtol=1e-2,
        bad_inputs=(
            BadInput(lambda: risk.fit_beta_binomial(np.array([3, 1]), np.array([2, 4])),
                     ValueError, "successes must be <= trials"),
            BadInput(lambda: risk.fit_beta_binomial(np.array([-1, 1]), 4), ValueError,
                     "successes must be >= 0"),
            BadInput(lambda: risk.budget_at(1.0, 0.3, 5.0), ValueError, "tau"),
            BadInput(lambda: risk.bootstrap_fits(KEY, _SUCCESSES, 20, num_resamples=0),
                     ValueError, "num_resamples"),
            BadInput(lambda: risk.bootstrap_fits(None, _SUCCESSES, 20, num_resamples=2),
                     TypeError, "key"),
        ),
        note="fit_beta_binomial(successes, trials) -> (BetaBinomialFit, SABERFitInfo), "
             "deterministic (the key is unused; tests/test_saber.py checks bootstrap_fits' "
             "vmap). Fits stop at a gradient tolerance, so jit and eager agree to the "
             "solver's precision (rtol 1e-2 in float32) and iteration counts may differ "
             "(integers not compared). The "
             "hyper-parameter is π₀ of the closed form asr_at_n, traced",
    ),
]
