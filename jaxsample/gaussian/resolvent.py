"""Gaussian sampling from smoothed-score queries in ``O(log κ)`` queries, and √κ baselines.

Target ``π = N(m, Σ)`` with precision ``Λ = Σ^{-1}``, spectrum in ``[λ_min, λ_max]``,
``κ = λ_max/λ_min``. A method that sees only gradients ``∇log π(x) = −Λ(x − m)`` applies
polynomials in ``Λ`` and pays about ``√κ`` queries. A method that may query *smoothed* scores
``s_τ(x) = ∇log(π ∗ N(0, τI))(x) = −(Σ + τI)^{-1}(x − m)`` obtains one resolvent
``(Λ + τ^{-1}I)^{-1}z`` per query, and a sinc-quadrature rational approximation of ``Λ^{-1/2}``
over geometrically spaced ``τ`` needs only ``O((log κ + log 1/ε) log 1/ε)`` of them
(J. Liu, *Smoothed Score Queries and the Complexity of Sampling*, arXiv:2605.27769, 2026).

- :func:`sample`: the smoothed-score sampler ``x = m + Σ_k w_k R_{τ_k} z`` (optionally with
  ``b``-bit dithered answers); :func:`transform_noise` is the same map applied to given noise.
- :func:`smoothed_score_oracle`: ``s_τ`` for a dense or matrix-free precision, evaluated stably.
- Baselines with the same query accounting: :func:`chebyshev_sample` and :func:`lanczos_sample`
  (plain gradient queries, i.e. products ``Λ v``), and :func:`cholesky_sample` (exact reference).

Every sampler returns ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)`` and a
:class:`GaussianInfo`.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_int
from jaxsample.kernels.resolvent import (
    chebyshev_apply,
    chebyshev_inverse_sqrt,
    check_spectrum,
    dithered_quantize,
    lanczos_inverse_sqrt,
    resolvent,
    sinc_rule,
)

__all__ = [
    "GaussianInfo",
    "chebyshev_sample",
    "cholesky_sample",
    "lanczos_sample",
    "sample",
    "smoothed_score_oracle",
    "transform_noise",
]


class GaussianInfo(NamedTuple):
    """What a Gaussian sampler spent.

    Attributes:
        num_queries: oracle evaluations at single points, all samples together (smoothed scores
            for :func:`sample`, plain gradients for the baselines).
        num_bits: bits in the oracle answers: ``b`` per coordinate for quantised answers, the
            float width (32 or 64) per coordinate otherwise.
        num_levels: quadrature levels (sinc), polynomial degree (Chebyshev) or Lanczos steps.
        nonfinite: traced bool, ``True`` if any sample is not finite.
    """

    num_queries: int
    num_bits: int
    num_levels: int
    nonfinite: jax.Array


# ----------------------------------------------------------------------------------------------
# validation




def _check_vector(name, value):
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise TypeError(f"{name} must be a floating-point array, got dtype {value.dtype}")
    if value.ndim != 1 or value.shape[0] < 1:
        raise ValueError(f"{name} must have shape (d,) with d >= 1, got shape {value.shape}")
    return value


def _check_precision(precision, dim, dtype):
    precision = jnp.asarray(precision)
    if precision.ndim != 2 or precision.shape[0] != precision.shape[1]:
        raise ValueError(f"precision must be a square (d, d) matrix, got shape {precision.shape}")
    if precision.shape[0] != dim:
        raise ValueError(
            f"precision has shape {precision.shape} but mean has dimension {dim}; they must match"
        )
    if precision.dtype != dtype:
        raise TypeError(f"precision dtype {precision.dtype} differs from mean dtype {dtype}")
    if not isinstance(precision, jax.core.Tracer):
        host = np.asarray(precision, np.float64)
        asymmetry = np.max(np.abs(host - host.T))
        if asymmetry > 100 * jnp.finfo(dtype).eps * np.max(np.abs(host)):
            raise ValueError(
                f"precision must be symmetric, got max |P - P^T| = {asymmetry:.3g}"
            )
    return precision


def _check_oracle(name, fn, dim, dtype, with_tau):
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    point = jax.ShapeDtypeStruct((dim,), dtype)
    args = (point, jax.ShapeDtypeStruct((), dtype)) if with_tau else (point,)
    out = jax.eval_shape(fn, *args)
    if getattr(out, "shape", None) != (dim,) or out.dtype != dtype:
        got = f"shape {getattr(out, 'shape', None)} dtype {getattr(out, 'dtype', None)}"
        raise ValueError(
            f"{name} must map a point of shape ({dim},) to an array of shape ({dim},) and dtype "
            f"{dtype}, got {got}"
        )


def _float_bits(dtype) -> int:
    return jnp.finfo(dtype).bits


# ----------------------------------------------------------------------------------------------
# oracle


class _DenseSmoothedScore(eqx.Module):
    """``s_τ(x) = −Q diag(λ/(1 + τλ)) Qᵀ(x − m)`` from ``Λ = Q diag(λ) Qᵀ``."""

    eigenvalues: jax.Array
    eigenvectors: jax.Array
    mean: jax.Array

    def __call__(self, x, tau):
        tau = jnp.asarray(tau, self.mean.dtype)
        coordinates = self.eigenvectors.T @ (x - self.mean)
        shrunk = self.eigenvalues / (1 + tau * self.eigenvalues) * coordinates
        return -(self.eigenvectors @ shrunk)

    def score(self, x):
        """The plain score ``∇log π(x) = −Λ(x − m)`` (``τ = 0``)."""
        return self(x, 0.0)


class _MatrixFreeSmoothedScore(eqx.Module):
    """``s_τ(x) = −y`` with ``(I + τΛ) y = Λ(x − m)`` by conjugate gradients."""

    matvec: Callable[[jax.Array], jax.Array] = eqx.field(static=True)
    mean: jax.Array
    cg_tol: float = eqx.field(static=True)
    cg_maxiter: int = eqx.field(static=True)

    def __call__(self, x, tau):
        tau = jnp.asarray(tau, self.mean.dtype)
        y, _ = jax.scipy.sparse.linalg.cg(
            lambda v: v + tau * self.matvec(v), self.matvec(x - self.mean), tol=self.cg_tol,
            maxiter=self.cg_maxiter,
        )
        return -y

    def score(self, x):
        """The plain score ``∇log π(x) = −Λ(x − m)`` (one product, no solve)."""
        return -self.matvec(x - self.mean)


def smoothed_score_oracle(
    precision: jax.Array | Callable[[jax.Array], jax.Array],
    mean: jax.Array,
    *,
    cg_tol: float | None = None,
    cg_maxiter: int | None = None,
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The smoothed score ``s_τ(x) = −(Σ + τI)^{-1}(x − m)`` of ``N(m, Λ^{-1})``, evaluated stably.

    ``τ = 0`` gives the plain score ``−Λ(x − m)``, also available as ``oracle.score(x)`` for the
    gradient-only baselines. The subtraction-free forms used here keep relative accuracy at
    every ``τ``:

    - dense ``Λ = Q diag(λ) Qᵀ`` (one ``eigh`` at construction):
      ``s_τ(x) = −Q diag(λ/(1 + τλ)) Qᵀ(x − m)``;
    - matrix-free (``precision`` a function ``v -> Λ v``): ``s_τ(x) = −y`` with
      ``(I + τΛ) y = Λ(x − m)`` solved by conjugate gradients (``jax.scipy.sparse.linalg.cg``).
      Its accuracy is CG's: the defaults ask for round-off level.

    The oracle is an equinox Module (a pytree whose leaves are ``λ``, ``Q`` and ``m``), so the
    samplers compile once per shape, not once per precision.

    Args:
        precision: ``(d, d)`` symmetric positive-definite matrix, or a function ``v -> Λ v`` on
            ``(d,)`` vectors.
        mean: ``(d,)`` mean ``m``; its dtype is the oracle's.
        cg_tol: matrix-free only: CG relative residual tolerance (default ``10 · eps``).
        cg_maxiter: matrix-free only: CG iteration cap (default ``10 d``).

    Returns:
        ``oracle(x, tau) -> (d,)`` for ``x`` of shape ``(d,)`` and a scalar ``tau >= 0``.

    Raises:
        ValueError: non-square, non-symmetric or non-positive-definite ``precision``; shape
            mismatch with ``mean``; a ``matvec`` returning the wrong shape.
        TypeError: non-floating ``mean`` or a dtype mismatch.

    Example:
        >>> oracle = smoothed_score_oracle(jnp.diag(jnp.array([1.0, 4.0])), jnp.zeros(2))
        >>> oracle(jnp.ones(2), 0.5)        # -(λ/(1 + τλ)) x
        Array([-0.6666667, -1.3333334], dtype=float32)
        >>> oracle.score(jnp.ones(2))
        Array([-1., -4.], dtype=float32)
    """
    mean = _check_vector("mean", mean)
    dim, dtype = mean.shape[0], mean.dtype
    if callable(precision):
        _check_oracle("precision (a matvec)", precision, dim, dtype, with_tau=False)
        return _MatrixFreeSmoothedScore(
            matvec=precision,
            mean=mean,
            cg_tol=10 * float(jnp.finfo(dtype).eps) if cg_tol is None else float(cg_tol),
            cg_maxiter=10 * dim if cg_maxiter is None else int(cg_maxiter),
        )
    precision = _check_precision(precision, dim, dtype)
    eigenvalues, eigenvectors = jnp.linalg.eigh(precision)
    if not isinstance(eigenvalues, jax.core.Tracer) and float(eigenvalues[0]) <= 0:
        raise ValueError(
            f"precision must be positive definite, got smallest eigenvalue {float(eigenvalues[0])}"
        )
    return _DenseSmoothedScore(eigenvalues=eigenvalues, eigenvectors=eigenvectors, mean=mean)


