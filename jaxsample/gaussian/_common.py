"""What every Gaussian sampler of the family shares: the Info record and the argument checks."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_array, check_fn_output, check_number, is_concrete
from jaxsample.kernels.solver import SolverStats


class GaussianInfo(NamedTuple):
    """What a Gaussian sampler spent (all fields are arrays).

    Attributes:
        num_queries: int32, oracle evaluations at single points, all samples together (smoothed
            scores for :func:`~jaxsample.gaussian.sample`, plain gradients for the baselines).
        num_levels: int32, quadrature levels (resolvent sampler), polynomial degree (Chebyshev)
            or Lanczos steps; the queries per sample.
        answer_bits: int32, bits per coordinate of each per-sample answer: ``b`` for quantised
            answers, the float width (32 or 64) otherwise. One sample's answers take
            ``num_levels · d · answer_bits`` bits.
        solver: :class:`~jaxsample.SolverStats` of the oracle's inner solver: its iterations
            along one sample's queries (at each level the largest over the samples, which is what
            the batched solve runs), plus those of the shared queries (0 when the oracle solves
            nothing: dense oracle, plain functions, the baselines), and the first unsuccessful
            result of any solve (``successful`` when there is none).
        nonfinite: bool, ``True`` if any sample is not finite.
    """

    num_queries: jax.Array
    num_levels: jax.Array
    answer_bits: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def no_solve() -> SolverStats:
    """The report of a query that solves nothing."""
    return SolverStats.of(0, converged=jnp.ones((), bool))


def make_info(num_queries: int, num_levels: int, answer_bits: int, samples: jax.Array,
              stats: SolverStats | None = None) -> GaussianInfo:
    """A :class:`GaussianInfo` from host counts, the samples and the (summed) solver report."""
    stats = no_solve() if stats is None else stats
    return GaussianInfo(
        num_queries=jnp.asarray(num_queries, jnp.int32),
        num_levels=jnp.asarray(num_levels, jnp.int32),
        answer_bits=jnp.asarray(answer_bits, jnp.int32),
        solver=stats,
        nonfinite=jnp.logical_not(jnp.all(jnp.isfinite(samples))),
    )


def warn_if_nonfinite(nonfinite, what: str, *, stacklevel: int = 3) -> None:
    """One ``RuntimeWarning`` when an eager call produced non-finite samples (nothing under
    tracing: the flag stays in ``info.nonfinite``)."""
    if is_concrete(nonfinite) and bool(np.any(np.asarray(nonfinite))):
        warnings.warn(f"{what} returned non-finite samples (info.nonfinite); check that the "
                      "oracle is finite and the spectrum bounds hold", RuntimeWarning,
                      stacklevel=stacklevel)


def float_bits(dtype) -> int:
    return jnp.finfo(dtype).bits


def check_spectrum(lambda_min, lambda_max, tol) -> tuple[float, float, float]:
    """``0 < lambda_min <= lambda_max`` (finite) and ``0 < tol < 1``, as Python floats.

    They fix the number of quadrature levels, a static shape, so they must be concrete.
    """
    lambda_min = check_number("lambda_min", lambda_min)
    lambda_max = check_number("lambda_max", lambda_max)
    tol = check_number("tol", tol)
    if lambda_max < lambda_min:
        raise ValueError(f"lambda_max must be >= lambda_min = {lambda_min}, got {lambda_max}")
    if tol >= 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    return lambda_min, lambda_max, tol


def check_mean(mean, name: str = "mean") -> jax.Array:
    """A finite ``(d,)`` floating vector, ``d >= 1``."""
    return check_array(name, mean, ndim=1, min_rows=1, finite=True)


def check_noise(z) -> jax.Array:
    """A floating ``(n, d)`` array of noise, ``n, d >= 1``."""
    z = check_array("z", z, ndim=2, min_rows=1)
    if z.shape[1] < 1:
        raise ValueError(f"z must have shape (n, d) with n, d >= 1, got shape {z.shape}")
    return z


def check_precision(precision, dim: int, dtype) -> jax.Array:
    """A symmetric ``(d, d)`` matrix of the mean's dtype (symmetry checked when concrete)."""
    precision = check_array("precision", precision, ndim=2, finite=True)
    if precision.shape[0] != precision.shape[1]:
        raise ValueError(f"precision must be a square (d, d) matrix, got shape {precision.shape}")
    if precision.shape[0] != dim:
        raise ValueError(
            f"precision has shape {precision.shape} but mean has dimension {dim}; they must match"
        )
    if precision.dtype != dtype:
        raise TypeError(f"precision must have the mean's dtype {dtype}, got {precision.dtype}")
    if is_concrete(precision):
        host = np.asarray(precision, np.float64)
        asymmetry = np.max(np.abs(host - host.T))
        if asymmetry > 100 * jnp.finfo(dtype).eps * np.max(np.abs(host)):
            raise ValueError(f"precision must be symmetric, got max |P - P^T| = {asymmetry:.3g}")
    return precision


def check_oracle(name: str, fn, dim: int, dtype, *, with_tau: bool):
    """A callable mapping a ``(d,)`` point (and scalar ``tau``) to a ``(d,)`` array of ``dtype``."""
    point = jax.ShapeDtypeStruct((dim,), dtype)
    check_fn_output(name, fn, (point, jax.ShapeDtypeStruct((), dtype)) if with_tau else point,
                    (dim,), dtype=dtype)
    return fn
