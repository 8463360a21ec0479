r"""The exponential tilt of MM-SOLD's large-particle limit: exact (quadrature) and plug-in (Stein).

As ``B -> inf`` each MM-SOLD particle's law is
:math:`p^*(z) \propto e^{-V(z) - \lambda^\top u - \frac12 u^\top \Lambda u}`,
:math:`u = z - \mu^*`, with the tilt :math:`(\lambda, \Lambda)` that makes its mean and
covariance :math:`(\mu^*, \Sigma^*)`.
:func:`exact_tilt` solves those moment equations by quadrature (``d <= 2``); :func:`plugin_tilt` is
the cheaper Stein estimate of the official code. Re-exported from :mod:`jaxsample.particles`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_chunk_size,
    check_hyperparameter,
    check_int,
    check_key,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.kernels import chunking, pairwise
from jaxsample.kernels.interactions import (
    antithetic_normal,
    smoothed_kde_score,
    symmetric_lyapunov_solve,
)
from jaxsample.kernels.solver import SolverStats
from jaxsample.particles._validation import check_data, check_num_smoothing_samples
from jaxsample.particles.mmsold import MomentTargets

__all__ = ["ExactTiltInfo", "PluginTiltInfo", "Tilt", "exact_tilt", "plugin_tilt"]


class Tilt(NamedTuple):
    """Tilt ``lambda^T u + u^T Lambda u / 2``, ``u = z - mu*``: ``linear`` (d,), ``quadratic``
    (d, d)."""

    linear: jax.Array
    quadratic: jax.Array


class PluginTiltInfo(NamedTuple):
    """What :func:`plugin_tilt` reports besides the tilt.

    Attributes:
        nonfinite: a coefficient of the tilt is NaN/inf.
    """

    nonfinite: jax.Array


class ExactTiltInfo(NamedTuple):
    """What :func:`exact_tilt` reports besides the tilt (arrays of the data's dtype).

    Attributes:
        moment_error: max abs error of the tilted law's mean and covariance on the grid.
        grid: ``(G, d)`` quadrature points.
        log_density: ``(G,)`` log of the tilted density at ``grid`` (normalised on the grid).
        naive_log_density: ``(G,)`` log of the untilted ``e^{-V}``, normalised on the grid.
        cell_volume: volume of one grid cell.
        solver: :class:`~jaxsample.SolverStats` of the Newton iteration (``successful`` when the
            moment error met ``tol`` within ``max_iterations``).
        nonfinite: the tilt or the moment error is NaN/inf.
    """

    moment_error: jax.Array
    grid: jax.Array
    log_density: jax.Array
    naive_log_density: jax.Array
    cell_volume: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def plugin_tilt(key: jax.Array, data, *, bandwidth: float, smoothing: float,
                num_smoothing_samples: int = 2048, num_quadrature: int | None = None,
                estimation_points=None, chunk_size: int | None = 16
                ) -> tuple[Tilt, PluginTiltInfo]:
    r"""Plug-in Stein estimate of the tilt (what the reference code uses; approximate).

    Evaluates the Stein identities with the estimation points (default: the data) in place of
    :math:`p^*`: :math:`\hat\lambda = -\mathrm{mean}_i \nabla V(x_i)`,
    :math:`\hat C = \mathrm{mean}_i (x_i - \mu^*)\nabla V(x_i)^\top`,
    :math:`\hat S = I - (\hat C + \hat C^\top)/2`, then solves the Lyapunov equation
    :math:`\Sigma^*\Lambda + \Lambda\Sigma^* = 2\hat S` with
    :func:`~jaxsample.kernels.interactions.symmetric_lyapunov_solve` (eigendecomposition; jittable,
    unlike SciPy's Bartels–Stewart). ``grad V`` is estimated with ``M`` antithetic draws shared by
    all points (common random numbers keep antipodal symmetries of the data exact), or, with
    ``num_quadrature`` set, by a deterministic Gauss–Hermite product rule (``q^d`` nodes: low ``d``
    only), which also keeps rotation symmetries by quarter turns. The data are not
    distributed as :math:`p^*`, so this misses the exact tilt by more as ``s`` grows; use
    :func:`exact_tilt` for the law the particles actually reach.

    Args:
        key: PRNG key for the smoothing draws.
        data: ``(n, d)`` training data.
        bandwidth: ``sigma_g > 0``.
        smoothing: ``s >= 0``.
        num_smoothing_samples: ``M``, even (Monte Carlo).
        num_quadrature: Gauss–Hermite nodes per axis; replaces Monte Carlo when given.
        estimation_points: ``(P, d)`` points standing in for ``p*``; default ``data``.
        chunk_size: estimation points per chunk of the score evaluation, which holds
            ``chunk_size × M × n`` logits at a time (None: all ``P`` at once).

    Returns:
        ``(Tilt, PluginTiltInfo)``, the tilt in the data's dtype.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> angles = jnp.arange(12.0) * (2 * jnp.pi / 12)
        >>> circle = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)
        >>> tilt, _ = plugin_tilt(jax.random.key(0), circle, bandwidth=0.1, smoothing=0.2)
        >>> bool(jnp.all(jnp.abs(tilt.linear) < 1e-3)), bool(tilt.quadratic[0, 0] < 0)
        (True, True)
    """
    key = check_key("key", key)
    data = check_data(data)
    mean, cov, _ = MomentTargets.from_data(data, bandwidth)
    smoothing = check_hyperparameter("smoothing", smoothing, positive=False)
    num_smoothing_samples = check_num_smoothing_samples(num_smoothing_samples)
    chunk_size = check_chunk_size(chunk_size)
    points = data if estimation_points is None else check_data(estimation_points,
                                                                "estimation_points")
    if points.shape[1] != data.shape[1] or points.dtype != data.dtype:
        raise ValueError(
            f"estimation_points must have shape (P, {data.shape[1]}) and dtype {data.dtype}, "
            f"got {points.shape} {points.dtype}")
    dim = data.shape[1]
    centred, centred_data = points - mean[None, :], data - mean[None, :]
    if num_quadrature is None:
        shared = antithetic_normal(key, 1, num_smoothing_samples, dim, data.dtype)
        noise = jnp.broadcast_to(shared, (points.shape[0], num_smoothing_samples, dim))
        grad_v = -smoothed_kde_score(centred, centred_data, bandwidth,
                                     jnp.asarray(smoothing, data.dtype), noise,
                                     chunk_size=chunk_size)
    else:
        num_quadrature = check_int("num_quadrature", num_quadrature, 1)
        grad_v = jax.grad(lambda p: jnp.sum(_smoothed_potential(
            p, centred_data, bandwidth, jnp.asarray(smoothing, data.dtype),
            num_quadrature)))(centred)
    linear = -jnp.mean(grad_v, axis=0)
    stein = centred.T @ grad_v / points.shape[0]
    rhs = 2 * jnp.eye(dim, dtype=data.dtype) - (stein + stein.T)
    tilt = Tilt(linear, symmetric_lyapunov_solve(cov, rhs))
    finite = jnp.all(jnp.isfinite(tilt.linear)) & jnp.all(jnp.isfinite(tilt.quadratic))
    return tilt, PluginTiltInfo(~finite)


def _smoothed_potential(points, data, bandwidth, smoothing, num_quadrature, chunk_size=16):
    """``V(z) = E U(z + s eps)`` by a Gauss–Hermite product rule (``q^d`` nodes), up to a
    constant."""
    dim = data.shape[1]
    nodes_1d, weights_1d = np.polynomial.hermite_e.hermegauss(num_quadrature)
    nodes = np.stack(np.meshgrid(*[nodes_1d] * dim, indexing="ij"), axis=-1).reshape(-1, dim)
    log_weights = np.log(weights_1d)
    log_w = sum(np.meshgrid(*[log_weights] * dim, indexing="ij")).reshape(-1)
    weights = np.exp(log_w - np.logaddexp.reduce(log_w))
    nodes = jnp.asarray(nodes, data.dtype)
    weights = jnp.asarray(weights, data.dtype)

    data_sq_norms = pairwise.sq_norms(data)
    inv_two_var = 0.5 / jnp.square(jnp.asarray(bandwidth, data.dtype))

    def potential(block):
        shifted = block[:, None, :] + smoothing * nodes[None, :, :]
        sq = pairwise.sq_distances(shifted.reshape(-1, dim), data, y_sq_norms=data_sq_norms)
        sq = sq.reshape(block.shape[0], nodes.shape[0], data.shape[0])
        return -jnp.sum(weights[None, :] * jax.nn.logsumexp(-inv_two_var * sq, axis=-1), axis=1)

    return chunking.map_rows(potential, points, chunk_size=chunk_size)


def exact_tilt(data, *, bandwidth, smoothing, grid_size: int = 201, margin=None,
               num_quadrature: int = 20, max_iterations: int = 50, tol=None
               ) -> tuple[Tilt, ExactTiltInfo]:
    r"""The exact tilt of MM-SOLD's large-particle limit, by quadrature (``d <= 2``).

    Finds :math:`(\lambda, \Lambda)` such that
    :math:`p^*(z) \propto e^{-V(z) - \lambda^\top u - \frac12 u^\top \Lambda u}`,
    :math:`u = z - \mu^*`, has mean :math:`\mu^*` and covariance :math:`\Sigma^*`, by Newton's
    method on the convex dual
    :math:`G(\lambda,\Lambda) = \log\int e^{-V - \lambda^\top u - \frac12 u^\top\Lambda u}\,dz +
    \frac12\mathrm{tr}(\Lambda\Sigma^*)` (gradient: the moment errors; Hessian: the covariance of
    the sufficient statistics), with Armijo backtracking. ``V`` is computed on a ``grid_size^d``
    grid spanning the data plus ``margin`` by a ``num_quadrature^d``-node Gauss–Hermite rule over
    the smoothing noise (``O(grid_size^d · num_quadrature^d · n)`` work): a reference for the law
    the particles reach, not part of the sampler. It runs in the data's dtype and is jittable
    (``lax.while_loop``; ``bandwidth``, ``smoothing``, ``margin`` and ``tol`` traced); float64
    reaches moment errors of ``1e-9``, float32 about ``1e-5``.

    Args:
        data: ``(n, d)`` training data, ``d`` in ``{1, 2}``.
        bandwidth: ``sigma_g > 0``.
        smoothing: ``s >= 0``.
        grid_size: points per axis.
        margin: distance added beyond the data on each side; default ``8 sigma_g + 4 s``.
        num_quadrature: Gauss–Hermite nodes per axis.
        max_iterations: Newton iterations.
        tol: tolerance on the max abs moment error (default ``1e-9`` in float64, ``1e-5`` in
            float32).

    Returns:
        ``(Tilt, ExactTiltInfo)``: the tilt, and the Newton status, the moment error and the
        grid densities (``grid``/``log_density`` for plotting). ``info.solver`` succeeds only
        when the moment error is below ``tol``; an eager call that misses it warns once
        (``RuntimeWarning``), a traced one leaves the status in the Info.

    Example:
        >>> import numpy as np
        >>> angles = np.arange(12) * (2 * np.pi / 12)
        >>> circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        >>> tilt, info = exact_tilt(circle, bandwidth=0.1, smoothing=0.2, grid_size=101)
        >>> bool(info.solver.converged), bool(tilt.quadratic[0, 0] < 0)
        (True, True)
    """
    data = check_data(data)
    targets = MomentTargets.from_data(data, bandwidth)
    bandwidth = check_hyperparameter("bandwidth", bandwidth)
    smoothing = check_hyperparameter("smoothing", smoothing, positive=False)
    grid_size = check_int("grid_size", grid_size, 3)
    num_quadrature = check_int("num_quadrature", num_quadrature, 1)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    dim = data.shape[1]
    if dim > 2:
        raise ValueError(f"exact_tilt integrates on a grid and supports d <= 2, got d = {dim}")
    margin = check_hyperparameter("margin", margin, allow_none=True)
    if tol is None:
        tol = 1e-9 if data.dtype == jnp.float64 else 1e-5
    tol = check_hyperparameter("tol", tol)
    tilt, info = _exact_tilt(data, targets.mean, targets.cov, bandwidth, smoothing, margin, tol,
                             grid_size=grid_size, num_quadrature=num_quadrature,
                             max_iterations=max_iterations)
    warn_if_unsuccessful(info.solver, "exact_tilt's Newton iteration")
    return tilt, info


@functools.partial(jax.jit, static_argnames=("grid_size", "num_quadrature", "max_iterations"))
def _exact_tilt(data, mean, cov, bandwidth, smoothing, margin, tol, *, grid_size,
                num_quadrature, max_iterations):
    dtype, dim = data.dtype, data.shape[1]
    bandwidth, smoothing = jnp.asarray(bandwidth, dtype), jnp.asarray(smoothing, dtype)
    margin = 8 * bandwidth + 4 * smoothing if margin is None else jnp.asarray(margin, dtype)
    tol = jnp.asarray(tol, dtype)
    centred = data - mean[None, :]
    low, high = centred.min(axis=0) - margin, centred.max(axis=0) + margin
    fractions = jnp.linspace(0, 1, grid_size, dtype=dtype)
    axes = [low[i] + (high[i] - low[i]) * fractions for i in range(dim)]
    cell_volume = jnp.prod((high - low) / (grid_size - 1))
    u = jnp.stack(jnp.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dim)
    potential = _smoothed_potential(u, centred, bandwidth, smoothing, num_quadrature)

    pairs = [(i, j) for i in range(dim) for j in range(i, dim)]
    features = jnp.concatenate(
        [u] + [(0.5 if i == j else 1.0) * u[:, i:i + 1] * u[:, j:j + 1] for i, j in pairs], axis=1)
    scale = jnp.asarray([1.0] * dim + [0.5 if i == j else 1.0 for i, j in pairs], dtype)
    target = jnp.concatenate([jnp.zeros((dim,), dtype)]
                             + [(0.5 if i == j else 1.0) * cov[i, j][None] for i, j in pairs])

    def dual(theta):
        logits = -potential - features @ theta
        log_norm = jax.nn.logsumexp(logits)
        return log_norm + theta @ target, jnp.exp(logits - log_norm)

    def newton(state):
        iterations, theta, value, probs, _ = state
        expected = probs @ features
        gradient = target - expected
        # the reported criterion: the features halve the variances, so their errors are
        # twice the gradient's entries (stopping on the raw gradient ended the iteration with
        # the moment error up to 2 tol, reported as a failure)
        done = jnp.max(jnp.abs(gradient) / scale) < tol
        centred_features = features - expected[None, :]
        hessian = centred_features.T @ (probs[:, None] * centred_features)
        direction = jnp.linalg.solve(hessian, gradient)
        slope = 1e-4 * (gradient @ direction)

        def shrink(search):  # backtracking (Armijo) on the convex dual
            step = search[0] / 2
            return (step, *dual(theta - step * direction))

        def too_long(search):
            step, new_value, _ = search
            return (new_value > value - step * slope) & (step >= 1e-8)

        one = jnp.ones((), dtype)
        step, new_value, new_probs = jax.lax.while_loop(
            too_long, shrink, (one, *dual(theta - direction)))
        theta = jnp.where(done, theta, theta - step * direction)
        return (iterations + 1, theta, jnp.where(done, value, new_value),
                jnp.where(done, probs, new_probs), done)

    theta = jnp.zeros(target.shape, dtype)
    start = (jnp.zeros((), jnp.int32), theta, *dual(theta), jnp.zeros((), bool))
    iterations, theta, _, probs, _ = jax.lax.while_loop(
        lambda state: (state[0] < max_iterations) & ~state[4], newton, start)

    quadratic = jnp.zeros((dim, dim), dtype)
    for value_ij, (i, j) in zip(theta[dim:], pairs, strict=True):
        quadratic = quadratic.at[i, j].set(value_ij).at[j, i].set(value_ij)
    tilted_mean = probs @ u
    tilted_second = u.T @ (probs[:, None] * u)
    moment_error = jnp.maximum(jnp.max(jnp.abs(tilted_mean)),
                               jnp.max(jnp.abs(tilted_second - cov)))
    log_cell = jnp.log(cell_volume)
    naive = -potential - jax.nn.logsumexp(-potential) - log_cell
    log_density = jnp.log(probs) - log_cell
    nonfinite = ~(jnp.all(jnp.isfinite(theta)) & jnp.isfinite(moment_error))
    solver = SolverStats.of(iterations, converged=moment_error < tol, nonfinite=nonfinite)
    tilt = Tilt(theta[:dim], quadratic)
    return tilt, ExactTiltInfo(moment_error, u + mean[None, :], log_density, naive, cell_volume,
                               solver, nonfinite)