# ----------------------------------------------------------------------------------------------
# the smoothed-score sampler


def _roundoff_floor(rule, lambda_max, dtype) -> float:
    """Predicted worst-case whitened error from round-off: ``u √λ_max Σ_k w_k τ_k``.

    Each level adds an absolute error of about ``u τ_k ‖z‖`` (the cancellation in
    ``τ z + τ² s_τ``), weighted by ``w_k``; in the worst direction the whitening ``Λ^{1/2}``
    multiplies it by ``√λ_max``. Since ``w_k τ_k = (2h/π) √τ_k`` and ``√τ_max ≈ 2/(π ε √λ_min)``,
    this is about ``u √κ / ε``: it is the floor below which the tolerance cannot be met.
    """
    unit_roundoff = float(jnp.finfo(dtype).eps) / 2
    return unit_roundoff * math.sqrt(lambda_max) * float(np.sum(rule.weights * rule.taus))


def _auto_bits(rule, lambda_min, lambda_max, tol, dim) -> int:
    """Fewest bits per coordinate whose dither noise adds at most ``tol`` whitened covariance.

    The level-``k`` answer lies in ``[−B_k, B_k]`` with ``B_k = τ_k ‖z‖/(1 + τ_k λ_min)``; with
    ``N = 2^{b−1} − 1`` codes a side, the noise variance per coordinate is
    ``Σ_k w_k² B_k² / (12 N²)``, of mean ``d Σ_k (w_k τ_k/(1 + τ_k λ_min))² / (12 N²)``; times
    ``λ_max`` it must stay below ``tol``. Hence ``b = O(log κ + log(d/ε))``.
    """
    spread = np.sum((rule.weights * rule.taus / (1 + rule.taus * lambda_min)) ** 2)
    codes = math.sqrt(lambda_max * dim * spread / (12 * tol))
    return 1 + max(1, math.ceil(math.log2(codes + 1)))


