"""The beta-binomial maximum-likelihood fit behind SABER, and its bootstrap (private to ``risk``).

Prompt ``i`` broken ``c_i`` times in ``n_i`` attempts; ``c_i ~ BetaBin(n_i, α, β)``, with
zero inflation a fraction π₀ of prompts unbreakable. The fit maximises

    ℓ(α, β[, π₀]) = Σ_i log C(n_i, c_i) + log B(c_i + α, n_i − c_i + β) − log B(α, β)

(zero-inflated: per prompt ``logaddexp(log π₀ + log 1[c_i = 0], log(1 − π₀) + log BB(c_i))``)
over ``y = (logit α/(α + β), log(α + β)[, logit π₀])``, which conditions the problem and puts the
binomial limit (no heterogeneity) at infinity.

* **Likelihood.** From count statistics when a static bound ``J >= max n_i`` is known:
  ``log B(c + α, n − c + β) − log B(α, β) = Σ_{j<c} log(α + j) + Σ_{j<n−c} log(β + j) −
  Σ_{j<n} log(α + β + j)`` needs only the numbers of prompts with ``c_i > j``, ``n_i − c_i > j``
  and ``n_i > j`` (``O(J)`` per evaluation, one compilation per ``J`` whatever the number of
  prompts); otherwise from log-beta functions per prompt. Both are the same likelihood.
* **Start.** The method of moments: the mean ``Σc/Σn`` and, from
  ``Var(c/n) = m(1 − m)[1/n + (1 − 1/n)ρ]``, the intra-class correlation ``ρ = 1/(α + β + 1)``.
* **Solver.** ``optax.lbfgs`` (zoom line search, approximate Wolfe conditions) on the mean
  negative log-likelihood per prompt, stopped when every gradient entry is below ``tolerance``.
  Optax provides the L-BFGS update, not a loop: the ``lax.while_loop`` here is optax's documented
  ``lbfgs`` + ``value_and_grad_from_state`` pattern, plus the gradient stopping test and the
  :class:`~jaxsample.SolverStats`. ``optimistix.BFGS``, which has its own loop, was tried first:
  its termination test runs only on accepted steps, so once the Armijo test fails at round-off
  level it halves the step until ``max_iterations`` (5–15 % of bootstrap fits never stopped).
* **Bootstrap.** ``B`` resamples of the prompts with replacement (their ``(c_i, n_i)`` pairs),
  drawn from one key (:func:`resample`, also used to evaluate the estimators on the same
  resamples), fitted as one ``vmap`` (:func:`fit_resamples`).

Inputs are valid: the public entry points in :mod:`jaxsample.risk.saber` checked them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxsample._batching import vmap_in_blocks
from jaxsample.kernels import betabinomial as bb
from jaxsample.kernels.solver import SolverStats

__all__ = [
    "MAX_COUNT_TRIALS",
    "BetaBinomialFit",
    "SABERFitInfo",
    "fit_counts",
    "fit_resamples",
    "resample",
]


class BetaBinomialFit(NamedTuple):
    """The parameters of a (zero-inflated) beta-binomial maximum-likelihood fit.

    Attributes:
        alpha: α of the Beta law of per-prompt success probabilities.
        beta: β.
        pi0: fraction of unbreakable prompts (0 unless fitted with ``zero_inflated=True``).
    """

    alpha: jax.Array
    beta: jax.Array
    pi0: jax.Array


class SABERFitInfo(NamedTuple):
    """How a beta-binomial fit ended.

    Attributes:
        log_likelihood: ``Σ_i log P(c_i; n_i, α, β, π₀)`` at the fit (binomial coefficients
            included).
        solver: :class:`~jaxsample.SolverStats` of L-BFGS (``successful`` only when the
            gradient at the returned parameters met the tolerance within ``max_iterations``;
            ``nonfinite`` for a non-finite gradient). An eager fit that fails warns once.
        nonfinite: any parameter or the log-likelihood is not finite.
    """

    log_likelihood: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


# count-statistics likelihood up to this many trials per prompt; beyond, the log-beta form
MAX_COUNT_TRIALS = 100_000


def _unpack(params):
    log_nu = params[1]
    alpha = jnp.exp(log_nu + jax.nn.log_sigmoid(params[0]))
    beta = jnp.exp(log_nu + jax.nn.log_sigmoid(-params[0]))
    return alpha, beta


class _Statistics(NamedTuple):
    """What a fit needs from the data (for whole-number counts and a static trial bound J).

    ``log B(c + α, n − c + β) − log B(α, β) = Σ_{j<c} log(α + j) + Σ_{j<n−c} log(β + j) −
    Σ_{j<n} log(α + β + j)``, so the likelihood needs only ``A_j = #{c_i > j}``,
    ``B_j = #{n_i − c_i > j}``, ``C_j = #{n_i > j}`` (``j < J``) and, for zero inflation, the
    number of unbroken prompts with ``n_i = n`` (``n <= J``); the start needs a few moments.
    The solver then costs ``O(J)`` per evaluation and compiles once per ``J``, whatever the
    number of prompts.
    """

    above_successes: jax.Array
    above_failures: jax.Array
    above_trials: jax.Array
    unbroken: jax.Array
    num_prompts: jax.Array
    moments: jax.Array  # Σc, Σn, Σ(c/n), Σ(c/n)², Σ log C(n, c)


def _statistics(successes, trials, max_trials):
    dtype = successes.dtype
    c = successes.astype(jnp.int32)
    n = trials.astype(jnp.int32)
    size = max_trials + 1

    def exceeding(values):
        histogram = jnp.bincount(values, length=size).astype(dtype)
        return (jnp.sum(histogram) - jnp.cumsum(histogram))[:max_trials]

    unbroken = jnp.bincount(n, weights=(c == 0).astype(dtype), length=size)
    rates = successes / trials
    lgamma = jax.lax.lgamma
    log_choose = lgamma(trials + 1) - lgamma(successes + 1) - lgamma(trials - successes + 1)
    moments = jnp.stack([jnp.sum(successes), jnp.sum(trials), jnp.sum(rates),
                         jnp.sum(rates * rates), jnp.sum(log_choose)])
    return _Statistics(exceeding(c), exceeding(n - c), exceeding(n), unbroken,
                       jnp.asarray(successes.shape[0], dtype), moments)


def _nll_counts(params, statistics, zero_inflated):
    """Mean negative log-likelihood per prompt from count statistics (constants dropped)."""
    alpha, beta = _unpack(params)
    num_prompts = statistics.num_prompts
    j = jnp.arange(statistics.above_successes.shape[0], dtype=alpha.dtype)
    log_a, log_b, log_ab = jnp.log(alpha + j), jnp.log(beta + j), jnp.log(alpha + beta + j)
    total = jnp.sum(statistics.above_successes * log_a + statistics.above_failures * log_b
                    - statistics.above_trials * log_ab)
    if not zero_inflated:
        return -total / num_prompts
    # an unbroken prompt with n trials: log P(c = 0) = Σ_{j<n} log(β + j) − log(α + β + j)
    zeros = statistics.unbroken
    log_zero = jnp.concatenate([jnp.zeros((1,), j.dtype), jnp.cumsum(log_b - log_ab)])
    log_pi0, log_rest = jax.nn.log_sigmoid(params[2]), jax.nn.log_sigmoid(-params[2])
    broken = total - jnp.sum(zeros * log_zero)  # Σ over prompts with c_i > 0
    unbroken = jnp.sum(zeros * jnp.logaddexp(log_pi0, log_rest + log_zero))
    return -((num_prompts - jnp.sum(zeros)) * log_rest + broken + unbroken) / num_prompts


def _nll_prompts(params, data, zero_inflated):
    """Mean negative log-likelihood per prompt from log-beta functions (any counts)."""
    successes, trials = data
    alpha, beta = _unpack(params)
    terms = bb.betaln(successes + alpha, trials - successes + beta) - bb.betaln(alpha, beta)
    if zero_inflated:
        zeros = jnp.where(successes > 0, -jnp.inf, jnp.zeros_like(successes))
        terms = jnp.logaddexp(jax.nn.log_sigmoid(params[2]) + zeros,
                              jax.nn.log_sigmoid(-params[2]) + terms)
    return -jnp.mean(terms)


def _moment_start(moments, num_prompts, zero_fraction, zero_inflated):
    """Method-of-moments (logit mean, log concentration[, logit π₀]) start."""
    sum_c, sum_n, sum_rate, sum_rate_sq = moments[0], moments[1], moments[2], moments[3]
    floor = 0.5 / sum_n
    mean = jnp.clip(sum_c / sum_n, floor, 1 - floor)
    # mean of (c/n − m)² from the sums
    variance = (sum_rate_sq - 2 * mean * sum_rate) / num_prompts + mean * mean
    n_bar = sum_n / num_prompts
    # Var(c/n) = m(1 − m)[1/n + (1 − 1/n)ρ] with intra-class correlation ρ = 1/(ν + 1)
    spread = variance / (mean * (1 - mean)) - 1 / n_bar
    rho = jnp.where(n_bar > 1, spread / jnp.maximum(1 - 1 / n_bar, floor), 0.5)
    rho = jnp.clip(rho, 1e-4, 1 - 1e-4)
    nu = 1 / rho - 1
    start = [jnp.log(mean) - jnp.log1p(-mean), jnp.log(nu)]
    if zero_inflated:
        # half the unbroken prompts: the rest of them are left to the Beta part
        pi0 = jnp.clip(0.5 * zero_fraction, 0.01, 0.9)
        start.append(jnp.log(pi0) - jnp.log1p(-pi0))
    return jnp.stack(start)


def _solve(objective, start, log_choose, num_prompts, zero_inflated, max_iterations,
           tolerance):
    """L-BFGS on ``objective`` (mean NLL per prompt) until its gradient is below ``tolerance``."""
    dtype = start.dtype
    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def step(carry):
        params, state, count = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad,
                                       value_fn=objective)
        return optax.apply_updates(params, updates), state, count + 1

    def gradient_norm(state):
        return jnp.max(jnp.abs(optax.tree.get(state, "grad")))

    def keep_going(carry):
        _, state, count = carry
        return (count == 0) | ((count < max_iterations) & (gradient_norm(state) > tolerance))

    # optax's L-BFGS adds an int32 memory index to an int64 arange under 64-bit types, which
    # strict dtype promotion refuses; its internals run under standard promotion
    with jax.numpy_dtype_promotion("standard"):
        params, state, count = jax.lax.while_loop(
            keep_going, step, (start, solver.init(start), jnp.zeros((), jnp.int32)))
    alpha, beta = _unpack(params)
    pi0 = jax.nn.sigmoid(params[2]) if zero_inflated else jnp.zeros((), dtype)
    # the mean per prompt, times m, plus the binomial coefficients (data only)
    log_likelihood = log_choose - num_prompts * objective(params)
    finite = jnp.isfinite(jnp.stack([alpha, beta, pi0, log_likelihood]))
    nonfinite = ~jnp.all(finite)
    final_gradient = gradient_norm(state)
    # success only when the gradient criterion was met at the returned parameters; a NaN
    # gradient (never <= tolerance) is reported as non-finite, not as an exhausted budget
    stats = SolverStats.of(count, converged=final_gradient <= tolerance,
                           nonfinite=nonfinite | ~jnp.isfinite(final_gradient))
    return (BetaBinomialFit(alpha=alpha, beta=beta, pi0=pi0),
            SABERFitInfo(log_likelihood=log_likelihood, solver=stats, nonfinite=nonfinite))


def _fit_statistics(statistics, *, zero_inflated, max_iterations, tolerance):
    with jax.named_scope("fit_beta_binomial"):
        zero_fraction = jnp.sum(statistics.unbroken) / statistics.num_prompts
        start = _moment_start(statistics.moments, statistics.num_prompts, zero_fraction,
                              zero_inflated)
        return _solve(lambda y: _nll_counts(y, statistics, zero_inflated), start,
                      statistics.moments[4], statistics.num_prompts, zero_inflated,
                      max_iterations, tolerance)


def _fit(successes, trials, *, zero_inflated, max_iterations, tolerance, max_trials):
    """The fit (traceable). ``max_trials`` None: the log-beta likelihood per prompt."""
    settings = dict(zero_inflated=zero_inflated, max_iterations=max_iterations,
                    tolerance=tolerance)
    if max_trials is not None:
        return _fit_statistics(_statistics(successes, trials, max_trials), **settings)
    with jax.named_scope("fit_beta_binomial"):
        statistics = _statistics(successes, trials, 1)  # the moments only
        zero_fraction = jnp.mean((successes == 0).astype(successes.dtype))
        start = _moment_start(statistics.moments, statistics.num_prompts, zero_fraction,
                              zero_inflated)
        return _solve(lambda y: _nll_prompts(y, (successes, trials), zero_inflated), start,
                      statistics.moments[4], statistics.num_prompts, **settings)


# max_iterations is traced (a while-loop bound): every iteration cap shares one compilation
_SETTINGS = ("zero_inflated", "tolerance", "max_trials")
_statistics_jit = jax.jit(_statistics, static_argnames=("max_trials",))
_fit_statistics_jit = jax.jit(_fit_statistics, static_argnames=_SETTINGS[:2])
_fit_prompts_jit = jax.jit(_fit, static_argnames=_SETTINGS)


def fit_counts(successes, trials, **settings):
    """The fit to one data set, ``(BetaBinomialFit, SABERFitInfo)``; ``settings`` as checked by
    the public entry point (``zero_inflated``, ``max_iterations``, ``tolerance``,
    ``max_trials``). Called eagerly: statistics and solver compile separately, so the solver's
    compilation is shared by every data set with the same trial bound."""
    max_trials = settings.pop("max_trials")
    if max_trials is None:
        return _fit_prompts_jit(successes, trials, max_trials=None, **settings)
    return _fit_statistics_jit(_statistics_jit(successes, trials, max_trials), **settings)


def resample(key, successes, trials, num_resamples):
    """``num_resamples`` resamples of the ``m`` prompts with replacement: ``(B, m)`` successes and
    trials. The same key gives the same resamples (the estimators are evaluated on those fitted)."""
    index = jax.random.randint(key, (num_resamples, successes.shape[0]), 0, successes.shape[0])
    return successes[index], trials[index]


@functools.partial(jax.jit, static_argnames=("num_resamples", "progress", *_SETTINGS))
def fit_resamples(key, successes, trials, *, num_resamples, progress=None, **settings):
    """The fits to :func:`resample`'s resamples, as one ``vmap`` (in blocks with ``progress``):
    ``(BetaBinomialFit, SABERFitInfo)`` with leading axis ``num_resamples``."""
    c, n = resample(key, successes, trials, num_resamples)
    return vmap_in_blocks(functools.partial(_fit, **settings), c, n, progress=progress)
