"""Best-of-N under an imperfect reward model: exact accuracy and extreme-value tail competition.

``N`` i.i.d. responses are correct with probability ``p``; rewards are ``R ~ F_c`` for correct and
``R ~ F_w`` for incorrect ones; Best-of-N keeps the response with the largest reward. With the
pooled law ``G = pF_c + (1 − p)F_w`` and ``h(x) = p f_c(x)/g(x) = P(correct | R = x)``,

.. math::

    \\mathrm{Acc}(N) = N\\!\\int p f_c(x) G(x)^{N−1} dx = E[h(M_N)],

where ``M_N`` is the largest of the ``N`` rewards (*Best-of-N under incomplete reward models:
extreme-value tail competition*, NeurIPS 2026; the formulas are exact consequences of the set-up).
So Acc(1) = p, ``F_c = F_w`` gives ``p`` for every N, and as ``N → ∞`` accuracy follows the upper
tails: it tends to 1 when the correct tail dominates (``\\bar F_w/\\bar F_c → 0``), to 0 when the
incorrect one does (more samples eventually hurt: reward hacking), and to ``pc/(pc + 1 − p)`` in
the critical case ``\\bar F_c/\\bar F_w → c``.

* :func:`bon_accuracy`: Acc(N) by quadrature over the quantile of ``M_N`` (exact up to a
  quadrature error it estimates), for any N (``10^9`` is as cheap as 1).
* :func:`bon_simulate`: Monte Carlo, by drawing the maxima of each class directly (any N) or all
  ``N`` rewards.
* :func:`bon_pool_accuracy`: the exact expected accuracy of Best-of-N drawn without replacement
  from a scored, labelled pool (real reward-model data).
* :func:`tail_regime` and :func:`tail_tension`: peaks-over-threshold GPD fits of each class's
  upper tail, the regime they imply, and the hazard gap ``λ_w − λ_c`` at the typical maximum of N
  rewards, which says whether more samples help (> 0) or hurt (< 0).

Reward laws (:class:`Normal`, :class:`Gumbel`, :class:`GPD`, :class:`Empirical`) are equinox
Modules exposing ``logpdf``/``logcdf``/``logsf``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm

from jaxsample._checks import (
    check_array,
    check_choice,
    check_int,
    check_key,
    common_float_dtype,
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.kernels.betabinomial import log_binomial_ratio
from jaxsample.kernels.extremes import (
    GPDFit,
    expm1_ratio,
    gpd_fit,
    gpd_hazard,
    gpd_inverse_logsf,
    gpd_logsf,
    log1p_ratio,
)
from jaxsample.kernels.logspace import log1mexp
from jaxsample.kernels.roots import bisect
from jaxsample.kernels.solver import SolverStats
from jaxsample.risk._laws import GPD, Empirical, Gumbel, Normal, RewardLaw

__all__ = [
    "GPD",
    "BoNInfo",
    "BoNPoolInfo",
    "Empirical",
    "Gumbel",
    "Normal",
    "RewardLaw",
    "BoNSimulationInfo",
    "TailRegimeInfo",
    "TailTensionInfo",
    "bon_accuracy",
    "bon_pool_accuracy",
    "bon_simulate",
    "tail_regime",
    "tail_tension",
]


class BoNInfo(NamedTuple):
    """What :func:`bon_accuracy` knows about its own error.

    Attributes:
        error_estimate: ``|A_K − A_{K/2}|``, the difference from the rule with half the nodes
            per segment (an over-estimate of the error of the full rule once it converges).
        nonfinite: any accuracy is not finite.
    """

    error_estimate: jax.Array
    nonfinite: jax.Array


class BoNPoolInfo(NamedTuple):
    """``nonfinite``: an accuracy of :func:`bon_pool_accuracy` is not finite (the sum is exact
    otherwise: no error estimate)."""

    nonfinite: jax.Array


class BoNSimulationInfo(NamedTuple):
    """Monte Carlo error of :func:`bon_simulate`.

    Attributes:
        standard_error: ``√(a(1 − a)/num_trials)`` of the estimate ``a``.
        nonfinite: any simulated reward maximum was NaN.
    """

    standard_error: jax.Array
    nonfinite: jax.Array


class TailRegimeInfo(NamedTuple):
    """What :func:`tail_regime` reports besides the regime.

    Attributes:
        limit_accuracy: ``lim Acc(N)`` implied by the fitted tails.
        threshold: the pooled threshold ``u``.
        correct: :class:`~jaxsample.kernels.extremes.GPDFit` of the correct excesses.
        incorrect: the fit of the incorrect excesses.
        shape_z: z-score of ``ξ_c − ξ_w``.
        scale_z: z-score of ``log σ_c − log σ_w`` (used when the shapes agree and are not
            positive).
        solver: :class:`~jaxsample.SolverStats` of the two GPD fits (likelihood evaluations of
            the grid and golden-section search; unsuccessful when a fit's maximum lies on the
            edge of its search range, ``nonfinite`` when a fit is not finite).
        nonfinite: a fit, the limit or a z-score is not finite.
    """

    limit_accuracy: jax.Array
    threshold: jax.Array
    correct: GPDFit
    incorrect: GPDFit
    shape_z: jax.Array
    scale_z: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


class TailTensionInfo(NamedTuple):
    """What :func:`tail_tension` reports besides the hazard gap.

    Attributes:
        n: the sample counts ``N`` examined.
        level: ``u_N``, the reward exceeded with probability ``1/N`` under the fitted pooled tail
            (the threshold itself where ``1/N`` exceeds the tail mass).
        accuracy: ``q(u_N) = p·\\bar F_c(u_N)/\\bar G(u_N)``, the fraction correct above ``u_N``
            (a tail approximation of Acc(N)).
        helps: ``hazard_gap > 0``: near ``N`` the correct class has the locally heavier tail,
            so more samples raise ``q`` (``d log q/du = ω_w·T``, ``ω_w ∈ (0, 1)``).
        threshold: the pooled threshold of the fits.
        correct: GPD fit of the correct excesses.
        incorrect: GPD fit of the incorrect excesses.
        solver: :class:`~jaxsample.SolverStats` of the two GPD fits, as in
            :class:`TailRegimeInfo`.
        nonfinite: any ``accuracy`` or ``level`` is not finite.
    """

    n: jax.Array
    level: jax.Array
    accuracy: jax.Array
    helps: jax.Array
    threshold: jax.Array
    correct: GPDFit
    incorrect: GPDFit
    solver: SolverStats
    nonfinite: jax.Array


# ----------------------------------------------------------------------------------------------
# validation


def _check_law(name, law):
    if not isinstance(law, RewardLaw):
        raise TypeError(f"{name} must be a reward law (jaxsample.risk.Normal, Gumbel, GPD or "
                        f"Empirical), got {type(law).__name__}")
    return law


def _check_probability(name, value):
    return check_array(name, value, shape=(), kind="numeric", lower=0, upper=1)


def _check_n(value, *, integer=False):
    return check_array("n", value, kind="numeric", finite=True, lower=1, integer_valued=integer)


def _check_scores_labels(scores, labels):
    scores = check_array("scores", scores, ndim=1, finite=True, min_rows=2)
    labels = check_array("labels", labels, shape=(scores.shape[0],), kind=None)
    if not (jnp.issubdtype(labels.dtype, jnp.number) or labels.dtype == jnp.bool_):
        raise TypeError(f"labels must be 0/1 numbers or booleans, got dtype {labels.dtype}")
    if is_concrete(labels) and labels.dtype != jnp.bool_:
        host = np.asarray(labels, np.float64)
        if not np.all((host == 0) | (host == 1)):
            raise ValueError("labels must be 0 (incorrect) or 1 (correct); got other values")
    return scores, labels.astype(jnp.bool_)


# ----------------------------------------------------------------------------------------------
# quadrature


def _log_r(q):
    """``log(−log1p(−q)/q)``: turns a survival level into ``log(−log G)``."""
    return jnp.log(log1p_ratio(-q))


def _mixture_logsf(x, log_p, log_q, correct, incorrect):
    return jnp.logaddexp(log_p + correct.logsf(x), log_q + incorrect.logsf(x))


def _iterations(dtype):
    return 64 if dtype == jnp.float64 else 36


def _invert_logsf(logsf, log_sf, lo, hi, iterations):
    """``x`` with ``logsf(x) = log_sf`` for a decreasing ``logsf``, bisecting on ``asinh x``
    (relative precision for large ``|x|``, absolute near 0)."""
    big = jnp.asarray(jnp.finfo(log_sf.dtype).max ** 0.5, log_sf.dtype)
    a = jnp.arcsinh(jnp.clip(jnp.minimum(lo, hi), -big, big))
    b = jnp.arcsinh(jnp.clip(jnp.maximum(lo, hi), -big, big))
    # survival still above the level: the point lies to the right
    a, b = bisect(lambda mid: logsf(jnp.sinh(mid)) > log_sf, a, b, num_iterations=iterations)
    return jnp.sinh(0.5 * (a + b))


def _mixture_quantile(log_sf, log_p, log_q, correct, incorrect):
    lo_c, hi_c = correct.bracket(log_sf)
    lo_w, hi_w = incorrect.bracket(log_sf)
    # G's level-q point lies between the classes' level-q points
    lo, hi = jnp.minimum(lo_c, lo_w), jnp.maximum(hi_c, hi_w)
    return _invert_logsf(lambda x: _mixture_logsf(x, log_p, log_q, correct, incorrect), log_sf,
                         lo, hi, _iterations(log_sf.dtype))


def _posterior_correct(x, log_p, log_q, correct, incorrect):
    """``h(x) = P(correct | R = x)``; ``p`` where neither class has density (outside both
    supports, which the maximum's quantile never reaches)."""
    a, b = log_p + correct.logpdf(x), log_q + incorrect.logpdf(x)
    none = jnp.isneginf(a) & jnp.isneginf(b)
    return jnp.where(none, jnp.exp(log_p), jax.nn.sigmoid(jnp.where(none, 0.0, a - b)))


@functools.cache
def _legendre(num_nodes):
    nodes, weights = np.polynomial.legendre.leggauss(num_nodes)
    return nodes, weights


# the integration variable s = log t, t = −N log G(M_N) ~ Exp(1); fixed interior breakpoints
# where the weight exp(s − e^s) changes character (its mode is at s = 0)
_FIXED_BREAKS = (-12.0, -6.0, -3.0, -1.0, 0.5, 1.5)


def _s_range(dtype):
    eps = float(jnp.finfo(dtype).eps)
    # mass below s_lo is ≈ e^{s_lo}, above s_hi exp(−e^{s_hi}): both below eps/e
    return math.log(eps) - 1.0, math.log(1.0 - math.log(eps))


def _accuracy_one(n, p, correct, incorrect, num_nodes):
    dtype = p.dtype
    log_p, log_q = jnp.log(p), jnp.log1p(-p)
    s_lo, s_hi = _s_range(dtype)
    log_n = jnp.log(n)
    # support ends of either law, mapped to s; segments between them are smooth
    ends = jnp.concatenate([correct.breakpoints(dtype), incorrect.breakpoints(dtype)])
    finite = jnp.isfinite(ends)
    ends_safe = jnp.where(finite, ends, jnp.zeros_like(ends))
    level = _mixture_logsf(ends_safe, log_p, log_q, correct, incorrect)
    s_ends = log_n + level + _log_r(jnp.exp(level))
    s_ends = jnp.where(finite, jnp.nan_to_num(s_ends, nan=s_hi, posinf=s_hi, neginf=s_lo), s_lo)
    fixed = jnp.asarray([b for b in _FIXED_BREAKS if s_lo < b < s_hi], dtype)
    edges = jnp.sort(jnp.clip(jnp.concatenate(
        [jnp.asarray([s_lo, s_hi], dtype), fixed, s_ends]), s_lo, s_hi))

    def nodes(k):
        x, w = _legendre(k)
        x, w = jnp.asarray(x, dtype), jnp.asarray(w, dtype)
        left, right = edges[:-1, None], edges[1:, None]
        half = 0.5 * (right - left)
        s = (left + half + half * x[None, :]).ravel()
        return s, (half * w[None, :]).ravel() * jnp.exp(s - jnp.exp(s))

    # the full rule and the half rule (for the error estimate) share one quantile solve
    s_fine, w_fine = nodes(num_nodes)
    s_coarse, w_coarse = nodes(num_nodes // 2)
    s = jnp.concatenate([s_fine, s_coarse])
    tau = jnp.exp(s - log_n)
    # log P(M_N > x) level: log(−expm1(−t/N)) = log τ + log(expm1(−τ)/(−τ))
    log_sf = s - log_n + jnp.log(expm1_ratio(-tau))
    log_sf = jnp.minimum(log_sf, jnp.log1p(-jnp.asarray(jnp.finfo(dtype).eps, dtype)))
    x_max = _mixture_quantile(log_sf, log_p, log_q, correct, incorrect)
    h = _posterior_correct(x_max, log_p, log_q, correct, incorrect)
    h_fine, h_coarse = h[:s_fine.shape[0]], h[s_fine.shape[0]:]
    fine = jnp.sum(w_fine * h_fine) / jnp.sum(w_fine)
    coarse = jnp.sum(w_coarse * h_coarse) / jnp.sum(w_coarse)
    return fine, jnp.abs(fine - coarse)


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def _bon_accuracy(n, p, correct, incorrect, num_nodes):
    with jax.named_scope("bon_accuracy"):
        flat = n.ravel()
        acc, err = jax.vmap(lambda m: _accuracy_one(m, p, correct, incorrect, num_nodes))(flat)
        acc, err = acc.reshape(n.shape), err.reshape(n.shape)
        return acc, BoNInfo(error_estimate=err, nonfinite=~jnp.all(jnp.isfinite(acc)))


def bon_accuracy(n, p_correct, correct: RewardLaw, incorrect: RewardLaw, *,
                 num_nodes: int = 32) -> tuple[jax.Array, BoNInfo]:
    """Exact Best-of-N accuracy ``Acc(N) = E[h(M_N)]`` by quadrature over the maximum's quantile.

    With ``t = −N log G(M_N)``, ``t ~ Exp(1)`` for every ``N``, and ``M_N`` is the pooled law's
    upper quantile at survival level ``−expm1(−t/N)``. So

    .. math::

        \\mathrm{Acc}(N) = \\int_{−∞}^{∞} e^{s − e^s}\\, h\\big(\\bar G^{-1}(−\\mathrm{expm1}
        (−e^s/N))\\big)\\, ds,

    integrated by Gauss–Legendre on segments of ``s`` split at fixed points and where either
    law's support ends (``h`` may jump there), with ``\\bar G^{-1}`` by bisection on
    ``log \\bar G`` in log space. The integrand is bounded in ``[0, 1]`` and its shape depends on
    ``N`` only through a shift of ``s``, so the cost and the accuracy do not depend on ``N``.
    ``info.error_estimate`` compares with half the nodes.

    Args:
        n: sample counts ``N >= 1`` (any shape; non-integer values interpolate).
        p_correct: probability ``p`` in ``[0, 1]`` that a response is correct (traceable).
        correct: reward law of correct responses.
        incorrect: reward law of incorrect responses.
        num_nodes: Gauss–Legendre nodes per segment (even, >= 4).

    Returns:
        ``(accuracy, info)``: accuracies of the shape of ``n`` and a :class:`BoNInfo`.

    Example:
        >>> from jaxsample.risk import Normal, bon_accuracy
        >>> acc, info = bon_accuracy([1, 16, 4096], 0.3, Normal(1.0, 1.0), Normal(0.0, 1.5))
        >>> [round(float(a), 4) for a in acc]  # rises, then the wider incorrect tail wins
        [0.3, 0.4065, 0.0396]
    """
    p = _check_probability("p_correct", p_correct)
    correct, incorrect = _check_law("correct", correct), _check_law("incorrect", incorrect)
    n = _check_n(n)
    num_nodes = check_int("num_nodes", num_nodes, 4)
    if num_nodes % 2:
        raise ValueError(f"num_nodes must be even, got {num_nodes}")
    dtype = common_float_dtype(p_correct=p_correct, correct=correct, incorrect=incorrect)
    return _bon_accuracy(n.astype(dtype), p.astype(dtype), correct, incorrect, num_nodes)


# ----------------------------------------------------------------------------------------------
# Monte Carlo


def _law_quantile(law, log_sf):
    lo, hi = law.bracket(log_sf)
    if law.exact_quantile:
        return lo
    return _invert_logsf(law.logsf, log_sf, lo, hi, _iterations(log_sf.dtype))


def _simulate_maxima(key, n, p, correct, incorrect, size):
    """Correct-wins indicators of ``size`` trials: ``K ~ Bin(N, p)`` correct responses, then each
    class's maximum by inversion, ``M = F^{-1}(U^{1/K})``."""
    dtype = p.dtype
    key_k, key_c, key_w = jax.random.split(key, 3)
    k = jax.random.binomial(key_k, n, p, (size,)).astype(dtype)
    tiny = jnp.finfo(dtype).tiny

    def maximum(key, law, count):
        log_u = jnp.log(jax.random.uniform(key, (size,), dtype, minval=tiny))
        safe = jnp.maximum(count, jnp.ones_like(count))
        log_sf = log1mexp(log_u / safe)  # P(max > x) = 1 − u^{1/K}
        x = _law_quantile(law, log_sf)
        return jnp.where(count > 0, x, -jnp.inf)

    x_c = maximum(key_c, correct, k)
    x_w = maximum(key_w, incorrect, n - k)
    return x_c > x_w, jnp.isnan(x_c) | jnp.isnan(x_w)


def _simulate_direct(key, n, p, correct, incorrect, size):
    """Correct-wins indicators of ``size`` trials drawing all ``N`` rewards (ties: first)."""
    dtype = p.dtype
    key_label, key_c, key_w = jax.random.split(key, 3)
    label = jax.random.uniform(key_label, (size, n), dtype) < p
    rewards = jnp.where(label, correct.sample(key_c, (size, n), dtype),
                        incorrect.sample(key_w, (size, n), dtype))
    best = jnp.argmax(rewards, axis=1)
    wins = jnp.take_along_axis(label, best[:, None], axis=1)[:, 0]
    return wins, jnp.any(jnp.isnan(rewards), axis=1)


@functools.partial(jax.jit, static_argnames=("num_trials", "method", "n_static", "block"))
def _bon_simulate(key, n, p, correct, incorrect, *, num_trials, method, n_static, block):
    with jax.named_scope("bon_simulate"):
        num_blocks = -(-num_trials // block)
        keys = jax.random.split(key, num_blocks)

        def one_block(args):
            index, key = args
            if method == "maxima":
                wins, bad = _simulate_maxima(key, n, p, correct, incorrect, block)
            else:
                wins, bad = _simulate_direct(key, n_static, p, correct, incorrect, block)
            keep = index * block + jnp.arange(block) < num_trials
            return jnp.sum(wins & keep), jnp.any(bad & keep)

        wins, bad = jax.lax.map(one_block, (jnp.arange(num_blocks), keys))
        dtype = p.dtype
        accuracy = jnp.sum(wins).astype(dtype) / num_trials
        se = jnp.sqrt(accuracy * (1 - accuracy) / num_trials)
        return accuracy, BoNSimulationInfo(standard_error=se, nonfinite=jnp.any(bad))


def bon_simulate(key, n, p_correct, correct: RewardLaw, incorrect: RewardLaw, *,
                 num_trials: int, method: str = "maxima") -> tuple[jax.Array, BoNSimulationInfo]:
    """Monte Carlo Best-of-N accuracy.

    ``method="maxima"`` (any ``N``, cost independent of ``N``): per trial the number of correct
    responses ``K ~ Bin(N, p)``, then each class's maximum by inversion,
    ``M_c = F_c^{-1}(U^{1/K})`` and ``M_w = F_w^{-1}(U'^{1/(N − K)})``; the trial is won if
    ``M_c > M_w``. ``method="direct"`` draws all ``N`` labels and rewards (``N`` a Python int;
    ``num_trials × N`` draws) and keeps the argmax. Trials run in blocks of bounded memory.

    Args:
        key: PRNG key.
        n: ``N >= 1`` (a scalar; a traced value for ``"maxima"``).
        p_correct: ``p`` in ``[0, 1]``.
        correct, incorrect: reward laws.
        num_trials: number of simulated Best-of-N selections.
        method: ``"maxima"`` or ``"direct"``.

    Returns:
        ``(accuracy, info)`` with a :class:`BoNSimulationInfo` (its standard error).

    Example:
        >>> import jax
        >>> from jaxsample.risk import Normal, bon_simulate
        >>> acc, info = bon_simulate(jax.random.key(0), 16, 0.3, Normal(1.0, 1.0),
        ...                          Normal(0.0, 1.5), num_trials=20_000, method="direct")
        >>> bool(abs(acc - 0.4065) < 4.5 * info.standard_error)  # bon_accuracy's value
        True
    """
    key = check_key("key", key)
    method = check_choice("method", method, ("maxima", "direct"))
    p = _check_probability("p_correct", p_correct)
    correct, incorrect = _check_law("correct", correct), _check_law("incorrect", incorrect)
    n_given = n
    n = _check_n(n, integer=True)
    if n.shape != ():
        raise ValueError(f"n must be a scalar, got shape {n.shape}")
    num_trials = check_int("num_trials", num_trials, 1)
    dtype = common_float_dtype(p_correct=p_correct, correct=correct, incorrect=incorrect)
    if method == "direct":
        if isinstance(n_given, int | np.integer) and not isinstance(n_given, bool):
            n_static = int(n_given)
        elif is_concrete(n):
            n_static = int(n)
        else:
            raise TypeError('n must be a Python int for method="direct" (it fixes the shape '
                            "of the draws)")
        block = max(1, min(num_trials, 2**20 // n_static))
    else:
        n_static, block = 0, min(num_trials, 2**18)
    return _bon_simulate(key, n.astype(dtype), p.astype(dtype), correct, incorrect,
                         num_trials=num_trials, method=method, n_static=n_static, block=block)


# ----------------------------------------------------------------------------------------------
# pools and tails


def bon_pool_accuracy(scores, labels, n) -> tuple[jax.Array, BoNPoolInfo]:
    """Exact expected Best-of-N accuracy for ``N`` responses drawn without replacement from a pool.

    With the pool of ``M`` sorted by reward, descending, the response of rank ``j`` is the maximum
    of a uniformly random ``N``-subset with probability ``C(M − j, N − 1)/C(M, N)``; so the
    accuracy is ``Σ_j C(M − j, N − 1)/C(M, N)·correct_(j)``. Tied rewards share their mean label
    (ties broken uniformly at random).

    Args:
        scores: ``(M,)`` finite rewards.
        labels: ``(M,)`` 0/1 (or bool) correctness labels.
        n: ``1 <= N <= M`` (any shape).

    Returns:
        ``(accuracies, BoNPoolInfo)``, the accuracies of the shape of ``n``.

    Example:
        >>> import jax.numpy as jnp
        >>> scores, labels = jnp.array([3.0, 2.0, 1.0, 0.0]), jnp.array([0, 1, 1, 0])
        >>> accuracy, info = bon_pool_accuracy(scores, labels, jnp.array([1, 2, 4]))
        >>> [round(float(a), 4) for a in accuracy], bool(info.nonfinite)
        ([0.5, 0.5, 0.0], False)
    """
    scores, labels = _check_scores_labels(scores, labels)
    n = _check_n(n, integer=True)
    size = scores.shape[0]
    if is_concrete(n) and np.any(np.asarray(n) > size):
        raise ValueError(f"n must be <= the pool size {size}, got {np.max(np.asarray(n))}")
    return _pool_accuracy(scores, labels, n.astype(scores.dtype))


@jax.jit
def _pool_accuracy(scores, labels, n):
    with jax.named_scope("bon_pool_accuracy"):
        dtype = scores.dtype
        size = scores.shape[0]
        order = jnp.argsort(-scores)
        ranked, correct = scores[order], labels[order].astype(dtype)
        group = jnp.cumsum(jnp.concatenate([jnp.zeros((1,), jnp.int32),
                                            (ranked[1:] != ranked[:-1]).astype(jnp.int32)]))
        totals = jax.ops.segment_sum(correct, group, num_segments=size)
        counts = jax.ops.segment_sum(jnp.ones_like(correct), group, num_segments=size)
        shared = totals[group] / counts[group]
        rank = jnp.arange(1, size + 1, dtype=dtype)
        total = jnp.asarray(size, dtype)

        def one(m):
            log_w = jnp.log(m / total) + log_binomial_ratio(total - rank, total - 1, m - 1)
            return jnp.sum(jnp.exp(log_w) * shared)

        accuracy = jax.vmap(one)(n.ravel()).reshape(n.shape)
        return accuracy, BoNPoolInfo(~jnp.all(jnp.isfinite(accuracy)))


@functools.partial(jax.jit, static_argnames=("dtype",))
def _tail_masses(labels, above, p_correct, dtype):
    num_correct = jnp.sum(labels).astype(dtype)
    num_incorrect = jnp.asarray(labels.shape[0], dtype) - num_correct
    k_c = jnp.sum(above & labels).astype(dtype)
    k_w = jnp.sum(above & ~labels).astype(dtype)
    p = num_correct / (num_correct + num_incorrect) if p_correct is None else p_correct
    # P(R > u, correct) and P(R > u, incorrect) at the population's p
    mass_c = p * k_c / jnp.maximum(num_correct, jnp.ones_like(num_correct))
    mass_w = (1 - p) * k_w / jnp.maximum(num_incorrect, jnp.ones_like(num_incorrect))
    return mass_c, mass_w


def _fit_tails(scores, labels, threshold_quantile):
    threshold = jnp.quantile(scores, threshold_quantile)
    above = scores > threshold
    excess = jnp.where(above, scores - threshold, jnp.zeros_like(scores))
    dtype = scores.dtype
    fit_c = gpd_fit(excess, (above & labels).astype(dtype))
    fit_w = gpd_fit(excess, (above & ~labels).astype(dtype))
    return threshold, above, fit_c, fit_w


def _fits_solver(fit_c, fit_w):
    """One status for the two GPD fits: their likelihood evaluations add up; unsuccessful
    when a fit's maximum lies on the edge of its search range (``ξ = −1`` or past the grid:
    too few or degenerate excesses) or is not finite."""
    return SolverStats.of(fit_c.solver.num_iterations + fit_w.solver.num_iterations,
                          converged=fit_c.solver.converged & fit_w.solver.converged,
                          nonfinite=fit_c.nonfinite | fit_w.nonfinite)


def _check_tail_args(threshold_quantile, p_correct):
    if not isinstance(threshold_quantile, float | int) or isinstance(threshold_quantile, bool) \
            or not 0 < threshold_quantile < 1:
        raise ValueError("threshold_quantile must be a float in (0, 1), got "
                         f"{threshold_quantile!r}")
    if p_correct is not None:
        p_correct = _check_probability("p_correct", p_correct)
        if is_concrete(p_correct) and not 0 < float(p_correct) < 1:
            raise ValueError(f"p_correct must be in (0, 1), got {float(p_correct)}")
    return float(threshold_quantile), p_correct


@functools.partial(jax.jit, static_argnames=("threshold_quantile",))
def _tension(scores, labels, n, p_correct, threshold_quantile):
    with jax.named_scope("tail_tension"):
        dtype = scores.dtype
        threshold, above, fit_c, fit_w = _fit_tails(scores, labels, threshold_quantile)
        p = None if p_correct is None else p_correct.astype(dtype)
        mass_c, mass_w = _tail_masses(labels, above, p, dtype)
        log_mc, log_mw = jnp.log(mass_c), jnp.log(mass_w)

        def pooled_logsf(y):
            return jnp.logaddexp(log_mc + gpd_logsf(y, fit_c.shape, fit_c.scale),
                                 log_mw + gpd_logsf(y, fit_w.shape, fit_w.scale))

        def one(m):
            target = -jnp.log(m)
            # each class alone at half the level bounds the pooled level point from above
            def top(log_mass, fit):
                level = jnp.minimum(target - jnp.log(2.0) - log_mass, 0.0)
                y = gpd_inverse_logsf(level, fit.shape, fit.scale)
                return jnp.where(jnp.isfinite(log_mass), y, jnp.zeros_like(y))

            hi = jnp.maximum(top(log_mc, fit_c), top(log_mw, fit_w))
            y = _invert_logsf(pooled_logsf, target, jnp.zeros_like(hi), hi, _iterations(dtype))
            y = jnp.where(target >= pooled_logsf(jnp.zeros_like(y)), jnp.zeros_like(y), y)
            gap = gpd_hazard(y, fit_w.shape, fit_w.scale) - gpd_hazard(y, fit_c.shape,
                                                                       fit_c.scale)
            log_q = log_mc + gpd_logsf(y, fit_c.shape, fit_c.scale) - pooled_logsf(y)
            return threshold + y, gap, jnp.exp(log_q)

        level, gap, accuracy = jax.vmap(one)(n)
        nonfinite = ~(jnp.all(jnp.isfinite(level)) & jnp.all(jnp.isfinite(accuracy)))
        return gap, TailTensionInfo(n=n, level=level, accuracy=accuracy, helps=gap > 0,
                                    threshold=threshold, correct=fit_c, incorrect=fit_w,
                                    solver=_fits_solver(fit_c, fit_w), nonfinite=nonfinite)


def tail_tension(scores, labels, *, n=None, threshold_quantile: float = 0.9,
                 p_correct=None) -> tuple[jax.Array, TailTensionInfo]:
    """The tail-tension diagnostic: will more samples help or hurt Best-of-N on these rewards?

    Fits a GPD to each class's excesses over the pooled ``threshold_quantile`` quantile ``u``
    (peaks over threshold), builds the pooled tail ``\\bar G(u + y) = a_c \\bar F_c(y) +
    a_w \\bar F_w(y)`` (``a`` the class's share of the exceedances at the population's ``p``), and
    at the typical maximum ``u_N`` (``\\bar G(u_N) = 1/N``) reports the hazard gap
    ``T = λ_w − λ_c`` with GPD hazards ``λ = 1/(σ + ξy)``. The identity
    ``d/du log q(u) = ω_w(u)·T(u)`` for ``q(u) = p\\bar F_c(u)/\\bar G(u)`` (exact; ``ω_w`` is the
    incorrect share above ``u``) means accuracy near ``N`` still rises where ``T > 0`` and falls
    where ``T < 0`` — a diagnostic of our own making, since the paper's exact criterion was not
    available. Jittable.

    Args:
        scores: ``(M,)`` finite rewards.
        labels: ``(M,)`` 0/1 correctness labels.
        n: the ``N`` to examine (1-D); default ``1, 10, ..., 10^6``.
        threshold_quantile: pooled quantile used as the threshold, in ``(0, 1)``.
        p_correct: the population's probability of a correct response; default the pool's
            fraction of correct labels.

    Returns:
        ``(hazard_gap, info)``: ``T(u_N) = λ_w(u_N) − λ_c(u_N)`` for each ``N`` (``> 0``: more
        samples help there) and a :class:`TailTensionInfo` (the levels, the tail accuracy, the
        fits and their :class:`~jaxsample.SolverStats`).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> scores = np.concatenate([rng.normal(1.0, 1.0, 3000), rng.normal(0.0, 1.5, 7000)])
        >>> labels = np.arange(10_000) < 3000
        >>> gap, info = tail_tension(scores, labels, n=np.array([10.0, 1e5]))
        >>> [bool(h) for h in info.helps]  # the wider incorrect tail takes over
        [False, False]
    """
    scores, labels = _check_scores_labels(scores, labels)
    threshold_quantile, p_correct = _check_tail_args(threshold_quantile, p_correct)
    dtype = scores.dtype
    n = jnp.asarray(10.0 ** np.arange(7), dtype) if n is None else _check_n(n).astype(dtype)
    if n.ndim != 1:
        raise ValueError(f"n must be 1-D, got shape {n.shape}")
    gap, info = _tension(scores, labels, n, p_correct, threshold_quantile)
    warn_if_unsuccessful(info.solver, "tail_tension's GPD tail fits")
    return gap, info


def tail_regime(correct, incorrect, *, threshold_quantile: float = 0.9, p_correct=None,
                level: float = 0.95, min_exceedances: int = 10) -> tuple[str, TailRegimeInfo]:
    """Classifies the Best-of-N regime from rewards of correct and incorrect responses.

    Peaks over threshold: the pooled ``threshold_quantile`` quantile ``u``; a GPD ``(ξ, σ)`` per
    class fitted to its excesses (:func:`jaxsample.kernels.extremes.gpd_fit`). Then, with
    two-sided tests at ``level`` on the asymptotic standard errors:

    1. shapes differ (``|z(ξ_c − ξ_w)| > z``): the heavier tail (larger ξ) dominates;
    2. shapes agree and their pooled ξ is positive: Pareto tails of equal index are critical,
       ``\\bar F_c/\\bar F_w → (a_c/a_w)(σ_c/σ_w)^{1/ξ}``;
    3. shapes agree, ξ ≤ 0 (exponential-type or bounded tails, e.g. Gaussians): the larger
       scale dominates if the scales differ, else the case is critical with limit
       ``a_c/(a_c + a_w)`` (exponential tails of equal rate).

    Here ``a`` is the class's share of the tail mass at the population's ``p``. Equal-variance
    Gaussians with different means lie in case 3: their accuracy tends to 1 (or 0) slower than
    any power of N, which finite samples see as near-critical.

    Args:
        correct: ``(m_c,)`` finite rewards of correct responses.
        incorrect: ``(m_w,)`` finite rewards of incorrect responses.
        threshold_quantile: pooled quantile used as the threshold.
        p_correct: population probability of a correct response; default ``m_c/(m_c + m_w)``.
        level: confidence level of the tests, in ``(0, 1)``.
        min_exceedances: fewest excesses per class for a fit.

    Returns:
        ``(regime, info)``: ``"correct-dominant"`` (Acc → 1), ``"incorrect-dominant"`` (Acc → 0:
        more samples eventually hurt) or ``"critical"`` (Acc tends to ``info.limit_accuracy`` in
        (0, 1)), and a :class:`TailRegimeInfo`. Not jittable (the regime is a string decided on
        the host from the fits).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> correct = rng.pareto(2.0, 4000)      # GPD tail, ξ = 1/2
        >>> incorrect = rng.pareto(4.0, 4000)    # lighter, ξ = 1/4
        >>> regime, info = tail_regime(correct, incorrect)
        >>> regime
        'correct-dominant'
    """
    correct = check_array("correct", correct, ndim=1, finite=True, min_rows=2)
    incorrect = check_array("incorrect", incorrect, ndim=1, finite=True, min_rows=2,
                            dtype=correct.dtype)
    threshold_quantile, p_correct = _check_tail_args(threshold_quantile, p_correct)
    if isinstance(level, bool) or not isinstance(level, float | int) or not 0 < level < 1:
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    min_exceedances = check_int("min_exceedances", min_exceedances, 2)
    scores = jnp.concatenate([correct, incorrect])
    labels = jnp.arange(scores.shape[0]) < correct.shape[0]
    threshold, above, fit_c, fit_w = jax.jit(_fit_tails, static_argnums=2)(
        scores, labels, threshold_quantile)
    for name, fit in (("correct", fit_c), ("incorrect", fit_w)):
        if float(fit.num_exceedances) < min_exceedances:
            raise ValueError(
                f"{name} has {int(fit.num_exceedances)} rewards above the pooled threshold "
                f"{float(threshold):.4g}, fewer than min_exceedances={min_exceedances}; lower "
                "threshold_quantile or give more rewards")
    p = None if p_correct is None else p_correct.astype(scores.dtype)
    mass_c, mass_w = (float(v) for v in _tail_masses(labels, above, p, scores.dtype))
    xi_c, xi_w = float(fit_c.shape), float(fit_w.shape)
    se_c, se_w = float(fit_c.shape_se), float(fit_w.shape_se)
    z_crit = float(norm.ppf(0.5 + level / 2))
    shape_z = (xi_c - xi_w) / math.sqrt(se_c**2 + se_w**2)
    scale_z = (math.log(float(fit_c.scale)) - math.log(float(fit_w.scale))) / math.sqrt(
        float(fit_c.log_scale_se) ** 2 + float(fit_w.log_scale_se) ** 2)
    precision = 1 / se_c**2 + 1 / se_w**2
    xi_pooled = (xi_c / se_c**2 + xi_w / se_w**2) / precision
    if shape_z > z_crit:
        regime, limit = "correct-dominant", 1.0
    elif shape_z < -z_crit:
        regime, limit = "incorrect-dominant", 0.0
    elif xi_pooled * math.sqrt(precision) > z_crit:
        ratio = (mass_c / mass_w) * (float(fit_c.scale) / float(fit_w.scale)) ** (1 / xi_pooled)
        regime, limit = "critical", ratio / (1 + ratio)
    elif scale_z > z_crit:
        regime, limit = "correct-dominant", 1.0
    elif scale_z < -z_crit:
        regime, limit = "incorrect-dominant", 0.0
    else:
        regime, limit = "critical", mass_c / (mass_c + mass_w)
    dtype = scores.dtype
    limit, shape_z, scale_z = (jnp.asarray(v, dtype) for v in (limit, shape_z, scale_z))
    nonfinite = ~(jnp.isfinite(limit) & jnp.isfinite(shape_z) & jnp.isfinite(scale_z)
                  & jnp.isfinite(fit_c.log_likelihood) & jnp.isfinite(fit_w.log_likelihood))
    info = TailRegimeInfo(limit_accuracy=limit, threshold=threshold, correct=fit_c,
                          incorrect=fit_w, shape_z=shape_z, scale_z=scale_z,
                          solver=_fits_solver(fit_c, fit_w), nonfinite=nonfinite)
    warn_if_unsuccessful(info.solver, "tail_regime's GPD tail fits")
    return regime, info