@eqx.filter_jit
def _sinc_transform(smoothed_score_fn, z, dither_key, center, weights, taus, lambda_min, bits,
                    known_mean):
    z_norms = jnp.linalg.norm(z, axis=1, keepdims=True)
    if not known_mean:
        # One Tweedie step at the largest level, x + τ s_τ(x) = m + Σ(Σ + τI)^{-1}(x − m),
        # contracts the distance to m by (1 + τλ_min)^{-1} ≈ (πε/2)² before the first level.
        center = center + taus[0] * smoothed_score_fn(center, taus[0])

    def level(carry, xs):
        base, acc = carry
        weight, tau, level_key = xs
        base_score = None if known_mean else smoothed_score_fn(base, tau)
        answers = jax.vmap(lambda zi: resolvent(smoothed_score_fn, zi, tau, base, base_score))(z)
        if bits is not None:
            bound = tau / (1 + tau * lambda_min) * z_norms
            answers, _ = dithered_quantize(level_key, answers, bound, bits)
        if not known_mean:  # each level's shared query is a further Tweedie step towards m
            base = base + tau * base_score
        return (base, acc + weight * answers), None

    level_keys = None if bits is None else jax.random.split(dither_key, taus.shape[0])
    (mean, acc), _ = jax.lax.scan(level, (center, jnp.zeros_like(z)), (weights, taus, level_keys))
    samples = mean[None, :] + acc
    return samples, jnp.logical_not(jnp.all(jnp.isfinite(samples)))


