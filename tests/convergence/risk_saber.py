"""SABER's beta-binomial fits (fit_beta_binomial, bootstrap_fits, bootstrap_asr) against the
exact maximum-likelihood estimate of the same data.

An estimator's error against the truth is its sampling error, which no iteration budget changes;
what ``max_iterations`` buys is how close the L-BFGS fit comes to the *exact* maximiser of the
likelihood. So the error is ``|log α − log α*|``, ``|log β − log β*|`` (and the ASR@N estimate's
relative error) against ``(α*, β*)`` found by a float64 Nelder–Mead search on the same counts, to
1e-10; the floor is 0 and ``atol`` is what a float32 objective can resolve: a minimum located
from values with relative error ``ε`` is found only to ``sqrt(2ε|f|/f'')`` (``|f| ≈ 2``,
``f'' ≈ 0.3`` per prompt in the log parameters here: 1.4e-3 at ``ε = 2^-23``), so 2e-3.

The data (150 prompts, 25 attempts each, ``θ ~ Beta(0.8, 3)``) are not those of the method's
tests. ``num_resamples`` sets the resolution of the bootstrap law (Monte Carlo error of its
quantiles around the ideal bootstrap, which has no closed form); the fits under it are the same
L-BFGS fits, run here at the default 1 000 replicates (bootstrap_asr) and 8 (bootstrap_fits,
whose resamples are rebuilt to refit them exactly).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from convergence import Entry

NUM_PROMPTS, TRIALS, ALPHA, BETA = 150, 25, 0.8, 3.0
ATOL = 2e-3
BUDGETS = (1, 3, 100)  # max_iterations; 100 is the default
NUM_BOOTSTRAP = 8
HORIZON = 1000.0  # the N of the ASR@N estimate checked


def _counts(key) -> np.ndarray:
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    return scipy.stats.betabinom.rvs(TRIALS, ALPHA, BETA, size=NUM_PROMPTS,
                                     random_state=np.random.default_rng(seed))


@functools.cache
def _data(keys_bytes: bytes) -> np.ndarray:
    keys = jax.random.wrap_key_data(jnp.asarray(np.frombuffer(keys_bytes, np.uint32)
                                                .reshape(-1, 2)))
    return np.stack([_counts(k) for k in keys])


def _dataset(keys) -> np.ndarray:
    return _data(np.asarray(jax.random.key_data(keys)).tobytes())


def _exact_mle(c: np.ndarray) -> np.ndarray:
    """``(α*, β*)`` maximising the beta-binomial likelihood of ``c`` (float64, to 1e-10)."""
    values, counts = np.unique(c, return_counts=True)

    def nll(y):
        a, b = np.exp(y)
        terms = scipy.special.betaln(values + a, TRIALS - values + b) - scipy.special.betaln(a, b)
        return -np.dot(counts, terms) / c.size

    best = scipy.optimize.minimize(nll, np.log([ALPHA, BETA]), method="Nelder-Mead",
                                   options=dict(xatol=1e-10, fatol=1e-14, maxiter=5000))
    return np.exp(best.x)


def _parameter_error(alpha, beta, exact) -> np.ndarray:
    alpha, beta = np.asarray(alpha, float), np.asarray(beta, float)
    return np.maximum(np.abs(np.log(alpha / exact[..., 0])), np.abs(np.log(beta / exact[..., 1])))


def _fit_error(budget, keys):
    from jaxsample import risk

    data = _dataset(keys)
    fit, _ = jax.vmap(lambda c: risk.fit_beta_binomial(c, TRIALS, max_iterations=budget))(
        jnp.asarray(data, jnp.float32))
    exact = np.stack([_exact_mle(c) for c in data])
    return _parameter_error(fit.alpha, fit.beta, exact)


def _resamples(key, c):
    """The resampled prompts of :func:`jaxsample.risk.bootstrap_fits` (``m`` draws with
    replacement per resample, indices from ``randint(key, (B, m), 0, m)``)."""
    index = np.asarray(jax.random.randint(key, (NUM_BOOTSTRAP, c.size), 0, c.size))
    return c[index]


def _bootstrap_fits_error(budget, keys):
    from jaxsample import risk

    data = _dataset(keys)
    fits, _ = jax.vmap(lambda k, c: risk.bootstrap_fits(
        k, c, TRIALS, num_resamples=NUM_BOOTSTRAP, max_iterations=budget))(
        keys, jnp.asarray(data, jnp.float32))
    exact = np.stack([np.stack([_exact_mle(r) for r in _resamples(k, c)])
                      for k, c in zip(keys, data, strict=True)])
    return _parameter_error(fits.alpha, fits.beta, exact).max(axis=1)


def _bootstrap_asr_error(budget, keys):
    from jaxsample import risk

    data = _dataset(keys)
    interval, info = jax.vmap(lambda k, c: risk.bootstrap_asr(
        k, HORIZON, c, TRIALS, max_iterations=budget))(keys, jnp.asarray(data, jnp.float32))
    exact = np.stack([_exact_mle(c) for c in data])
    reference = np.asarray([
        float(risk.asr_anchored(HORIZON, jnp.asarray(c, jnp.float32), TRIALS, a, b)[0])
        for c, (a, b) in zip(data, exact, strict=True)])
    estimate = np.abs(np.asarray(interval.estimate, float) / reference - 1)
    return np.maximum(_parameter_error(info.fit.alpha, info.fit.beta, exact), estimate)


def _zeros(keys):
    return np.zeros(len(keys))


_PROBLEM = (f"{NUM_PROMPTS} prompts x {TRIALS} attempts, theta ~ Beta({ALPHA}, {BETA}); error "
            "against the float64 exact MLE of the same counts")
_FLOOR = ("0: the exact maximiser (Nelder-Mead, float64, 1e-10); atol 2e-3 = sqrt(2 eps32 |f| / "
          "f'') resolution of a float32 objective")

ENTRIES = [
    Entry(name="risk.fit_beta_binomial/exact-mle", covers=("risk.fit_beta_binomial",),
          problem=_PROBLEM + ": max |log alpha/alpha*|, |log beta/beta*|",
          knob="max_iterations", budgets=BUDGETS, error=_fit_error, floor=_zeros,
          floor_formula=_FLOOR, atol=ATOL),
    Entry(name="risk.bootstrap_fits/exact-mle", covers=("risk.bootstrap_fits",),
          problem=_PROBLEM + f" of each of {NUM_BOOTSTRAP} resamples (worst resample)",
          knob="max_iterations", budgets=BUDGETS, error=_bootstrap_fits_error, floor=_zeros,
          floor_formula=_FLOOR, atol=ATOL),
    Entry(name="risk.bootstrap_asr/exact-mle", covers=("risk.bootstrap_asr",),
          problem=_PROBLEM + f": the fit's parameters and the anchored ASR@{HORIZON:.0f} "
                             "estimate (relative), 1 000 replicates (default)",
          knob="max_iterations", budgets=BUDGETS, error=_bootstrap_asr_error, floor=_zeros,
          floor_formula=_FLOOR, atol=ATOL),
]
