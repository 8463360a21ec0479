"""Extreme-value kernels: the generalised Pareto law (GPD) and its peaks-over-threshold fit.

Excesses ``y = x − u >= 0`` over a high threshold ``u`` are approximately GPD(ξ, σ)
(Pickands–Balkema–de Haan):

.. math::

    \\bar F(y) = (1 + ξy/σ)^{−1/ξ}, \\qquad f(y) = σ^{−1}(1 + ξy/σ)^{−1/ξ − 1},

on ``0 <= y`` (and ``y < −σ/ξ`` when ``ξ < 0``); ``ξ = 0`` is the exponential law. The hazard is
``λ(y) = f/\\bar F = 1/(σ + ξy)``. Every formula goes through ``log1p(z)/z`` and ``expm1(w)/w`` at
``z = ξy/σ``, so ``ξ → 0`` is continuous without a branch on ξ.

:func:`gpd_fit` is the maximum-likelihood fit by Grimshaw's profile likelihood (Grimshaw 1993,
*Technometrics* 35): with ``θ = ξ/σ``, the likelihood maximised over ξ for fixed θ has
``ξ(θ) = mean log(1 + θy)`` and profile ``ℓ_p(θ) = −n(log(ξ(θ)/θ) + ξ(θ) + 1)``, a function of one
variable. It is maximised over ``v = log(1 + θ·max y)`` (any real ``v`` satisfies the support
constraint ``1 + θy > 0``) by a grid search followed by golden-section refinement. A quasi-Newton
solver on ``(ξ, log σ)`` was not used: its line search steps outside the support
``1 + ξy/σ > 0``, where the log-likelihood is undefined. The likelihood is unbounded as ``ξ → −1``
from below, so the fit is restricted to ``ξ >= −1``; the usual asymptotics hold for ``ξ > −1/2``.

Inputs are valid (excesses ``>= 0``, scale ``> 0``): the public entry point checked them.
:func:`gpd_fit` is jitted.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.kernels.solver import SolverStats

__all__ = [
    "GPDFit",
    "expm1_ratio",
    "gpd_fit",
    "gpd_hazard",
    "gpd_inverse_logsf",
    "gpd_logpdf",
    "gpd_logsf",
    "log1p_ratio",
]

_SMALL = 1e-4  # below this |z| the ratios use their Taylor series
_GRID = np.linspace(-6.0, 24.0, 121)  # v = log(1 + θ·max y); spacing 0.25, includes v = 0
_GOLDEN_STEPS = 40
_SHAPE_EDGE = 1e-3  # ξ within this of −1 lies on the constraint ξ >= −1
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


class GPDFit(NamedTuple):
    """A GPD fit of threshold excesses.

    Attributes:
        shape: ξ.
        scale: σ.
        log_likelihood: the maximised log-likelihood (weighted).
        num_exceedances: the (weighted) number of excesses fitted.
        shape_se: asymptotic standard error of ξ, ``(1 + ξ)/√n`` (Smith 1984; valid for
            ``ξ > −1/2``).
        log_scale_se: asymptotic standard error of ``log σ``, ``√(2(1 + ξ)/n)``.
        solver: the search's :class:`~jaxsample.kernels.solver.SolverStats`: likelihood
            evaluations (grid points plus golden-section steps) and ``RESULTS.successful``
            when the maximum lies inside the search range and is finite
            (``max_iterations_reached`` on its edge: past the grid, or ``ξ`` within 1e-3 of
            the constraint ``ξ >= −1`` where bounded or tied excesses put it;
            ``nonfinite`` for a non-finite fit).
        nonfinite: any output is not finite.
    """

    shape: jax.Array
    scale: jax.Array
    log_likelihood: jax.Array
    num_exceedances: jax.Array
    shape_se: jax.Array
    log_scale_se: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def log1p_ratio(z: jax.Array) -> jax.Array:
    """``log1p(z)/z`` for ``z > −1``, equal to 1 at ``z = 0`` (series below ``|z| < 1e-4``).

    Example:
        >>> import jax.numpy as jnp
        >>> [round(float(v), 6) for v in log1p_ratio(jnp.array([0.0, 1.0]))]
        [1.0, 0.693147]
    """
    small = jnp.abs(z) < _SMALL
    zs = jnp.where(small, jnp.ones_like(z), z)
    return jnp.where(small, 1 - z / 2 + z * z / 3 - z * z * z / 4, jnp.log1p(zs) / zs)


def expm1_ratio(w: jax.Array) -> jax.Array:
    """``expm1(w)/w``, equal to 1 at ``w = 0`` (series below ``|w| < 1e-4``).

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(expm1_ratio(jnp.array(1e-9))), 6)
        1.0
    """
    small = jnp.abs(w) < _SMALL
    ws = jnp.where(small, jnp.ones_like(w), w)
    return jnp.where(small, 1 + w / 2 + w * w / 6 + w * w * w / 24, jnp.expm1(ws) / ws)


def _support(y, shape, scale):
    return (y >= 0) & (1 + shape * y / scale > 0)


def gpd_logsf(y: jax.Array, shape: jax.Array, scale: jax.Array) -> jax.Array:
    """``log \\bar F(y) = −(y/σ)·log1p(z)/z``, ``z = ξy/σ``; 0 below 0, ``−inf`` past the end.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(gpd_logsf(jnp.array(2.0), jnp.array(0.0), jnp.array(1.0))), 6)
        -2.0
    """
    inside = _support(y, shape, scale)
    ys = jnp.where(inside, y, jnp.zeros_like(y))
    value = -(ys / scale) * log1p_ratio(shape * ys / scale)
    return jnp.where(y < 0, jnp.zeros_like(value), jnp.where(inside, value, -jnp.inf))


def gpd_logpdf(y: jax.Array, shape: jax.Array, scale: jax.Array) -> jax.Array:
    """``log f(y) = −log σ − log1p(z) + log \\bar F(y)``; ``−inf`` outside the support.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(gpd_logpdf(jnp.array(1.0), jnp.array(0.0), jnp.array(2.0))), 6)
        -1.193147
    """
    inside = _support(y, shape, scale)
    ys = jnp.where(inside, y, jnp.zeros_like(y))
    z = shape * ys / scale
    value = -jnp.log(scale) - jnp.log1p(z) - (ys / scale) * log1p_ratio(z)
    return jnp.where(inside, value, -jnp.inf)


def gpd_inverse_logsf(log_sf: jax.Array, shape: jax.Array, scale: jax.Array) -> jax.Array:
    """The excess with ``log \\bar F(y) = log_sf`` (``<= 0``): ``y = σ·(−ℓ)·expm1(−ξℓ)/(−ξℓ)``.

    Example:
        >>> import jax.numpy as jnp
        >>> y = gpd_inverse_logsf(jnp.array(-3.0), jnp.array(0.5), jnp.array(1.0))
        >>> round(float(gpd_logsf(y, jnp.array(0.5), jnp.array(1.0))), 5)
        -3.0
    """
    return scale * (-log_sf) * expm1_ratio(-shape * log_sf)


def gpd_hazard(y: jax.Array, shape: jax.Array, scale: jax.Array) -> jax.Array:
    """``λ(y) = 1/(σ + ξy)``; ``+inf`` at and beyond the upper end of a bounded support.

    Example:
        >>> import jax.numpy as jnp
        >>> float(gpd_hazard(jnp.array(1.0), jnp.array(0.5), jnp.array(1.5)))
        0.5
    """
    denominator = scale + shape * y
    safe = jnp.where(denominator > 0, denominator, jnp.ones_like(denominator))
    return jnp.where(denominator > 0, 1 / safe, jnp.inf)


def _profile(v, y, weights, y_max, total):
    """ξ(θ), σ(θ) and the profile log-likelihood at ``θ = expm1(v)/y_max``."""
    theta = jnp.expm1(v) / y_max
    z = theta * y
    log_terms = jnp.log1p(jnp.maximum(z, -1 + jnp.finfo(y.dtype).eps))
    shape = jnp.sum(weights * log_terms) / total
    scale = jnp.sum(weights * y * log1p_ratio(z)) / total  # = ξ/θ, continuous at θ = 0
    value = -total * (jnp.log(scale) + shape + 1)
    value = jnp.where((shape >= -1) & jnp.isfinite(value), value, -jnp.inf)
    return shape, scale, value


@jax.jit
def gpd_fit(excesses: jax.Array, weights: jax.Array | None = None) -> GPDFit:
    """Maximum-likelihood GPD fit of excesses ``y >= 0`` by Grimshaw's profile likelihood.

    Args:
        excesses: ``(n,)`` excesses over the threshold (entries with weight 0 are ignored; they
            must still be finite).
        weights: ``(n,)`` non-negative weights (a 0/1 mask selects the excesses of one class
            under ``jit``); ``None`` gives weight 1 to every entry. At least two positive weights.

    Returns:
        A :class:`GPDFit`.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> y = np.random.default_rng(0).exponential(size=4000)
        >>> fit = gpd_fit(jnp.asarray(y))
        >>> bool(abs(fit.shape) < 0.05), bool(abs(fit.scale - 1) < 0.05)
        (True, True)
    """
    with jax.named_scope("gpd_fit"):
        y = excesses
        dtype = y.dtype
        weights = jnp.ones_like(y) if weights is None else weights.astype(dtype)
        total = jnp.sum(weights)
        y_max = jnp.max(jnp.where(weights > 0, y, jnp.zeros_like(y)))
        y_max = jnp.where(y_max > 0, y_max, jnp.ones_like(y_max))
        grid = jnp.asarray(_GRID, dtype)
        values = jax.vmap(lambda v: _profile(v, y, weights, y_max, total)[2])(grid)
        best = jnp.argmax(values)
        interior = (best > 0) & (best < grid.shape[0] - 1)
        lo = grid[jnp.maximum(best - 1, 0)]
        hi = grid[jnp.minimum(best + 1, grid.shape[0] - 1)]
        golden = jnp.asarray(_GOLDEN, dtype)

        def value_at(v):
            return _profile(v, y, weights, y_max, total)[2]

        def step(_, carry):
            a, b, c, d, fc, fd = carry
            # keep the larger of f(c), f(d): the maximum lies in [a, d] or [c, b]
            left = fc >= fd
            a, b = jnp.where(left, a, c), jnp.where(left, d, b)
            c_new = b - golden * (b - a)
            d_new = a + golden * (b - a)
            f_new = value_at(jnp.where(left, c_new, d_new))
            c, d = jnp.where(left, c_new, d), jnp.where(left, c, d_new)
            fc, fd = jnp.where(left, f_new, fd), jnp.where(left, fc, f_new)
            return a, b, c, d, fc, fd

        c0, d0 = hi - golden * (hi - lo), lo + golden * (hi - lo)
        a, b, c, d, fc, fd = jax.lax.fori_loop(
            0, _GOLDEN_STEPS, step, (lo, hi, c0, d0, value_at(c0), value_at(d0)))
        v_best = jnp.where(fc >= fd, c, d)
        # the golden bracket never leaves [lo, hi]; keep the grid point if it is better
        shape, scale, value = _profile(v_best, y, weights, y_max, total)
        g_shape, g_scale, g_value = _profile(grid[best], y, weights, y_max, total)
        better = value >= g_value
        shape = jnp.where(better, shape, g_shape)
        scale = jnp.where(better, scale, g_scale)
        value = jnp.where(better, value, g_value)
        one_plus = jnp.maximum(1 + shape, jnp.zeros_like(shape))
        shape_se = one_plus / jnp.sqrt(total)
        log_scale_se = jnp.sqrt(2 * one_plus / total)
        finite = jnp.isfinite(shape) & jnp.isfinite(scale) & jnp.isfinite(value)
        # ξ >= −1 is a constraint, not a property of the likelihood (which is unbounded for
        # ξ < −1): a maximum pressed against it (bounded, uniform-like or tied excesses) is an
        # edge of the search, not an interior optimum
        feasible_interior = shape > -1 + _SHAPE_EDGE
        return GPDFit(
            shape=shape, scale=scale, log_likelihood=value, num_exceedances=total,
            shape_se=shape_se, log_scale_se=log_scale_se,
            solver=SolverStats.of(_GRID.shape[0] + _GOLDEN_STEPS + 2,
                                  converged=interior & feasible_interior & finite,
                                  nonfinite=~finite),
            nonfinite=~finite)