def transform_noise(
    smoothed_score_fn: Callable[[jax.Array, jax.Array], jax.Array],
    z: jax.Array,
    *,
    mean: jax.Array | None = None,
    lambda_min: float,
    lambda_max: float,
    tol: float,
    bits: int | str | None = None,
    key: jax.Array | None = None,
) -> tuple[jax.Array, GaussianInfo]:
    """Maps standard normal noise ``z`` to samples ``x = m + S z``; :func:`sample` without the draw.

    Same method, arguments, accounting and checks as :func:`sample`, which is
    ``transform_noise(fn, normal(key, (num_samples, d)), ...)``. Without ``bits`` the map is linear
    in ``z`` with ``S = r(Λ)`` symmetric, so ``S`` can be read off unit vectors; use it for common
    random numbers or to test the method.

    Args:
        smoothed_score_fn: as in :func:`sample`.
        z: ``(n, d)`` noise; it fixes ``d`` and the dtype.
        mean: ``(d,)`` mean, or ``None`` (estimated by Tweedie steps, see :func:`sample`).
        lambda_min, lambda_max, tol, bits: as in :func:`sample`.
        key: PRNG key for the dither, required when ``bits`` is not ``None``.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(n, d)``.

    Example:
        >>> lam = jnp.array([1.0, 100.0])
        >>> score = smoothed_score_oracle(jnp.diag(lam), jnp.zeros(2))
        >>> x, _ = transform_noise(score, jnp.eye(2), mean=jnp.zeros(2), lambda_min=1.0,
        ...                        lambda_max=100.0, tol=1e-3)
        >>> bool(jnp.allclose(jnp.diag(x), lam**-0.5, rtol=2e-3))
        True
    """
    lambda_min, lambda_max, tol = check_spectrum(lambda_min, lambda_max, tol)
    z = jnp.asarray(z)
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must be a floating-point array, got dtype {z.dtype}")
    if z.ndim != 2 or 0 in z.shape:
        raise ValueError(f"z must have shape (n, d) with n, d >= 1, got shape {z.shape}")
    num_samples, dim = z.shape
    dtype = z.dtype
    known_mean = mean is not None
    if known_mean:
        mean = _check_vector("mean", mean)
        if mean.shape[0] != dim or mean.dtype != dtype:
            raise ValueError(
                f"mean ({mean.dtype}, shape {mean.shape}) must match z ({dtype}, d = {dim})"
            )
        center = mean
    else:
        center = jnp.zeros(dim, dtype)
    _check_oracle("smoothed_score_fn", smoothed_score_fn, dim, dtype, with_tau=True)

    rule = sinc_rule(lambda_min, lambda_max, tol)
    num_levels = rule.taus.shape[0]
    floor = _roundoff_floor(rule, lambda_max, dtype)
    if floor > tol:
        message = (
            f"tol = {tol:g} is below the {dtype} round-off floor {floor:.2g} for "
            f"kappa = {lambda_max / lambda_min:.3g} (about u*sqrt(kappa)/tol)"
        )
        if dtype != jnp.float64:
            raise ValueError(message + "; use float64 inputs (jax_enable_x64) or a larger tol")
        warnings.warn(message + "; the samples will be less accurate than tol", stacklevel=3)

    if bits == "auto":
        bits = _auto_bits(rule, lambda_min, lambda_max, tol, dim)
    elif bits is not None and (
        isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 31
    ):
        raise ValueError(f"bits must be None, 'auto' or a Python int in [2, 31], got {bits!r}")
    if bits is not None and key is None:
        raise ValueError("key (for the dither) is required when bits is not None")

    samples, nonfinite = _sinc_transform(
        smoothed_score_fn,
        z,
        key,
        center,
        jnp.asarray(rule.weights, dtype),
        jnp.asarray(rule.taus, dtype),
        jnp.asarray(lambda_min, dtype),
        bits,
        known_mean,
    )
    per_sample = num_samples * num_levels
    shared = 0 if known_mean else num_levels + 1
    answer_bits = _float_bits(dtype) if bits is None else bits
    info = GaussianInfo(
        num_queries=per_sample + shared,
        num_bits=dim * (per_sample * answer_bits + shared * _float_bits(dtype)),
        num_levels=num_levels,
        nonfinite=nonfinite,
    )
    return samples, info


