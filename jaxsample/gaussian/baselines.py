"""Baselines for the smoothed-score Gaussian sampler, with the same query accounting.

- :func:`chebyshev_sample` and :func:`lanczos_sample` see only plain gradient queries
  ``∇log π(x) = −Λ(x − m)``, i.e. products ``Λ v``; both pay about ``√κ`` of them per sample.
- :func:`cholesky_sample` reads ``Λ`` itself: the exact reference.

Every sampler returns ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)`` and a
:class:`~jaxsample.gaussian.GaussianInfo`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_int, check_key
from jaxsample.gaussian._common import (
    GaussianInfo,
    check_mean,
    check_oracle,
    check_precision,
    check_spectrum,
    float_bits,
    make_info,
    warn_if_nonfinite,
)
from jaxsample.kernels.resolvent import (
    chebyshev_apply,
    chebyshev_inverse_sqrt,
    lanczos_inverse_sqrt,
)

__all__ = ["chebyshev_sample", "cholesky_sample", "lanczos_sample"]


def _gradient_info(samples, num_queries, num_levels):
    info = make_info(num_queries, num_levels, float_bits(samples.dtype), samples)
    warn_if_nonfinite(info.nonfinite, "the Gaussian baseline", stacklevel=4)
    return info


def _precision_matvec(score_fn, mean):
    """``Λ v = −∇log π(m + v)``: one gradient query per product."""
    return lambda v: -score_fn(mean + v)


@functools.lru_cache(maxsize=64)
def _chebyshev_coefficients(lambda_min, lambda_max, tol):
    return chebyshev_inverse_sqrt(lambda_min, lambda_max, tol)


@eqx.filter_jit
def _chebyshev_draw(score_fn, key, mean, coefficients, num_samples, interval):
    with jax.named_scope("chebyshev_draw"):
        z = jax.random.normal(key, (num_samples, mean.shape[0]), mean.dtype)
        matvec = _precision_matvec(score_fn, mean)
        apply = lambda zi: chebyshev_apply(matvec, zi, coefficients, *interval)
        return mean[None, :] + jax.vmap(apply)(z)


def chebyshev_sample(
    key: jax.Array,
    score_fn: Callable[[jax.Array], jax.Array],
    *,
    mean: jax.Array,
    lambda_min: float,
    lambda_max: float,
    tol: float,
    num_samples: int,
) -> tuple[jax.Array, GaussianInfo]:
    """Baseline: ``x = m + p_n(Λ) z`` with the Chebyshev series of ``λ^{-1/2}``, gradient queries.

    ``p_n`` is the lowest-degree truncated Chebyshev series with ``max |p_n(λ)√λ − 1| ≤ tol`` on
    ``[λ_min, λ_max]`` (:func:`jaxsample.kernels.resolvent.chebyshev_inverse_sqrt`), the same
    accuracy contract as :func:`jaxsample.gaussian.sample`; ``n ≈ (√κ/2) log(2/tol)``. Each
    product is one gradient query ``Λ v = −∇log π(m + v)``: ``n · num_samples`` queries. The
    coefficients are computed on the host once per ``(lambda_min, lambda_max, tol)`` and cached.
    The noise is ``z = jax.random.normal(key, (num_samples, d), mean.dtype)``.

    Args:
        key: PRNG key.
        score_fn: ``∇log π``, ``(d,) -> (d,)`` (e.g. ``oracle.score`` of
            :class:`~jaxsample.gaussian.SmoothedScoreOracle`, a pytree, so new precisions reuse
            the compilation).
        mean: ``(d,)`` mean.
        lambda_min, lambda_max, tol: as in :func:`jaxsample.gaussian.sample` (Python numbers:
            they fix the degree).
        num_samples: Python int ``>= 1``.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)``.

    Example:
        >>> lam = jnp.array([1.0, 100.0])
        >>> score = lambda x: -lam * x
        >>> x, info = chebyshev_sample(jax.random.key(0), score, mean=jnp.zeros(2),
        ...                            lambda_min=1.0, lambda_max=100.0, tol=1e-3, num_samples=3)
        >>> x.shape, int(info.num_levels)
        ((3, 2), 29)
    """
    key = check_key("key", key)
    lambda_min, lambda_max, tol = check_spectrum(lambda_min, lambda_max, tol)
    num_samples = check_int("num_samples", num_samples, 1)
    mean = check_mean(mean)
    check_oracle("score_fn", score_fn, mean.shape[0], mean.dtype, with_tau=False)
    coefficients = _chebyshev_coefficients(lambda_min, lambda_max, tol)
    degree = coefficients.shape[0] - 1
    samples = _chebyshev_draw(
        score_fn,
        key,
        mean,
        jnp.asarray(coefficients, mean.dtype),
        num_samples,
        (lambda_min, lambda_max),
    )
    return samples, _gradient_info(samples, degree * num_samples, degree)


@eqx.filter_jit
def _lanczos_draw(score_fn, key, mean, num_samples, num_steps):
    with jax.named_scope("lanczos_draw"):
        z = jax.random.normal(key, (num_samples, mean.shape[0]), mean.dtype)
        matvec = _precision_matvec(score_fn, mean)
        return mean[None, :] + jax.vmap(lambda zi: lanczos_inverse_sqrt(matvec, zi, num_steps))(z)


def lanczos_sample(
    key: jax.Array,
    score_fn: Callable[[jax.Array], jax.Array],
    *,
    mean: jax.Array,
    num_steps: int,
    num_samples: int,
) -> tuple[jax.Array, GaussianInfo]:
    """Baseline: Krylov sampler ``x = m + ‖z‖ V_n T_n^{-1/2} e_1`` (Chow & Saad 2014).

    ``n`` Lanczos steps with full re-orthogonalisation per sample
    (:func:`jaxsample.kernels.resolvent.lanczos_inverse_sqrt`); use float64. It adapts to the
    spectrum (exact once ``n`` reaches the number of distinct eigenvalues) but needs
    ``O(√κ log 1/ε)`` steps in the worst case. ``n · num_samples`` gradient queries. Unlike the
    other samplers the map ``z ↦ x`` is not linear, so its accuracy is measured per sample, by
    ``‖Λ^{1/2}(x − m) − z‖/‖z‖``, with ``z = jax.random.normal(key, (num_samples, d), mean.dtype)``.
    ``num_steps`` is a budget, not a tolerance: no convergence is claimed or checked, and
    ``info.solver`` reports only that no inner solve ran (zero iterations, ``successful``).

    Args:
        key: PRNG key.
        score_fn: ``∇log π``, ``(d,) -> (d,)``.
        mean: ``(d,)`` mean.
        num_steps: Lanczos steps, a Python int in ``[1, d]``.
        num_samples: Python int ``>= 1``.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)``.

    Example:
        >>> lam = jnp.array([1.0, 4.0, 9.0])
        >>> x, info = lanczos_sample(jax.random.key(0), lambda x: -lam * x, mean=jnp.zeros(3),
        ...                          num_steps=3, num_samples=2)
        >>> x.shape, int(info.num_queries)
        ((2, 3), 6)
    """
    key = check_key("key", key)
    num_samples = check_int("num_samples", num_samples, 1)
    mean = check_mean(mean)
    num_steps = check_int("num_steps", num_steps, 1, mean.shape[0])
    check_oracle("score_fn", score_fn, mean.shape[0], mean.dtype, with_tau=False)
    samples = _lanczos_draw(score_fn, key, mean, num_samples, num_steps)
    return samples, _gradient_info(samples, num_steps * num_samples, num_steps)


@eqx.filter_jit
def _cholesky_draw(key, precision, mean, num_samples):
    with jax.named_scope("cholesky_draw"):
        z = jax.random.normal(key, (num_samples, mean.shape[0]), mean.dtype)
        factor = jnp.linalg.cholesky(precision)
        # Λ = L Lᵀ, so x = m + L^{-T} z has covariance L^{-T} L^{-1} = Λ^{-1}.
        offsets = jax.scipy.linalg.solve_triangular(factor.T, z.T, lower=False)
        return mean[None, :] + offsets.T


def cholesky_sample(
    key: jax.Array, precision: jax.Array, *, mean: jax.Array, num_samples: int
) -> tuple[jax.Array, GaussianInfo]:
    """Exact reference: ``x = m + L^{-T} z`` with ``Λ = L Lᵀ`` (``jnp.linalg.cholesky``).

    It reads ``Λ`` itself; in the query accounting that is ``d`` gradient queries (the products
    ``Λ e_j``), reported as ``num_queries = d``. The noise is
    ``z = jax.random.normal(key, (num_samples, d), mean.dtype)``.

    Args:
        key: PRNG key.
        precision: ``(d, d)`` symmetric positive-definite matrix.
        mean: ``(d,)`` mean.
        num_samples: Python int ``>= 1``.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)``.

    Example:
        >>> x, info = cholesky_sample(jax.random.key(0), 4.0 * jnp.eye(2), mean=jnp.zeros(2),
        ...                           num_samples=5)
        >>> x.shape, int(info.num_queries)
        ((5, 2), 2)
    """
    key = check_key("key", key)
    num_samples = check_int("num_samples", num_samples, 1)
    mean = check_mean(mean)
    precision = check_precision(precision, mean.shape[0], mean.dtype)
    samples = _cholesky_draw(key, precision, mean, num_samples)
    return samples, _gradient_info(samples, mean.shape[0], 0)
