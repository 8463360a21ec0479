"""Contract entries: SABER beta-binomial fits and closed forms (``jaxsample.risk.saber``).

The fit with its prompt bootstrap (both bootstrap entry points, 2 resamples) in one program:
the bootstrap refits with the fit's own solver, so one compiled fit serves the three; the
per-prompt and budget closed forms together in another (a tuple of Infos each).
"""

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
        # one key for both bootstraps: bootstrap_asr refits the resamples bootstrap_fits draws
        return (risk.fit_beta_binomial(successes, trials),
                risk.bootstrap_fits(key, successes, trials, num_resamples=2),
                risk.bootstrap_asr(key, 100, successes, trials, num_resamples=2))

    return fn


def _closed_forms(dtype, pi0):
    successes, trials = _data(dtype)
    alpha, beta = jnp.asarray(0.3, dtype), jnp.asarray(6.0, dtype)
    return (risk.asr_at_n(1000, alpha, beta, pi0),
            risk.asr_anchored(100, successes, trials, alpha, beta, pi0),
            risk.asr_conditional(100, successes, trials, alpha, beta, pi0),
            risk.unbiased_asr_at_k(successes, trials, 5),
            risk.budget_at(0.5, alpha, beta, pi0, max_budget=4096))


def _closed_forms_build(dtype):
    def fn(key):
        del key  # closed forms: deterministic
        return _closed_forms(dtype, jnp.asarray(0.1, dtype))

    return fn


def _closed_forms_hyper(dtype):
    def fn(key, pi0):
        del key
        return _closed_forms(dtype, pi0)

    return fn


def _infos(outputs):
    return tuple(info for _, info in outputs)


ENTRIES = [
    Entry(
        name="risk.saber",
        module="jaxsample.risk.saber",
        build=_fit,
        covers=("risk.fit_beta_binomial", "risk.bootstrap_fits", "risk.bootstrap_asr"),
        info=_infos,
        exact_ints=False,
        rtol=1e-2,
        bad_inputs=(
            BadInput(lambda: risk.fit_beta_binomial(np.array([3, 1]), np.array([2, 4])),
                     ValueError, "successes must be <= trials"),
            BadInput(lambda: risk.fit_beta_binomial(np.array([-1, 1]), 4), ValueError,
                     "successes must be finite and >= 0"),
            BadInput(lambda: risk.budget_at(1.0, 0.3, 5.0), ValueError, "tau"),
            BadInput(lambda: risk.bootstrap_fits(KEY, _SUCCESSES, 20, num_resamples=0),
                     ValueError, "num_resamples"),
            BadInput(lambda: risk.bootstrap_fits(None, _SUCCESSES, 20, num_resamples=2),
                     TypeError, "key"),
            BadInput(lambda: risk.bootstrap_asr(KEY, 100, _SUCCESSES, 20, num_resamples=2,
                                                estimator="plugin"), ValueError, "estimator"),
            BadInput(lambda: risk.bootstrap_asr(None, 100, _SUCCESSES, 20, num_resamples=2),
                     TypeError, "key"),
        ),
        note="fit_beta_binomial(successes, trials) -> (BetaBinomialFit, SABERFitInfo), and "
             "bootstrap_fits / bootstrap_asr with 2 resamples (keyed, with the legacy-key "
             "case): the code path of the vmapped fit, not the intervals' coverage "
             "(tests/risk/test_saber.py), in one program. Fits stop at a gradient tolerance, so "
             "jit and eager agree to the solver's precision (rtol 1e-2 in float32) and iteration "
             "counts may differ (integers not compared). No traced float: the fit's settings "
             "are counts, a tolerance and choices",
    ),
    Entry(
        name="risk.saber/closed_forms",
        module="jaxsample.risk.saber",
        build=_closed_forms_build,
        covers=("risk.asr_at_n", "risk.asr_anchored", "risk.asr_conditional",
                "risk.unbiased_asr_at_k", "risk.budget_at"),
        info=_infos,
        hyper=_closed_forms_hyper,
        hyper_values=(0.0, 0.2),
        bad_inputs=(
            BadInput(lambda: risk.asr_anchored(100, _SUCCESSES, 20, 0.3, 6.0, pi0=1.5),
                     ValueError, "pi0"),
            BadInput(lambda: risk.asr_conditional(100, _SUCCESSES, 20, -0.3, 6.0), ValueError,
                     "alpha"),
            BadInput(lambda: risk.unbiased_asr_at_k(_SUCCESSES, 20, 21), ValueError, "k"),
            BadInput(lambda: risk.budget_at(0.5, 0.3, 6.0, max_budget=0), ValueError,
                     "max_budget"),
        ),
        note="asr_at_n (N = 1000), asr_anchored, asr_conditional (N = 100), "
             "unbiased_asr_at_k (k = 5) and budget_at (tau = 0.5) on the fit's data: one "
             "program, a tuple of (value, Info); π₀ is traced through the four that take it; "
             "the budget is an integer (exact)",
    ),
]