def sample(
    key: jax.Array,
    smoothed_score_fn: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    mean: jax.Array | None = None,
    dim: int | None = None,
    lambda_min: float,
    lambda_max: float,
    tol: float,
    num_samples: int,
    bits: int | str | None = None,
) -> tuple[jax.Array, GaussianInfo]:
    """Draws ``N(m, Λ^{-1})`` samples from smoothed-score queries only, ``O(log κ)`` per sample.

    With the sinc rule of :func:`jaxsample.kernels.resolvent.sinc_rule` (weights ``w_k``, noise
    levels ``τ_k = e^{-2kh}``) and ``z ~ N(0, I_d)``::

        x = m + Σ_k w_k R_{τ_k} z,     R_τ z = τ z + τ² s_τ(m + z) = (Λ + τ^{-1}I)^{-1} z

    so ``x = m + S z`` with ``S = r(Λ)`` and ``max |r(λ)√λ − 1| ≤ ~tol`` on the spectrum: the
    whitened covariance error is ``‖Λ^{1/2} S² Λ^{1/2} − I‖ ≤ 2e + e²`` (``e`` the scalar error),
    and ``TV ≤ (3/2)‖·‖_F ≤ (3/2)√d (2e + e²)`` (Devroye, Mehrabian & Reddad 2018): take
    ``tol ≈ δ_TV/(3√d)`` for a TV target ``δ_TV``. Levels run in a ``lax.scan``, samples in a
    ``vmap`` (memory ``O(num_samples · d)``).

    Queries (J. Liu, arXiv:2605.27769, 2026): with a known mean, one per level per sample,
    ``q · num_samples``. With ``mean=None`` each level also queries ``s_τ(b_k)`` at a base point
    shared by all samples, ``R_τ z = τ z + τ²[s_τ(b_k + z) − s_τ(b_k)]``, and the base points are
    Tweedie steps ``b_{k+1} = b_k + τ_k s_{τ_k}(b_k)`` from ``b_0 = 0`` (plus one step before the
    first level), which converge to ``m`` (the largest level alone contracts by ``(πε/2)²``):
    ``q · num_samples + q + 1`` queries, and the last base point is the mean estimate.

    Finite-bit answers (``bits``): each answer ``R_{τ_k} z`` is sent with ``b`` bits per
    coordinate through :func:`jaxsample.kernels.resolvent.dithered_quantize` on its known range
    ``±τ_k ‖z‖/(1 + τ_k λ_min)``; the subtractive dither makes the error uniform and independent
    of the answer, so the sample gains independent noise of covariance
    ``‖z‖² Σ_k w_k² B̃_k² / (12 (2^{b−1} − 1)²) · I``. ``bits="auto"`` picks the fewest bits that
    keep its whitened size below ``tol``: ``b = O(log κ + log(d/ε))`` and
    ``q · d · b = O(log² κ)`` bits per sample for fixed ``d`` and ``ε``.

    Precision: ``τ z + τ² s_τ`` cancels at large ``τ``; the predicted worst-case whitened round-off
    is ``u √λ_max Σ_k w_k τ_k ≈ u √κ / tol`` (``u`` the unit round-off). A tolerance below it is
    refused in float32 (``ValueError``: use float64) and warned about in float64. The floor is
    about ``0.7 u √κ / tol``, so float32 serves ``tol = 1e-3`` up to ``κ ≈ 500``; float64 serves
    ``tol = 1e-6`` up to ``κ ≈ 10⁸`` and ``tol = 1e-7`` up to ``κ ≈ 10⁴``; below ``~1e-8`` no
    ``κ`` qualifies through a floating-point oracle, although the scalar rule itself is accurate
    to ``1e-10``. It assumes answers accurate to round-off; an oracle with relative error
    ``δ > u`` (e.g. the dense float32 ``eigh`` oracle, ``δ ~ √d u``) raises it by ``δ/u``.

    Args:
        key: PRNG key.
        smoothed_score_fn: ``s(x, tau) -> (d,)``, the score of ``π ∗ N(0, tau I)`` at ``x``
            (e.g. :func:`smoothed_score_oracle`); called with ``tau`` of the samples' dtype.
            Oracles from :func:`smoothed_score_oracle` are pytrees: a new precision of the same
            shape reuses the compiled sampler; a plain function is compiled once per object.
        mean: ``(d,)`` mean ``m`` if known; it fixes ``d`` and the dtype.
        dim: ``d`` when ``mean`` is ``None`` (the dtype is then JAX's default float).
        lambda_min, lambda_max: bounds on the spectrum of ``Λ``, ``0 < lambda_min <= lambda_max``;
            a loose bound costs only logarithmically.
        tol: relative tolerance ``ε`` of the rational approximation, in ``(0, 1)``.
        num_samples: number of samples, a Python int ``>= 1``.
        bits: ``None`` (exact answers), a Python int in ``[2, 31]`` (bits per coordinate), or
            ``"auto"``.

    Returns:
        ``(samples, info)``: ``(num_samples, d)`` samples and a :class:`GaussianInfo`.

    Raises:
        ValueError: bad spectral bounds or ``tol``, tolerance below the float32 round-off floor,
            an oracle returning the wrong shape or dtype, bad ``bits`` or ``dim``.
        TypeError: non-floating ``mean``, non-int ``num_samples``, a non-callable oracle.

    Example:
        >>> lam, m = jnp.array([1.0, 100.0]), jnp.array([1.0, -1.0])
        >>> score = smoothed_score_oracle(jnp.diag(lam), m)
        >>> x, info = sample(jax.random.key(0), score, mean=m, lambda_min=1.0, lambda_max=100.0,
        ...                  tol=1e-3, num_samples=4)
        >>> x.shape, info.num_queries == 4 * info.num_levels
        ((4, 2), True)
    """
    check_int("num_samples", num_samples, 1)
    if mean is not None:
        mean = _check_vector("mean", mean)
        if dim is not None and dim != mean.shape[0]:
            raise ValueError(f"dim = {dim} does not match mean of shape {mean.shape}")
        dim, dtype = mean.shape[0], mean.dtype
    elif isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a Python int >= 1 when mean is None, got {dim!r}")
    else:
        dtype = jnp.zeros(()).dtype
    noise_key, dither_key = jax.random.split(key)
    z = jax.random.normal(noise_key, (num_samples, dim), dtype)
    return transform_noise(
        smoothed_score_fn, z, mean=mean, lambda_min=lambda_min, lambda_max=lambda_max, tol=tol,
        bits=bits, key=dither_key,
    )


