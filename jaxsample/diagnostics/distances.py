"""Two-sample distances and particle diagnostics; all jittable.

Two-sample distances between ``x`` of shape ``(n, d)`` and ``y`` of shape ``(m, d)``:

- :func:`energy_distance` — ``2E‖X−Y‖ − E‖X−X'‖ − E‖Y−Y'‖`` (Székely & Rizzo), V-statistic.
- :func:`mmd` — squared maximum mean discrepancy with a Gaussian kernel.
- :func:`sliced_wasserstein` — sliced W_p over random directions.

The O(n·m) sums run in row chunks of ``chunk_size`` rows of ``x``
(:mod:`jaxsample.kernels.chunking`), so memory stays at ``chunk_size × m`` whatever n is;
``chunk_size=None`` computes the dense matrix (fast for small n).

Particle diagnostics: :func:`damv`, the dimension-averaged marginal variance, which exposes the
variance collapse of kernel methods in high dimension.

Each is an estimator: ``(value, Info)`` with the Info's ``nonfinite`` set when an input or the
value is NaN/inf (under ``jit`` the inputs cannot be checked eagerly).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample._checks import check_array, check_chunk_size, check_int, check_key, is_concrete
from jaxsample.kernels import chunking, pairwise

__all__ = ["DAMVInfo", "EnergyDistanceInfo", "MMDInfo", "SlicedWassersteinInfo", "damv",
           "energy_distance", "mmd", "sliced_wasserstein"]


class EnergyDistanceInfo(NamedTuple):
    """What :func:`energy_distance` reports besides the distance.

    Attributes:
        nonfinite: bool scalar, an input point or the value is NaN/inf.
    """

    nonfinite: jax.Array


class MMDInfo(NamedTuple):
    """What :func:`mmd` reports besides MMD².

    Attributes:
        bandwidth: the kernel width ``h`` used (the median heuristic's when none was given).
        nonfinite: bool scalar, an input point or the value is NaN/inf.
    """

    bandwidth: jax.Array
    nonfinite: jax.Array


class SlicedWassersteinInfo(NamedTuple):
    """What :func:`sliced_wasserstein` reports besides the distance.

    Attributes:
        nonfinite: bool scalar, an input point or the value is NaN/inf.
    """

    nonfinite: jax.Array


class DAMVInfo(NamedTuple):
    """What :func:`damv` reports besides the average.

    Attributes:
        variance_ratio: ``(d,)`` the per-coordinate ``Var̂(x_k) / σ_k²`` that are averaged.
        nonfinite: bool scalar, a particle or the value is NaN/inf.
    """

    variance_ratio: jax.Array
    nonfinite: jax.Array


def _nonfinite(value, *arrays):
    finite = jnp.all(jnp.isfinite(value))
    for array in arrays:
        finite = finite & jnp.all(jnp.isfinite(array))
    return ~finite


def _check_pair(x, y):
    x = check_array("x", x, ndim=2, min_rows=1)
    y = check_array("y", y, ndim=2, min_rows=1)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same dim, got {x.shape[1]} and {y.shape[1]}")
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    return x, y


def _pairwise_sum(fn: Callable, x, y, chunk_size):
    """Σ_ij fn(‖x_i − y_j‖²), dense or in row chunks of x."""
    centre = jnp.mean(y, axis=0)
    y_sq = pairwise.sq_norms(y - centre[None, :])

    def row_sums(rows):
        return jnp.sum(fn(pairwise.sq_distances(rows, y, centre=centre, y_sq_norms=y_sq)), axis=1)

    return chunking.sum_rows(row_sums, x, chunk_size=chunk_size)


def _safe_sqrt(sq):
    """sqrt with a finite gradient at 0 (coincident points) that still propagates NaN."""
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1)), sq)


def energy_distance(x, y, *, chunk_size: int | None = None
                    ) -> tuple[jax.Array, EnergyDistanceInfo]:
    """Energy distance ``2E‖X−Y‖ − E‖X−X'‖ − E‖Y−Y'‖`` between two samples (V-statistic).

    Zero for identical samples, non-negative, zero in the population iff the laws are equal.

    Args:
        x: ``(n, d)``; y: ``(m, d)``, same dtype.
        chunk_size: rows per chunk for the pairwise sums (None: dense).

    Returns:
        ``(distance, EnergyDistanceInfo)``: a scalar of the inputs' dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0]])
        >>> value, info = energy_distance(x, x)
        >>> float(value), bool(info.nonfinite)
        (0.0, False)
    """
    x, y = _check_pair(x, y)
    return _energy_distance(x, y, check_chunk_size(chunk_size))


@functools.partial(jax.jit, static_argnums=2)
def _energy_distance(x, y, chunk_size):
    n, m = x.shape[0], y.shape[0]
    xy = _pairwise_sum(_safe_sqrt, x, y, chunk_size) / (n * m)
    xx = _pairwise_sum(_safe_sqrt, x, x, chunk_size) / (n * n)
    yy = _pairwise_sum(_safe_sqrt, y, y, chunk_size) / (m * m)
    value = 2 * xy - xx - yy
    return value, EnergyDistanceInfo(_nonfinite(value, x, y))


def _median_bandwidth(x, y):
    z = jnp.concatenate([x, y])
    return jnp.sqrt(pairwise.median_scale(z, exclude_diagonal=True,
                                          max_entries=z.shape[0] * (z.shape[0] - 1) // 2))


def mmd(x, y, bandwidth=None, *, unbiased: bool = True, chunk_size: int | None = None
        ) -> tuple[jax.Array, MMDInfo]:
    """Squared MMD with the Gaussian kernel ``k(a, b) = exp(−‖a−b‖² / (2h²))``.

    ``MMD² = E k(X,X') + E k(Y,Y') − 2 E k(X,Y)``. The unbiased U-statistic (default) drops the
    diagonal terms, so its expectation is exactly MMD² (it can be slightly negative); with
    ``unbiased=False`` the V-statistic is returned (non-negative, biased upward).

    Args:
        x: ``(n, d)``; y: ``(m, d)``; n, m ≥ 2 for the unbiased estimate.
        bandwidth: ``h > 0``; None uses the median pairwise distance of the pooled sample
            (computed densely: pass a bandwidth for large samples).
        unbiased: U- or V-statistic.
        chunk_size: rows per chunk for the pairwise sums (None: dense).

    Returns:
        ``(mmd2, MMDInfo)``: a scalar of the inputs' dtype; the Info holds the bandwidth used.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (200, 2))
        >>> value, info = mmd(x, x + 0.0, bandwidth=1.0, unbiased=False)
        >>> abs(float(value)) < 1e-6, float(info.bandwidth)
        (True, 1.0)
    """
    x, y = _check_pair(x, y)
    check_chunk_size(chunk_size)
    if unbiased and min(x.shape[0], y.shape[0]) < 2:
        raise ValueError("the unbiased MMD needs at least 2 samples in x and in y")
    if bandwidth is not None:
        bandwidth = jnp.asarray(bandwidth, x.dtype)
        if bandwidth.shape != ():
            raise ValueError(f"bandwidth must be a scalar, got shape {bandwidth.shape}")
        if is_concrete(bandwidth) and not bool(bandwidth > 0):
            raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    return _mmd(x, y, bandwidth, bool(unbiased), chunk_size)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _mmd(x, y, bandwidth, unbiased, chunk_size):
    n, m = x.shape[0], y.shape[0]
    if bandwidth is None:
        # identical samples have a zero median distance: floor it so the kernel stays defined
        h = jnp.maximum(_median_bandwidth(x, y), jnp.finfo(x.dtype).tiny ** 0.25)
    else:
        h = bandwidth

    def kernel(sq):
        return jnp.exp(-sq / (2 * h * h))

    kxy = _pairwise_sum(kernel, x, y, chunk_size) / (n * m)
    kxx = _pairwise_sum(kernel, x, x, chunk_size)
    kyy = _pairwise_sum(kernel, y, y, chunk_size)
    if unbiased:  # k(a, a) = 1 on the diagonal
        kxx, kyy = (kxx - n) / (n * (n - 1)), (kyy - m) / (m * (m - 1))
    else:
        kxx, kyy = kxx / (n * n), kyy / (m * m)
    value = kxx + kyy - 2 * kxy
    return value, MMDInfo(h, _nonfinite(value, x, y))


def _quantiles(sorted_proj, num_levels):
    """Empirical quantile function at the midpoints (k + ½)/num_levels, per row."""
    n = sorted_proj.shape[-1]
    levels = (jnp.arange(num_levels, dtype=sorted_proj.dtype) + 0.5) / num_levels
    index = jnp.floor(levels * n).astype(jnp.int32)
    return sorted_proj[..., index]


def sliced_wasserstein(key, x, y, *, num_projections: int = 128, p: int = 2
                       ) -> tuple[jax.Array, SlicedWassersteinInfo]:
    """Sliced Wasserstein-p distance ``(E_θ W_pᵖ(θᵀX, θᵀY))^{1/p}``, θ uniform on the sphere.

    Each 1-D distance compares empirical quantile functions at ``max(n, m)`` levels (exact when
    ``n == m``: it is then the sorted-sample matching).

    Args:
        key: PRNG key for the directions.
        x: ``(n, d)``; y: ``(m, d)``.
        num_projections: number of random directions.
        p: order (≥ 1).

    Returns:
        ``(distance, SlicedWassersteinInfo)``: a scalar of the inputs' dtype.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (100, 3))
        >>> value, _ = sliced_wasserstein(jax.random.key(1), x, x + 1.0, num_projections=256)
        >>> round(float(value), 1)  # a shift by 1 in every coordinate: (E (θ·1)²)^½ = 1
        1.0
    """
    key = check_key("key", key)
    x, y = _check_pair(x, y)
    check_int("num_projections", num_projections, 1)
    check_int("p", p, 1)
    return _sliced_wasserstein(key, x, y, num_projections, p)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _sliced_wasserstein(key, x, y, num_projections, p):
    theta = jax.random.normal(key, (num_projections, x.shape[1]), x.dtype)
    theta = theta / jnp.linalg.norm(theta, axis=1, keepdims=True)
    levels = max(x.shape[0], y.shape[0])
    qx = _quantiles(jnp.sort(theta @ x.T, axis=1), levels)
    qy = _quantiles(jnp.sort(theta @ y.T, axis=1), levels)
    value = jnp.mean(jnp.abs(qx - qy) ** p) ** (1.0 / p)
    return value, SlicedWassersteinInfo(_nonfinite(value, x, y))


def damv(x, target_var=None) -> tuple[jax.Array, DAMVInfo]:
    """Dimension-averaged marginal variance ``(1/d) Σ_k Var̂(x_k) / σ_k²`` (ideal value 1).

    Args:
        x: particles ``(n, d)``, n ≥ 2 (unbiased variances, ddof = 1).
        target_var: the target's marginal variances ``(d,)`` or a scalar; None means 1.

    Returns:
        ``(damv, DAMVInfo)``: a scalar of ``x``'s dtype; the Info holds the per-coordinate
        ratios.

    Example:
        >>> import jax.numpy as jnp
        >>> value, info = damv(jnp.array([[0.0, 0.0], [2.0, 2.0]]))
        >>> float(value), info.variance_ratio.tolist()
        (2.0, [2.0, 2.0])
    """
    x = check_array("x", x, ndim=2, min_rows=2)
    var = jnp.var(x, axis=0, ddof=1)
    if target_var is not None:
        target_var = jnp.asarray(target_var, x.dtype)
        if target_var.shape not in ((), (x.shape[1],)):
            raise ValueError(f"target_var must be a scalar or shape ({x.shape[1]},), "
                             f"got {target_var.shape}")
        if is_concrete(target_var) and not bool(jnp.all(target_var > 0)):
            raise ValueError("target_var must be > 0")
        var = var / target_var
    value = jnp.mean(var)
    return value, DAMVInfo(var, _nonfinite(value, x))
