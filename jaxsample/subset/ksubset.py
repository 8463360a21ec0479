"""Common-seed correlated k-subsets with given marginals, and the conditional Poisson law.

A k-subset sampler with inclusion probabilities ``x`` (``x_i ∈ [0, 1]``, ``Σx = k``) whose
randomness is a *common seed*: the same key on two nearby marginal vectors returns nearly the
same subset, which is what makes a rounding of a stable relaxation stable
(:func:`jaxsample.subset.stable_max_coverage`). The numerics are
:mod:`jaxsample.kernels.ksubset`'s.

* :func:`correlated_k_subset` — marginals in, a subset out (``"cp"``: conditional Poisson with a
  common random order and thresholds indexed by item id; ``"systematic"`` and ``"independent"``
  baselines), ``(mask, KSubsetInfo)``;
* :func:`fit_weights`, :func:`inclusion_probabilities`, :func:`conditional_poisson` — the maximum
  entropy law ``P(A) ∝ Π_{i∈A} w_i`` and its fit to marginals.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample._solver import from_optimistix, warn_if_unsuccessful
from jaxsample.kernels import ksubset
from jaxsample.kernels.solver import SolverStats

__all__ = [
    "SCHEMES",
    "InclusionProbabilitiesInfo",
    "KSubsetInfo",
    "conditional_poisson",
    "correlated_k_subset",
    "fit_weights",
    "inclusion_probabilities",
]

SCHEMES = ("cp", "systematic", "independent")


class KSubsetInfo(NamedTuple):
    """The weight fit behind :func:`fit_weights`, :func:`correlated_k_subset` and
    :func:`conditional_poisson`.

    Attributes:
        residual: ``max_i |π_i − x_i|`` of the fitted law (0 where nothing is fitted: the
            schemes without a fit, and :func:`conditional_poisson`, which takes the weights).
        solver: :class:`~jaxsample.SolverStats` of the fixed-point iteration (iterations taken;
            ``successful`` when the tolerance was met within ``max_iterations``; 0 iterations
            and ``successful`` where nothing is fitted).
        nonfinite: a fitted log-weight of a free item (``0 < x_i < 1``) is NaN or infinite
            (:func:`conditional_poisson`: a log-weight is NaN).
    """

    residual: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


class InclusionProbabilitiesInfo(NamedTuple):
    """What :func:`inclusion_probabilities` reports besides ``π``.

    Attributes:
        nonfinite: a probability is NaN/inf (only from NaN log-weights passed under ``jit``).
    """

    nonfinite: jax.Array


def _no_fit(dtype) -> tuple[jax.Array, SolverStats]:
    """The residual and solver report where no weights are fitted."""
    return jnp.zeros((), dtype), SolverStats.of(0, converged=jnp.ones((), bool))


def _default_tolerance(dtype) -> float:
    # float32 log e_k carries ~1e-5 relative error at m = 10⁴, k = 100 (a floor on the fit)
    return 1e-4 if jnp.dtype(dtype).itemsize < 8 else 1e-10


def _tolerance(tolerance, dtype):
    if tolerance is None:
        return np.asarray(_default_tolerance(dtype), np.float64)
    return check_hyperparameter("tolerance", tolerance)


# Value checks run on the host (NumPy): eager jnp reductions would compile one small XLA program
# per shape and dtype, which dominated the first call on small inputs.


def _check_marginals(marginals, k):
    marginals = check_array("marginals", marginals, ndim=1, min_rows=1, finite=True, lower=0,
                            upper=1)
    m = marginals.shape[0]
    k = check_int("k", k, 1, m)
    if is_concrete(marginals):
        total = np.asarray(marginals, np.float64).sum()
        slack = math.sqrt(float(jnp.finfo(marginals.dtype).eps)) * max(1, k)
        if abs(total - k) > slack:
            raise ValueError(f"marginals must sum to k = {k}, got {total}")
    return marginals, k


def _check_log_weights(log_weights, k):
    log_weights = check_array("log_weights", log_weights, ndim=1, min_rows=1)
    m = log_weights.shape[0]
    k = check_int("k", k, 1, m)
    if is_concrete(log_weights):
        host = np.asarray(log_weights, np.float64)
        if np.any(np.isnan(host)):
            raise ValueError("log_weights must not hold NaN (use -inf for a zero weight)")
        forced = int(np.sum(host == np.inf))
        positive = int(np.sum(host > -np.inf))
        if forced > k or positive < k:
            raise ValueError(f"log_weights must have at most k = {k} entries +inf and at least "
                             f"k entries > -inf, got {forced} and {positive}")
    return log_weights, k


@functools.partial(jax.jit, static_argnames=("k",))
def _inclusion(log_weights, k):
    probabilities = ksubset.inclusion_probabilities(log_weights, k)
    return probabilities, InclusionProbabilitiesInfo(~jnp.all(jnp.isfinite(probabilities)))


def inclusion_probabilities(log_weights, k: int
                            ) -> tuple[jax.Array, InclusionProbabilitiesInfo]:
    """Inclusion probabilities of the conditional Poisson law ``P(A) ∝ Π_{i∈A} w_i``, ``|A| = k``.

    ``π_i = w_i e_{k−1}(w_{−i}) / e_k(w) = ∂ log e_k(e^θ)/∂θ_i``, computed as ``jax.grad`` of the
    log-space elementary-symmetric-polynomial DP (``O(mk)``). Differentiable: ``jax.jacfwd`` of
    it is the covariance of the inclusion indicators.

    Args:
        log_weights: ``(m,)`` θ = log w; ``+inf`` forces an item in, ``-inf`` keeps it out.
        k: subset size, ``1 <= k <= m``.

    Returns:
        ``(probabilities, InclusionProbabilitiesInfo)``: ``(m,)`` probabilities summing to k, of
        θ's dtype.

    Example:
        >>> import numpy as np
        >>> p, _ = inclusion_probabilities(np.log([1.0, 1.0, 2.0, 1.0]) - [0, 0, 0, np.inf], 2)
        >>> [round(float(v), 4) for v in p]    # P({1,2}) = 1/5, P({1,3}) = P({2,3}) = 2/5
        [0.6, 0.6, 0.8, 0.0]
    """
    log_weights, k = _check_log_weights(log_weights, k)
    return _inclusion(log_weights, k)


@functools.partial(jax.jit, static_argnames=("k", "max_iterations"))
def _fit(marginals, k, tolerance, max_iterations):
    theta, result = ksubset.fit_log_weights(marginals, k, tolerance=tolerance,
                                            max_iterations=max_iterations)
    free = (marginals > 0) & (marginals < 1)
    nonfinite = jnp.any(free & jnp.isnan(theta)) | ~jnp.isfinite(result.residual)
    return theta, KSubsetInfo(result.residual, from_optimistix(result.solution), nonfinite)


def fit_weights(marginals, k: int, *, tolerance=None, max_iterations: int = 50
                ) -> tuple[jax.Array, KSubsetInfo]:
    """Conditional Poisson log-weights whose inclusion probabilities are ``marginals``.

    The maximum-entropy law on k-subsets with these marginals. Minimises the convex dual
    ``log e_k(e^θ) − θᵀx`` by a damped exact-coordinate fixed-point iteration run by
    :func:`optimistix.fixed_point` (see :mod:`jaxsample.kernels.ksubset`).

    Args:
        marginals: ``(m,)`` in ``[0, 1]`` summing to k; 0/1 entries are forced out/in.
        k: subset size, ``1 <= k <= m``.
        tolerance: target ``max|π − x|`` (default 1e-4 in float32, 1e-10 in float64; the
            iteration usually meets it in 5–15 steps).
        max_iterations: cap on fixed-point iterations.

    Returns:
        ``(log_weights, KSubsetInfo)``: ``(m,)`` θ (``±inf`` on forced items).
        ``info.solver`` is ``successful`` only when the step test met ``tolerance`` within
        ``max_iterations``; an eager call that missed it warns once (``RuntimeWarning``).

    Raises:
        ValueError: marginals outside ``[0, 1]``, not summing to k, or ``k > m``.

    Example:
        >>> import numpy as np
        >>> x = np.linspace(0.05, 0.95, 30, dtype=np.float32)
        >>> theta, info = fit_weights(x * 4 / x.sum(), 4)
        >>> (theta.dtype, info.residual.dtype, bool(info.solver.converged),
        ...  bool(info.residual < 1e-3))
        (dtype('float32'), dtype('float32'), True, True)
    """
    marginals, k = _check_marginals(marginals, k)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    theta, info = _fit(marginals, k, _tolerance(tolerance, marginals.dtype), max_iterations)
    warn_if_unsuccessful(info.solver, "fit_weights' fixed-point iteration")
    return theta, info


@functools.partial(jax.jit, static_argnames=("k",))
def _conditional_poisson(key, log_weights, k):
    return ksubset.conditional_poisson_sample(key, log_weights, k)


@functools.partial(jax.jit, static_argnames=("k",))
def _conditional_poisson_with_info(key, log_weights, k):
    residual, solver = _no_fit(log_weights.dtype)
    return (_conditional_poisson(key, log_weights, k),
            KSubsetInfo(residual, solver, jnp.any(jnp.isnan(log_weights))))


def conditional_poisson(key, log_weights, k: int) -> tuple[jax.Array, KSubsetInfo]:
    """One common-seed draw of ``P(A) ∝ Π_{i∈A} w_i`` over the k-subsets.

    The sequential sampler in a random order with thresholds indexed by item id (both from
    ``key``), exact for every order; ``O(mk)`` time and an ``(m, k + 1)`` table per draw. Fit the
    weights once with :func:`fit_weights` and call this for many keys (``jax.vmap``).

    Args:
        key: PRNG key, the common seed.
        log_weights: ``(m,)`` θ, as from :func:`fit_weights`.
        k: subset size.

    Returns:
        ``(mask, KSubsetInfo)``: the ``(m,)`` bool mask with exactly k True (the Info's fit
        fields are those of no fit: the weights are given).

    Example:
        >>> import jax, numpy as np
        >>> theta, _ = fit_weights(np.full(30, 4 / 30, np.float32), 4)
        >>> mask, _ = conditional_poisson(jax.random.key(0), theta, 4)
        >>> int(mask.sum())
        4
    """
    key = check_key("key", key)
    log_weights, k = _check_log_weights(log_weights, k)
    return _conditional_poisson_with_info(key, log_weights, k)


@functools.partial(jax.jit, static_argnames=("k", "scheme"))
def _baseline(key, marginals, k, scheme):
    if scheme == "independent":
        mask = ksubset.independent_sample(key, marginals)
    else:
        mask = ksubset.systematic_sample(key, marginals, k)
    residual, solver = _no_fit(marginals.dtype)
    return mask, KSubsetInfo(residual, solver, jnp.zeros((), bool))


def _round(key, marginals, k, scheme, tolerance, max_iterations):
    # compiled pieces shared with fit_weights and conditional_poisson (inlined under an outer jit)
    if scheme == "cp":
        theta, info = _fit(marginals, k, tolerance, max_iterations)
        return _conditional_poisson(key, theta, k), info
    return _baseline(key, marginals, k, scheme)


def correlated_k_subset(key, marginals, k: int, *, scheme: str = "cp", tolerance=None,
                        max_iterations: int = 50) -> tuple[jax.Array, KSubsetInfo]:
    """A k-subset with inclusion probabilities ``marginals``, coupled across inputs by ``key``.

    The key is the common seed: the same key on two nearby marginal vectors returns nearly the
    same subset (for ``"independent"`` exactly ``E|A Δ A′| = ‖x − x′‖₁``). Schemes:

    * ``"cp"``: the conditional Poisson (maximum-entropy) law with these marginals
      (:func:`fit_weights`, then :func:`conditional_poisson`); ``|A| = k``, negatively
      associated, so ``E cov(A) >= (1 − 1/e) F(x)`` for coverage;
    * ``"systematic"``: systematic sampling in the common random order with a common offset;
      ``|A| = k``, exact marginals;
    * ``"independent"``: ``A = {i : U_i < x_i}``; exact marginals but ``|A|`` is random (mean k).

    Args:
        key: PRNG key, the common seed.
        marginals: ``(m,)`` in ``[0, 1]`` summing to k; 0/1 entries are forced out/in.
        k: subset size, ``1 <= k <= m``.
        scheme: ``"cp"``, ``"systematic"`` or ``"independent"``.
        tolerance: the ``"cp"`` fit's tolerance on ``max|π − x|`` (see :func:`fit_weights`).
        max_iterations: the ``"cp"`` fit's iteration cap.

    Returns:
        ``(mask, KSubsetInfo)``: the ``(m,)`` bool mask and the status of the ``"cp"`` fit
        (its residual ``max|π − x|`` and :class:`~jaxsample.SolverStats`); an eager call whose
        fit missed ``tolerance`` warns once (``RuntimeWarning``).

    Raises:
        ValueError: marginals outside ``[0, 1]``, not summing to k, or ``k > m``.

    Example:
        >>> import jax, numpy as np
        >>> x = np.full(30, 4 / 30, np.float32)
        >>> y = x + np.r_[0.02, -0.02, np.zeros(28)].astype(np.float32)
        >>> a, info = correlated_k_subset(jax.random.key(3), x, 4)
        >>> b, _ = correlated_k_subset(jax.random.key(3), y, 4)
        >>> int(a.sum()), int(b.sum()), int((a != b).sum())    # the same key: the same subset
        (4, 4, 0)
        >>> bool(info.solver.converged), bool(info.nonfinite)
        (True, False)
    """
    mask, info = checked_rounding(key, marginals, k, scheme=scheme, tolerance=tolerance,
                                max_iterations=max_iterations)
    warn_if_unsuccessful(info.solver, "correlated_k_subset's weight fit")
    return mask, info


def checked_rounding(key, marginals, k, *, scheme, tolerance, max_iterations):
    """:func:`correlated_k_subset` without its warning (a caller that reports the fit itself)."""
    key = check_key("key", key)
    marginals, k = _check_marginals(marginals, k)
    scheme = check_choice("scheme", scheme, SCHEMES)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    return _round(key, marginals, k, scheme, _tolerance(tolerance, marginals.dtype),
                  max_iterations)