# ----------------------------------------------------------------------------------------------
# baselines: plain gradient queries (products Λ v), and exact Cholesky


def _gradient_info(samples, num_queries, num_levels):
    dim, dtype = samples.shape[1], samples.dtype
    return GaussianInfo(
        num_queries=num_queries,
        num_bits=num_queries * dim * _float_bits(dtype),
        num_levels=num_levels,
        nonfinite=jnp.logical_not(jnp.all(jnp.isfinite(samples))),
    )


def _precision_matvec(score_fn, mean):
    """``Λ v = −∇log π(m + v)``: one gradient query per product."""
    return lambda v: -score_fn(mean + v)


@functools.lru_cache(maxsize=64)
def _chebyshev_coefficients(lambda_min, lambda_max, tol):
    return chebyshev_inverse_sqrt(lambda_min, lambda_max, tol)


@eqx.filter_jit
def _chebyshev_draw(score_fn, key, mean, coefficients, num_samples, interval):
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
    accuracy contract as :func:`sample`; ``n ≈ (√κ/2) log(2/tol)``. Each product is one gradient
    query ``Λ v = −∇log π(m + v)``: ``n · num_samples`` queries. The coefficients are computed on
    the host once per ``(lambda_min, lambda_max, tol)`` and cached. The noise is
    ``z = jax.random.normal(key, (num_samples, d), mean.dtype)``.

    Args:
        key: PRNG key.
        score_fn: ``∇log π``, ``(d,) -> (d,)`` (e.g. ``oracle.score`` of
            :func:`smoothed_score_oracle`, a pytree, so new precisions reuse the compilation).
        mean: ``(d,)`` mean.
        lambda_min, lambda_max, tol: as in :func:`sample`.
        num_samples: Python int ``>= 1``.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(num_samples, d)``.

    Example:
        >>> lam = jnp.array([1.0, 100.0])
        >>> score = lambda x: -lam * x
        >>> x, info = chebyshev_sample(jax.random.key(0), score, mean=jnp.zeros(2),
        ...                            lambda_min=1.0, lambda_max=100.0, tol=1e-3, num_samples=3)
        >>> x.shape, info.num_levels
        ((3, 2), 29)
    """
    lambda_min, lambda_max, tol = check_spectrum(lambda_min, lambda_max, tol)
    check_int("num_samples", num_samples, 1)
    mean = _check_vector("mean", mean)
    _check_oracle("score_fn", score_fn, mean.shape[0], mean.dtype, with_tau=False)
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
        >>> x.shape, info.num_queries
        ((2, 3), 6)
    """
    check_int("num_samples", num_samples, 1)
    mean = _check_vector("mean", mean)
    _check_oracle("score_fn", score_fn, mean.shape[0], mean.dtype, with_tau=False)
    samples = _lanczos_draw(score_fn, key, mean, num_samples, num_steps)
    return samples, _gradient_info(samples, num_steps * num_samples, num_steps)


@eqx.filter_jit
def _cholesky_draw(key, precision, mean, num_samples):
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
        >>> x.shape, info.num_queries
        ((5, 2), 2)
    """
    check_int("num_samples", num_samples, 1)
    mean = _check_vector("mean", mean)
    precision = _check_precision(precision, mean.shape[0], mean.dtype)
    samples = _cholesky_draw(key, precision, mean, num_samples)
    return samples, _gradient_info(samples, mean.shape[0], 0)
