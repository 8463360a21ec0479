"""SABER: attack success at large N from a small budget, under a Beta model of per-prompt risk.

Prompt ``i`` is attacked ``n_i`` times and broken ``c_i`` times. SABER models
``c_i | θ_i ~ Bin(n_i, θ_i)`` with ``θ_i ~ Beta(α, β)`` (conjugate to the Bernoulli), fits
``(α, β)`` by beta-binomial maximum likelihood and extrapolates in closed form (*SABER:
scaling-aware Best-of-N estimation of jailbreak risk*, NeurIPS 2026; the closed forms below are
exact consequences of the model):

* **population** — a new prompt from the same population, ``N`` attempts (:func:`asr_at_n`):
  :math:`\\mathrm{ASR@N} = (1 − π_0)(1 − B(α, β + N)/B(α, β))`, computed in log space with
  ``betaln``. Its survival decays like :math:`Γ(α + β)/Γ(β)·N^{−α}`: a small α means slow risk
  growth.
* **these prompts, N fresh attempts each** (:func:`asr_conditional`): the posterior
  :math:`θ_i | c_i ~ \\mathrm{Beta}(α + c_i, β + n_i − c_i)` gives
  :math:`1 − B(α + c_i, β + n_i − c_i + N)/B(α + c_i, β + n_i − c_i)` per prompt.
* **these prompts, N attempts in total, the observed n_i counted** (:func:`asr_anchored`, the
  "anchored" estimator): a prompt already broken counts 1, an unbroken one
  :math:`1 − B(α, β + N)/B(α, β + n_i)`. It equals the observed fraction of broken prompts at
  ``N = n_i``. The same number estimates the *population* ASR@N (each term has expectation
  ``S(N)`` under the model), anchored at the observed ASR@n.

With zero inflation a fraction π₀ of prompts is unbreakable (``θ = 0``): ASR tends to ``1 − π₀``,
and prompts without a success are unbreakable with posterior probability
``π₀/(π₀ + (1 − π₀)·B(α, β + n_i)/B(α, β))``.

Also: :func:`budget_at` (the least ``N`` with ASR@N ≥ τ, by integer bisection),
:func:`unbiased_asr_at_k` (the unbiased pass@k estimator of Chen et al. 2021),
:func:`bootstrap_fits` and :func:`bootstrap_asr` (prompt-resampling intervals, one ``vmap``).

This module holds the closed forms, the pass@k estimator and the public entry points (they check
their arguments); the fit's likelihood, its L-BFGS loop and the bootstrap resampling live in
:mod:`jaxsample.risk._betabinomial_fit`.

Counts may be integer or floating arrays; results are floating (the counts' dtype, or the default
float dtype for integer counts). Use float64 when ASR values below ~1e-4 matter (see
:func:`jaxsample.kernels.betabinomial.log_survival`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_int,
    check_key,
    check_progress,
    common_float_dtype,
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.kernels import betabinomial as bb
from jaxsample.kernels.roots import bisect
from jaxsample.kernels.solver import SolverStats
from jaxsample.risk._betabinomial_fit import (
    MAX_COUNT_TRIALS,
    BetaBinomialFit,
    SABERFitInfo,
    fit_counts,
    fit_resamples,
    resample,
)

__all__ = [
    "UNREACHABLE",
    "ASRInterval",
    "BetaBinomialFit",
    "SABERBudgetInfo",
    "SABERFitInfo",
    "SABERForecastInfo",
    "SABERIntervalInfo",
    "SABERPromptInfo",
    "asr_anchored",
    "asr_at_n",
    "asr_conditional",
    "bootstrap_asr",
    "bootstrap_fits",
    "budget_at",
    "fit_beta_binomial",
    "unbiased_asr_at_k",
]

UNREACHABLE = -1
"""What :func:`budget_at` returns when τ is not reached within ``max_budget`` attempts (in
particular whenever ``τ >= 1 − π₀``, which no budget reaches)."""



class ASRInterval(NamedTuple):
    """A bootstrap interval of an ASR@N estimate.

    Attributes:
        estimate: the estimate from the fit to all prompts (shape of ``n``).
        lower: the ``(1 − level)/2`` quantile of the bootstrap replicates.
        upper: the ``(1 + level)/2`` quantile.
    """

    estimate: jax.Array
    lower: jax.Array
    upper: jax.Array


class SABERIntervalInfo(NamedTuple):
    """What :func:`bootstrap_asr` reports besides the interval.

    Attributes:
        fit: the :class:`BetaBinomialFit` to all prompts.
        solver: :class:`~jaxsample.SolverStats` of that fit.
        converged_fraction: fraction of bootstrap fits that converged.
        nonfinite: the fit, an estimate or a replicate is not finite.
    """

    fit: BetaBinomialFit
    solver: SolverStats
    converged_fraction: jax.Array
    nonfinite: jax.Array


class SABERForecastInfo(NamedTuple):
    """What :func:`asr_at_n` reports besides ASR@N.

    Attributes:
        log_survival: ``log B(α, β + N)/B(α, β)``, the log-probability that a breakable prompt
            resists ``N`` attempts (accurate where ASR@N rounds to ``1 − π₀``).
        nonfinite: an ASR@N is not finite.
    """

    log_survival: jax.Array
    nonfinite: jax.Array


class SABERPromptInfo(NamedTuple):
    """What the per-prompt estimators (:func:`asr_conditional`, :func:`asr_anchored`,
    :func:`unbiased_asr_at_k`) report besides the mean over prompts.

    Attributes:
        per_prompt: the value of each prompt, of shape ``n.shape + (m,)`` (``k.shape + (m,)``).
        nonfinite: a per-prompt value is not finite.
    """

    per_prompt: jax.Array
    nonfinite: jax.Array


class SABERBudgetInfo(NamedTuple):
    """How the integer bisection of :func:`budget_at` ended.

    Attributes:
        asr: ASR@N at the returned budget (at ``max_budget`` where τ is unreachable).
        solver: :class:`~jaxsample.SolverStats`: ``bit_length(max_budget)`` bisection steps;
            ``successful`` where τ is reached, ``max_iterations_reached`` where it is not within
            ``max_budget`` attempts (raise ``max_budget``, unless ``τ >= 1 − π₀``, which no
            budget reaches).
        nonfinite: an ASR value is not finite.
    """

    asr: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


# ----------------------------------------------------------------------------------------------
# validation


def _check_real(name, value, **bounds):
    """A finite real array of any shape (bounds and whole numbers as :func:`check_array`)."""
    return check_array(name, value, kind="numeric", finite=True, **bounds)


def _check_counts(successes, trials):
    successes = check_array("successes", successes, ndim=1, kind="numeric", min_rows=1)
    trials = check_array("trials", trials, kind="numeric")
    if trials.ndim > 1 or (trials.ndim == 1 and trials.shape != successes.shape):
        raise ValueError(f"trials must be a scalar or have the shape of successes "
                         f"{successes.shape}, got shape {trials.shape}")
    _check_real("successes", successes, lower=0, integer_valued=True)
    _check_real("trials", trials, lower=1, integer_valued=True)
    if is_concrete((successes, trials)):
        bad = np.asarray(successes, np.float64) > np.asarray(trials, np.float64)
        if np.any(bad):
            raise ValueError("successes must be <= trials; prompt "
                             f"{int(np.flatnonzero(np.broadcast_to(bad, successes.shape))[0])} "
                             "has more successes than trials")
    dtype = common_float_dtype(successes=successes, trials=trials)
    trials = jnp.broadcast_to(trials.astype(dtype), successes.shape)
    return successes.astype(dtype), trials


def _check_beta(alpha, beta, pi0, dtype_values):
    _check_real("alpha", alpha, lower=0, lower_inclusive=False)
    _check_real("beta", beta, lower=0, lower_inclusive=False)
    _check_real("pi0", pi0, lower=0, upper=1, upper_inclusive=False)
    dtype = common_float_dtype(alpha=alpha, beta=beta, pi0=pi0, **dtype_values)
    return tuple(jnp.asarray(v).astype(dtype) for v in (alpha, beta, pi0)), dtype


# ----------------------------------------------------------------------------------------------
# closed forms


def asr_at_n(n, alpha, beta, pi0=0.0) -> tuple[jax.Array, SABERForecastInfo]:
    """Population attack success within ``N`` attempts: ``(1 − π₀)(1 − B(α, β + N)/B(α, β))``.

    The success rate, within ``N`` fresh attempts, on a new prompt drawn from the population whose
    success probabilities are ``θ ~ Beta(α, β)`` (with probability π₀ the prompt is unbreakable).
    ASR@1 = ``(1 − π₀)·α/(α + β)``; ASR@N increases to ``1 − π₀``.

    Args:
        n: attempts ``N >= 0`` (int or float, any shape).
        alpha: α > 0.
        beta: β > 0.
        pi0: π₀ in ``[0, 1)``.

    All arguments broadcast against each other (give them the same rank, e.g.
    ``n[:, None], alpha[None, :]`` for a table of curves).

    Returns:
        ``(asr, info)``: ASR@N, floating, of the broadcast shape, and a
        :class:`SABERForecastInfo`.

    Example:
        >>> import jax.numpy as jnp
        >>> asr, info = asr_at_n(jnp.array([1, 10, 1000]), 0.3, 6.0)
        >>> [round(float(v), 4) for v in asr]
        [0.0476, 0.2631, 0.7886]
    """
    n = _check_real("n", n, lower=0)
    (alpha, beta, pi0), dtype = _check_beta(alpha, beta, pi0, {"n": n})
    return _asr_at_n(n.astype(dtype), alpha, beta, pi0)


@jax.jit
def _asr_at_n(n, alpha, beta, pi0):
    with jax.named_scope("asr_at_n"):
        n, alpha, beta, pi0 = jnp.broadcast_arrays(n, alpha, beta, pi0)
        log_survival = bb.log_survival(n, alpha, beta)
        asr = (1 - pi0) * -jnp.expm1(log_survival)
        return asr, SABERForecastInfo(log_survival, ~jnp.all(jnp.isfinite(asr)))


def _log_unbreakable(successes, trials, alpha, beta, pi0):
    """log P(unbreakable | c_i) under zero inflation (−inf for prompts with a success)."""
    log_pi0 = jnp.log(pi0)
    log_zero = jnp.logaddexp(log_pi0, jnp.log1p(-pi0) + bb.log_survival(trials, alpha, beta))
    return jnp.where(successes > 0, -jnp.inf, log_pi0 - log_zero)


def _per_prompt(n, successes, trials, alpha, beta, pi0, anchored):
    """Per-prompt conditional (fresh) or anchored (total-budget) ASR, shape ``n.shape + (m,)``."""
    n = n[..., None]
    successes, trials = (x.reshape((1,) * (n.ndim - 1) + x.shape) for x in (successes, trials))
    breakable = -jnp.expm1(_log_unbreakable(successes, trials, alpha, beta, pi0))
    if anchored:
        more = jnp.maximum(n - trials, jnp.zeros((), n.dtype))
        value = -jnp.expm1(bb.log_survival(more, alpha, beta + trials))
        return jnp.where(successes > 0, jnp.ones_like(value), breakable * value)
    return breakable * -jnp.expm1(bb.log_survival(n, alpha + successes,
                                                  beta + trials - successes))


def _prompt_estimate(n, successes, trials, alpha, beta, pi0, anchored):
    n = _check_real("n", n, lower=0)
    successes, trials = _check_counts(successes, trials)
    (alpha, beta, pi0), dtype = _check_beta(alpha, beta, pi0, {"successes": successes})
    for arg, value in (("alpha", alpha), ("beta", beta), ("pi0", pi0)):
        if value.ndim:
            raise ValueError(f"{arg} must be a scalar (one model; vmap over models), got shape "
                             f"{value.shape}")
    if anchored and is_concrete((n, trials)) and np.any(
            np.asarray(n, np.float64)[..., None] < np.asarray(trials, np.float64)):
        raise ValueError("n must be >= trials for the anchored estimator (it counts the observed "
                         "attempts towards the budget n)")
    return _prompt_core(n.astype(dtype), successes, trials, alpha, beta, pi0,
                        anchored=anchored)


def _mean_over_prompts(values):
    return jnp.mean(values, axis=-1), SABERPromptInfo(values, ~jnp.all(jnp.isfinite(values)))


@functools.partial(jax.jit, static_argnames=("anchored",))
def _prompt_core(n, successes, trials, alpha, beta, pi0, *, anchored):
    with jax.named_scope("asr_anchored" if anchored else "asr_conditional"):
        return _mean_over_prompts(_per_prompt(n, successes, trials, alpha, beta, pi0, anchored))


def asr_conditional(n, successes, trials, alpha, beta, pi0=0.0
                    ) -> tuple[jax.Array, SABERPromptInfo]:
    """ASR of *these* prompts within ``N`` fresh attempts each (empirical-Bayes posterior).

    Per prompt, ``(1 − w_i)·(1 − B(α + c_i, β + n_i − c_i + N)/B(α + c_i, β + n_i − c_i))`` where
    ``w_i`` is the posterior probability that the prompt is unbreakable (0 without zero
    inflation or when ``c_i > 0``). The observed attempts do not count towards ``N``.

    Args:
        n: fresh attempts ``N >= 0`` per prompt (any shape).
        successes: ``(m,)`` successes ``c_i``.
        trials: ``(m,)`` or scalar attempts ``n_i``.
        alpha, beta, pi0: the fitted model (scalars; ``vmap`` over models).

    Returns:
        ``(asr, info)``: the mean over prompts, of shape ``n.shape``, and a
        :class:`SABERPromptInfo` holding the ``n.shape + (m,)`` per-prompt values.

    Example:
        >>> import jax.numpy as jnp
        >>> c, trials = jnp.array([0.0, 1.0, 5.0]), jnp.array(10.0)
        >>> asr, info = asr_conditional(1, c, trials, 1.0, 1.0)  # posterior means (c + 1)/12
        >>> round(float(asr), 4), [round(float(v), 4) for v in info.per_prompt]
        (0.25, [0.0833, 0.1667, 0.5])
    """
    return _prompt_estimate(n, successes, trials, alpha, beta, pi0, anchored=False)


def asr_anchored(n, successes, trials, alpha, beta, pi0=0.0
                 ) -> tuple[jax.Array, SABERPromptInfo]:
    """Anchored ASR@N: ``N`` attempts in total per prompt, the observed ``n_i`` among them.

    A prompt with ``c_i > 0`` is already broken and counts 1; an unbroken one counts
    ``(1 − w_i)(1 − B(α, β + N)/B(α, β + n_i))``, the posterior probability that one of the
    remaining ``N − n_i`` attempts succeeds. At ``N = n_i`` this is the observed fraction of broken
    prompts. Targets: the realised ASR@N of *these* prompts with the observed attempts counted,
    and (the same number; each unbroken term has expectation ``S(N)/S(n_i)·S(n_i)``) the
    population ASR@N anchored at the observed ASR@n.

    Args:
        n: total attempts ``N >= n_i`` (any shape).
        successes, trials, alpha, beta, pi0: as in :func:`asr_conditional`.

    Returns:
        ``(asr, info)`` as in :func:`asr_conditional`.

    Example:
        >>> import jax.numpy as jnp
        >>> c, trials = jnp.array([0.0, 0.0, 3.0, 1.0]), jnp.array(200.0)
        >>> asr, info = asr_anchored(200, c, trials, 0.3, 6.0)
        >>> float(asr)
        0.5
    """
    return _prompt_estimate(n, successes, trials, alpha, beta, pi0, anchored=True)


def budget_at(tau, alpha, beta, pi0=0.0, *, max_budget: int | None = None
              ) -> tuple[jax.Array, SABERBudgetInfo]:
    """Budget@τ: the least ``N >= 1`` with ``asr_at_n(N, α, β, π₀) >= τ``, by integer bisection.

    ASR@N is increasing in ``N``, so bisection on the integers ``[0, max_budget]`` keeps
    ``ASR@lo < τ <= ASR@hi`` and ends with ``ASR@Budget >= τ > ASR@(Budget − 1)``, in
    ``bit_length(max_budget)`` steps. For a per-prompt budget pass the posterior
    ``(α + c_i, β + n_i − c_i)`` (fresh attempts).

    Args:
        tau: risk level τ in ``(0, 1)`` (any shape; broadcasts with the others).
        alpha, beta: the Beta law.
        pi0: π₀ in ``[0, 1)``.
        max_budget: the largest budget searched; default ``2**31 − 1`` (``2**53`` with 64-bit
            types). Budgets above ``2**24`` are resolved only to float32's integer spacing in
            float32.

    Returns:
        ``(budget, info)``: integer budgets (int32, or int64 with 64-bit types),
        :data:`UNREACHABLE` (−1) where τ is not reached within ``max_budget`` attempts, in
        particular wherever ``τ >= 1 − π₀``; and a :class:`SABERBudgetInfo` (the ASR at the
        budget, the search's :class:`~jaxsample.SolverStats`, unsuccessful where τ was not
        reached). An eager call with an unreached τ warns once.

    Example:
        >>> budget, info = budget_at(0.5, 0.3, 6.0)
        >>> int(budget), round(float(info.asr), 4)
        (52, 0.5017)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:  # eagerly, one warning says so
        ...     warnings.simplefilter("always")
        ...     budget, info = budget_at(0.9, 0.3, 6.0, pi0=0.2)
        >>> int(budget), bool(info.solver.converged), len(caught)
        (-1, False, 1)
    """
    tau = _check_real("tau", tau, lower=0, upper=1, lower_inclusive=False,
                      upper_inclusive=False)
    (alpha, beta, pi0), dtype = _check_beta(alpha, beta, pi0, {"tau": tau})
    int_dtype = jax.dtypes.canonicalize_dtype(jnp.int64)
    limit = 2**31 - 1 if int_dtype == jnp.int32 else 2**53
    max_budget = check_int("max_budget", limit if max_budget is None else max_budget, 1, limit)
    budget, info = _budget_at(tau.astype(dtype), alpha, beta, pi0, max_budget=max_budget,
                              int_dtype=int_dtype)
    _warn_unreached(info.solver, max_budget)
    return budget, info


def _warn_unreached(stats, max_budget):
    """One eager warning when some τ is not reached (the iteration-cap message of
    :class:`~jaxsample.RESULTS` would name the wrong fix: the search itself always ends)."""
    import warnings

    converged = stats.converged
    if not is_concrete(converged) or bool(jnp.all(converged)):
        return
    failed = ~np.asarray(converged)
    count = f" ({int(failed.sum())} of {failed.size})" if failed.size > 1 else ""
    warnings.warn(f"budget_at: τ not reached within max_budget={max_budget} attempts{count}; "
                  f"{UNREACHABLE} returned there. Raise max_budget, or lower τ below 1 − π₀, "
                  "which no budget reaches", RuntimeWarning, stacklevel=3)


@functools.partial(jax.jit, static_argnames=("max_budget", "int_dtype"))
def _budget_at(tau, alpha, beta, pi0, *, max_budget, int_dtype):
    with jax.named_scope("budget_at"):
        tau, alpha, beta, pi0 = jnp.broadcast_arrays(tau, alpha, beta, pi0)
        search = functools.partial(_smallest_budget, max_budget=max_budget, int_dtype=int_dtype)
        budget, asr = jax.vmap(search)(tau.ravel(), alpha.ravel(), beta.ravel(), pi0.ravel())
        budget, asr = budget.reshape(tau.shape), asr.reshape(tau.shape)
        reached = budget != UNREACHABLE
        steps = jnp.full(tau.shape, int(max_budget).bit_length(), jnp.int32)
        nonfinite = ~jnp.isfinite(asr)
        solver = SolverStats.of(steps, converged=reached, nonfinite=nonfinite)
        return budget, SABERBudgetInfo(asr, solver, jnp.any(nonfinite))


def _smallest_budget(tau, alpha, beta, pi0, *, max_budget, int_dtype):
    def asr(n):
        return (1 - pi0) * -jnp.expm1(bb.log_survival(n.astype(alpha.dtype), alpha, beta))

    lo, hi = jnp.zeros((), int_dtype), jnp.asarray(max_budget, int_dtype)
    _, hi = bisect(lambda n: ~(asr(n) >= tau), lo, hi,
                   num_iterations=int(max_budget).bit_length())
    at_hi = asr(hi)
    return jnp.where(at_hi >= tau, hi, jnp.asarray(UNREACHABLE, int_dtype)), at_hi


def unbiased_asr_at_k(successes, trials, k) -> tuple[jax.Array, SABERPromptInfo]:
    """The unbiased ASR@k (pass@k) estimator: per prompt ``1 − C(n_i − c_i, k)/C(n_i, k)``.

    For ``c ~ Bin(n, θ)`` and ``k <= n`` its expectation is exactly ``1 − (1 − θ)^k``
    (Chen et al. 2021, *Evaluating large language models trained on code*). Computed in log space
    through :func:`jaxsample.kernels.betabinomial.log_binomial_ratio`; it is 1 when
    ``n_i − c_i < k``.

    Args:
        successes: ``(m,)`` successes.
        trials: ``(m,)`` or scalar attempts.
        k: attempts ``1 <= k <= min(trials)`` (any shape).

    Returns:
        ``(asr, info)``: the mean over prompts, of shape ``k.shape``, and a
        :class:`SABERPromptInfo` holding the ``k.shape + (m,)`` per-prompt values.

    Example:
        >>> import jax.numpy as jnp
        >>> asr, info = unbiased_asr_at_k(jnp.array([1.0, 3.0]), 4.0, 2)  # (1/2 + 1)/2
        >>> round(float(asr), 4), [round(float(v), 4) for v in info.per_prompt]
        (0.75, [0.5, 1.0])
    """
    successes, trials = _check_counts(successes, trials)
    k = _check_real("k", k, lower=1, integer_valued=True)
    if is_concrete((k, trials)) and np.any(np.asarray(k, np.float64) > np.min(np.asarray(trials))):
        raise ValueError(f"k must be <= every prompt's trials (min {np.min(np.asarray(trials))}), "
                         f"got {np.max(np.asarray(k))}")
    return _unbiased_asr_at_k(successes, trials, k.astype(successes.dtype))


@jax.jit
def _unbiased_asr_at_k(successes, trials, k):
    with jax.named_scope("unbiased_asr_at_k"):
        k = k[..., None]
        successes, trials = (x.reshape((1,) * (k.ndim - 1) + x.shape) for x in (successes, trials))
        return _mean_over_prompts(-jnp.expm1(bb.log_binomial_ratio(trials - successes, trials,
                                                                   k)))


# ----------------------------------------------------------------------------------------------
# fitting (the likelihood, its solver and the resampling: :mod:`jaxsample.risk._betabinomial_fit`)


def _solver_settings(successes, trials, zero_inflated, max_iterations, tolerance, max_trials):
    """Checked static settings of a fit, as keyword arguments of ``fit_counts``."""
    max_iterations = check_int("max_iterations", max_iterations, 1)
    if tolerance is None:
        tolerance = 1e-9 if successes.dtype == jnp.float64 else 1e-4
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not (
            0 < tolerance < 1):
        raise ValueError(f"tolerance must be a float in (0, 1), got {tolerance!r}")
    max_trials = check_int("max_trials", max_trials, 1, allow_none=True)
    if is_concrete(trials):
        largest = int(np.max(np.asarray(trials)))
        if max_trials is not None and largest > max_trials:
            raise ValueError(f"max_trials must be >= every prompt's trials, got {max_trials} "
                             f"< {largest}")
        max_trials = largest if max_trials is None else max_trials
    if max_trials is not None and max_trials > MAX_COUNT_TRIALS:
        max_trials = None
    return dict(zero_inflated=bool(zero_inflated), max_iterations=max_iterations,
                tolerance=float(tolerance), max_trials=max_trials)


def fit_beta_binomial(successes, trials, *, zero_inflated: bool = False,
                      max_iterations: int = 100, tolerance: float | None = None,
                      max_trials: int | None = None
                      ) -> tuple[BetaBinomialFit, SABERFitInfo]:
    r"""Beta-binomial maximum likelihood for per-prompt success counts.

    Maximises :math:`ℓ(α, β) = Σ_i \log\binom{n_i}{c_i} + \log B(c_i + α, n_i − c_i + β) −
    \log B(α, β)` (with zero inflation, per prompt
    ``logaddexp(log π₀ + log 1[c_i = 0], log(1 − π₀) + log BB(c_i))``) over the logit of the mean
    ``α/(α + β)``, the log of the concentration ``α + β`` (and the logit of π₀), which conditions
    the problem and puts the binomial limit at infinity. Starts from the method of moments and
    runs ``optax.lbfgs`` (zoom line search with approximate Wolfe conditions) on the mean negative
    log-likelihood per prompt until its gradient is below ``tolerance`` (why this loop and not
    ``optimistix.BFGS``: :mod:`jaxsample.risk._betabinomial_fit`).

    The likelihood is evaluated from count statistics — ``Σ_{j<c} log(α + j)`` sums, so only the
    numbers of prompts with ``c_i > j``, ``n_i − c_i > j`` and ``n_i > j`` enter, ``O(max n)`` per
    evaluation whatever the number of prompts — when the largest number of trials is known
    statically (``trials`` concrete, or ``max_trials`` given) and at most 100 000; otherwise
    (traced ``trials`` without ``max_trials``) from log-beta functions per prompt. Both give the
    same likelihood. Jittable; ``vmap`` over models (pass ``max_trials``) or bootstrap resamples
    (:func:`bootstrap_fits`).

    With no success at all the likelihood increases as the mean tends to 0: the fit returns a
    tiny α (what the data support, ASR ≈ 0). Under-dispersed counts (no prompt heterogeneity)
    push the concentration towards the binomial limit: α and β grow large together.

    Args:
        successes: ``(m,)`` successes ``c_i`` (whole numbers ``>= 0``).
        trials: ``(m,)`` or scalar attempts ``n_i >= max(1, c_i)``.
        zero_inflated: also fit the fraction π₀ of unbreakable prompts.
        max_iterations: L-BFGS iteration cap.
        tolerance: stop when every gradient entry of the mean negative log-likelihood per prompt
            is below this (default 1e-9 in float64, 1e-4 in float32).
        max_trials: a static bound on ``trials`` (needed for the count-statistics likelihood
            only when ``trials`` is traced).

    Returns:
        ``(BetaBinomialFit, SABERFitInfo)``.

    Example:
        >>> import numpy as np
        >>> c = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16,
        ...               19, 20])  # successes of 24 prompts in 20 attempts each
        >>> fit, info = fit_beta_binomial(c, 20)
        >>> bool(info.solver.converged), round(float(fit.alpha), 2), round(float(fit.beta), 2)
        (True, 0.37, 0.88)
    """
    successes, trials = _check_counts(successes, trials)
    settings = _solver_settings(successes, trials, zero_inflated, max_iterations, tolerance,
                                max_trials)
    fit, info = fit_counts(successes, trials, **settings)
    warn_if_unsuccessful(info.solver, "fit_beta_binomial's L-BFGS fit")
    return fit, info



def bootstrap_fits(key, successes, trials, *, num_resamples: int, zero_inflated: bool = False,
                   max_iterations: int = 100, tolerance: float | None = None,
                   max_trials: int | None = None, progress=None
                   ) -> tuple[BetaBinomialFit, SABERFitInfo]:
    """Fits to ``num_resamples`` bootstrap resamples of the prompts, as one ``vmap``.

    Each resample draws ``m`` prompts with replacement (their ``(c_i, n_i)`` pairs).

    Args:
        key: PRNG key.
        successes, trials, zero_inflated, max_iterations, tolerance, max_trials: as in
            :func:`fit_beta_binomial`.
        num_resamples: number of resamples ``B``.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`): the resamples are
            then fitted in 10 blocks, one report per block (the same fits, to round-off).

    Returns:
        ``(BetaBinomialFit, SABERFitInfo)`` whose fields have leading axis ``B``.

    Example:
        >>> import jax, numpy as np
        >>> c = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16,
        ...               19, 20])
        >>> fits, infos = bootstrap_fits(jax.random.key(0), c, 20, num_resamples=4)
        >>> fits.alpha.shape, bool(infos.solver.converged.all())
        ((4,), True)
    """
    key = check_key("key", key)
    successes, trials = _check_counts(successes, trials)
    num_resamples = check_int("num_resamples", num_resamples, 1)
    progress = check_progress(progress)
    settings = _solver_settings(successes, trials, zero_inflated, max_iterations, tolerance,
                                max_trials)
    fits, infos = fit_resamples(key, successes, trials, num_resamples=num_resamples,
                                  progress=progress, **settings)
    warn_if_unsuccessful(infos.solver, "bootstrap_fits' L-BFGS fits")
    return fits, infos


_ESTIMATORS = ("population", "conditional", "anchored")


def _estimate(estimator, n, successes, trials, fit):
    if estimator == "population":
        return (1 - fit.pi0) * -jnp.expm1(bb.log_survival(n, fit.alpha, fit.beta))
    values = _per_prompt(n, successes, trials, fit.alpha, fit.beta, fit.pi0,
                         anchored=estimator == "anchored")
    return jnp.mean(values, axis=-1)


@functools.partial(jax.jit, static_argnames=("estimator", "num_resamples"))
def _interval(key, n, successes, trials, level, full, full_info, fits, fit_infos, *, estimator,
              num_resamples):
    with jax.named_scope("bootstrap_asr"):
        dtype = successes.dtype
        estimate = _estimate(estimator, n, successes, trials, full)
        c, t = resample(key, successes, trials, num_resamples)  # the resamples of the fits
        values = jax.vmap(lambda c_b, t_b, fit_b: _estimate(estimator, n, c_b, t_b, fit_b))(
            c, t, fits)
        quantiles = jnp.quantile(values, jnp.stack([(1 - level) / 2, (1 + level) / 2]), axis=0)
        nonfinite = ~(jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(estimate))) | (
            full_info.nonfinite)
        interval = ASRInterval(estimate=estimate, lower=quantiles[0], upper=quantiles[1])
        return interval, SABERIntervalInfo(
            fit=full, solver=full_info.solver,
            converged_fraction=jnp.mean(fit_infos.solver.converged.astype(dtype)),
            nonfinite=nonfinite)


def bootstrap_asr(key, n, successes, trials, *, estimator: str = "anchored",
                  num_resamples: int = 1000, level=0.95, zero_inflated: bool = False,
                  max_iterations: int = 100, tolerance: float | None = None,
                  max_trials: int | None = None, progress=None
                  ) -> tuple[ASRInterval, SABERIntervalInfo]:
    """A percentile-bootstrap interval of an ASR@N estimate (prompts resampled, model refitted).

    Each replicate resamples the prompts, refits the model (:func:`bootstrap_fits` with the same
    key) and evaluates the estimator on the resampled prompts, so the interval covers the fit's
    uncertainty and the prompt sampling.

    Args:
        key: PRNG key.
        n: attempts ``N`` (any shape; for ``"anchored"`` ``N >= trials``).
        successes, trials: as in :func:`fit_beta_binomial`.
        estimator: ``"population"`` (:func:`asr_at_n`), ``"conditional"``
            (:func:`asr_conditional`) or ``"anchored"`` (:func:`asr_anchored`).
        num_resamples: bootstrap replicates.
        level: central coverage in ``(0, 1)`` (a traced value is allowed).
        zero_inflated, max_iterations, tolerance, max_trials: as in :func:`fit_beta_binomial`.
        progress: an optional meter reporting the bootstrap fits, as in :func:`bootstrap_fits`.

    Returns:
        ``(ASRInterval, SABERIntervalInfo)``.

    Example:
        >>> import jax, numpy as np
        >>> c = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16,
        ...               19, 20])
        >>> out, info = bootstrap_asr(jax.random.key(0), 100, c, 20, num_resamples=4)
        >>> bool(out.lower <= out.estimate <= out.upper)
        True
    """
    key = check_key("key", key)
    estimator = check_choice("estimator", estimator, _ESTIMATORS)
    n = _check_real("n", n, lower=0)
    successes, trials = _check_counts(successes, trials)
    level = _check_real("level", level, lower=0, upper=1, lower_inclusive=False,
                        upper_inclusive=False)
    if estimator == "anchored" and is_concrete((n, trials)) and np.any(
            np.asarray(n, np.float64)[..., None] < np.asarray(trials, np.float64)):
        raise ValueError("n must be >= trials for the anchored estimator")
    num_resamples = check_int("num_resamples", num_resamples, 1)
    progress = check_progress(progress)
    settings = _solver_settings(successes, trials, zero_inflated, max_iterations, tolerance,
                                max_trials)
    full, full_info = fit_counts(successes, trials, **settings)
    fits, fit_infos = fit_resamples(key, successes, trials, num_resamples=num_resamples,
                                      progress=progress, **settings)
    dtype = successes.dtype
    interval, info = _interval(key, n.astype(dtype), successes, trials, level.astype(dtype),
                               full, full_info, fits, fit_infos, estimator=estimator,
                               num_resamples=num_resamples)
    # one message: the fit to all prompts first, else the bootstrap fits
    if is_concrete(full_info.solver.converged) and not bool(full_info.solver.converged):
        warn_if_unsuccessful(full_info.solver, "bootstrap_asr's fit to all prompts")
    else:
        warn_if_unsuccessful(fit_infos.solver, "bootstrap_asr's bootstrap fits")
    return interval, info
