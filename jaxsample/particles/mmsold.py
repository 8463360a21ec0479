r"""MM-SOLD: moment-matched score-smoothed overdamped Langevin dynamics, and its baselines.

Yao & Paulin, *Training-Free Generative Sampling via Moment-Matched Score Smoothing*,
arXiv:2605.14276 (2026). Given only training data :math:`x_1..x_n \in \mathbb R^d`, ``B``
interacting particles follow overdamped Langevin dynamics on the LDS-smoothed KDE potential
:math:`V = U * N(0, s^2 I)`, :math:`U(z) = -\log\sum_i e^{-\|z - x_i\|^2/(2\sigma_g^2)}`,
while their empirical mean and (1/B-normalised) covariance are held at

.. math::
    \mu^* = \bar x, \qquad \Sigma^* = \Sigma_x + \sigma_g^2 I = L L^\top

at every step: the cloud is :math:`Z = \mu^* + Y L^\top` with ``Y`` on the centred scaled Stiefel
manifold :math:`\{Y : \mathbb 1^\top Y = 0,\ Y^\top Y = B I\}` (which needs ``B >= d + 1``).
One step (Leimkuhler–Matthews in ``Y``, then a QR retraction):

.. math::
    G_Y = \nabla V(Z)\, L, \qquad
    \tilde Y = Y - h P_Y(G_Y) + \sqrt{h/2}\,(P_Y(\xi_{k-1}) + P_Y(\xi_k)), \qquad
    Y \leftarrow \mathrm{retract}(\tilde Y).

The chain rule gives ``G_Y = G_Z L`` because each row is :math:`z_b = \mu^* + L y_b`. The
official code multiplies by :math:`L^\top` instead; the two agree only for diagonal
:math:`\Sigma^*`, and only ``G_Z L`` is the gradient of :math:`\sum_b V(z_b)`, which the
stationary law below relies on.

As ``B -> inf`` each particle's law is the exponential tilt
:math:`p^*(z) \propto e^{-V(z) - \lambda^\top u - \frac12 u^\top \Lambda u}`, :math:`u = z - \mu^*`,
whose mean and covariance are exactly :math:`(\mu^*, \Sigma^*)`; :func:`exact_tilt` computes it
(low dimension), :func:`plugin_tilt` is the cheaper Stein estimate used by the official code.

Baselines in the same family: :func:`smoothed_langevin` (the same preconditioned dynamics
without the moment constraint) and :func:`cfdm_sample` (σ-CFDM, Scarvelis et al., TMLR 2025).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from jaxsample._checks import check_chunk_size, check_int, check_number
from jaxsample.core import SamplingAlgorithm
from jaxsample.kernels.interactions import (
    antithetic_normal,
    knn_smoothed_kde_score,
    retract,
    smoothed_kde_score,
    symmetric_lyapunov_solve,
    tangent_project,
)

__all__ = [
    "CFDMInfo",
    "ExactTilt",
    "MMSOLDInfo",
    "MMSOLDState",
    "MomentTargets",
    "Tilt",
    "cfdm_sample",
    "exact_tilt",
    "mmsold",
    "moment_targets",
    "plugin_tilt",
    "pulled_back_gradient",
    "smoothed_langevin",
]

_INTEGRATORS = ("leimkuhler_matthews", "euler")
_ESTIMATORS = ("exact", "knn")


class MMSOLDState(NamedTuple):
    """State of :func:`mmsold` and :func:`smoothed_langevin`.

    Attributes:
        positions: ``(B, d)`` particles ``Z = mu* + Y L^T`` (the samples).
        coords: ``(B, d)`` whitened coordinates ``Y`` (on the manifold for MM-SOLD).
        prev_noise: ``(B, d)`` the previous step's Gaussian noise (Leimkuhler–Matthews).
    """

    positions: jax.Array
    coords: jax.Array
    prev_noise: jax.Array


class MMSOLDInfo(NamedTuple):
    """Per-step diagnostics.

    Attributes:
        mean_residual: ``max_j |mean(Z)_j - mu*_j|`` after the step.
        cov_residual: ``max |cov(Z) - Sigma*| / max |Sigma*|`` (1/B-normalised covariance).
        nonfinite: ``True`` if the proposed step was non-finite; the state was then kept.
    """

    mean_residual: jax.Array
    cov_residual: jax.Array
    nonfinite: jax.Array


class MomentTargets(NamedTuple):
    """Moment targets: ``mean`` ``mu*`` (d,), ``cov`` ``Sigma*`` (d, d), ``chol`` ``L`` (d, d)."""

    mean: jax.Array
    cov: jax.Array
    chol: jax.Array


class Tilt(NamedTuple):
    """Tilt ``lambda^T u + u^T Lambda u / 2``, ``u = z - mu*``: ``linear`` (d,), ``quadratic``
    (d, d)."""

    linear: jax.Array
    quadratic: jax.Array


class ExactTilt(NamedTuple):
    """Result of :func:`exact_tilt`.

    Attributes:
        linear: ``lambda`` (d,).
        quadratic: ``Lambda`` (d, d), symmetric.
        converged: Newton reached ``tol`` on the moment equations.
        num_iterations: Newton iterations taken.
        moment_error: max abs error of the tilted law's mean and covariance on the grid.
        grid: ``(G, d)`` quadrature points.
        log_density: ``(G,)`` log of the tilted density at ``grid`` (normalised on the grid).
        naive_log_density: ``(G,)`` log of the untilted ``e^{-V}``, normalised on the grid.
        cell_volume: volume of one grid cell.
    """

    linear: np.ndarray
    quadratic: np.ndarray
    converged: bool
    num_iterations: int
    moment_error: float
    grid: np.ndarray
    log_density: np.ndarray
    naive_log_density: np.ndarray
    cell_volume: float


class CFDMInfo(NamedTuple):
    """``nonfinite``: ``True`` if any returned sample is non-finite."""

    nonfinite: jax.Array


# ----------------------------------------------------------------------------- validation


def _check_data(data) -> jax.Array:
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    if not jnp.issubdtype(data.dtype, jnp.floating):
        raise TypeError(f"data must be a floating array of shape (n, d), got dtype {data.dtype}")
    if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 1:
        raise ValueError(f"data must have shape (n, d) with n, d >= 1, got shape {data.shape}")
    if not isinstance(data, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(data))):
        raise ValueError("data must be finite; it contains NaN or inf")
    return jnp.asarray(data)






def _check_num_smoothing_samples(value) -> int:
    value = check_int("num_smoothing_samples", value, 2)
    if value % 2:
        raise ValueError(f"num_smoothing_samples must be even (antithetic pairs), got {value}")
    return value




def moment_targets(data, kernel_bandwidth) -> MomentTargets:
    r"""The KDE's moments :math:`\mu^* = \bar x`, :math:`\Sigma^* = \Sigma_x + \sigma_g^2 I`.

    :math:`\Sigma_x` is the 1/n-normalised data covariance. :math:`\Sigma^* \succeq \sigma_g^2 I`,
    so a rank-deficient data covariance needs no jitter; a ``ValueError`` is raised only if the
    Cholesky factor is not finite in the data's dtype (``sigma_g`` negligible next to the data).

    Args:
        data: ``(n, d)`` training data.
        kernel_bandwidth: ``sigma_g > 0``.

    Returns:
        :class:`MomentTargets` in the data's dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> moment_targets(jnp.array([[1.0, 0.0], [-1.0, 0.0]]), 0.5).cov
        Array([[1.25, 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    data = _check_data(data)
    return _checked_targets(data, check_number("kernel_bandwidth", kernel_bandwidth,
                                                 positive=True))


def _checked_targets(data, bandwidth: float) -> MomentTargets:
    targets = _moment_targets(data, bandwidth)
    if not isinstance(targets.chol, jax.core.Tracer) and not np.all(np.isfinite(targets.chol)):
        raise ValueError(
            "the target covariance Sigma_x + kernel_bandwidth^2 I is not positive definite in "
            f"{data.dtype}; kernel_bandwidth={bandwidth} is too small for the data's scale")
    return targets


@jax.jit
def _moment_targets(data, bandwidth):
    mean = jnp.mean(data, axis=0)
    centred = data - mean[None, :]
    cov = centred.T @ centred / data.shape[0]
    cov = cov + jnp.square(bandwidth.astype(data.dtype)) * jnp.eye(data.shape[1], dtype=data.dtype)
    return MomentTargets(mean, cov, jnp.linalg.cholesky(cov))


# ----------------------------------------------------------------------------- samplers


def _build(data, kernel_bandwidth, smoothing, num_smoothing_samples, step_size, integrator,
           estimator, chunk_size, num_neighbours, num_remainder, constrained):
    data = _check_data(data)
    bandwidth = check_number("kernel_bandwidth", kernel_bandwidth, positive=True)
    targets = _checked_targets(data, bandwidth)
    smoothing = check_number("smoothing", smoothing, positive=False)
    step_size = check_number("step_size", step_size, positive=True)
    num_smoothing_samples = _check_num_smoothing_samples(num_smoothing_samples)
    chunk_size = check_chunk_size(chunk_size)
    if integrator not in _INTEGRATORS:
        raise ValueError(f"integrator must be one of {_INTEGRATORS}, got {integrator!r}")
    if estimator not in _ESTIMATORS:
        raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
    n, dim = data.shape
    if estimator == "knn":
        num_neighbours = check_int("num_neighbours", num_neighbours, 1)
        num_remainder = check_int("num_remainder", num_remainder, 0)
        if num_neighbours + num_remainder > n:
            raise ValueError(
                f"num_neighbours + num_remainder must be <= n = {n}, got "
                f"{num_neighbours} + {num_remainder}")
    dtype = data.dtype
    mean, cov, chol = targets
    centred_data = data - mean[None, :]  # logits lose less precision near the origin
    cov_scale = jnp.max(jnp.abs(cov))

    def score(key, centred_positions):
        num_particles = centred_positions.shape[0]
        if smoothing == 0.0:  # every draw would give the same value
            noise = jnp.zeros((num_particles, 1, dim), dtype)
        else:
            noise = antithetic_normal(key, num_particles, num_smoothing_samples, dim, dtype)
        if estimator == "exact":
            return smoothed_kde_score(centred_positions, centred_data, bandwidth, smoothing,
                                      noise, chunk_size=chunk_size)
        return knn_smoothed_kde_score(
            jax.random.fold_in(key, 1), centred_positions, centred_data, bandwidth, smoothing,
            noise, num_neighbours=num_neighbours, num_remainder=num_remainder,
            chunk_size=chunk_size)

    def project(coords, vector):
        return tangent_project(coords, vector) if constrained else vector

    def init(key: jax.Array, num_particles: int) -> MMSOLDState:
        minimum = dim + 1 if constrained else 1
        if isinstance(num_particles, bool) or not isinstance(num_particles, (int, np.integer)):
            raise TypeError(f"num_particles must be an int, got {type(num_particles).__name__}")
        if num_particles < minimum:
            reason = (f" (the moment-matching manifold is empty unless B >= d + 1 = {minimum})"
                      if constrained else "")
            raise ValueError(f"num_particles must be >= {minimum}, got {num_particles}{reason}")
        return init_particles(key, int(num_particles))

    @functools.partial(jax.jit, static_argnums=1)
    def init_particles(key, num_particles):
        key_index, key_jitter, key_noise = jax.random.split(key, 3)
        index = jax.random.randint(key_index, (num_particles,), 0, n)
        start = centred_data[index] + bandwidth * jax.random.normal(
            key_jitter, (num_particles, dim), dtype)
        coords = solve_triangular(chol, start.T, lower=True).T
        if constrained:
            coords = retract(coords)
        positions = mean[None, :] + coords @ chol.T
        return MMSOLDState(positions, coords, jax.random.normal(key_noise, (num_particles, dim),
                                                                dtype))

    def step(key: jax.Array, state: MMSOLDState) -> tuple[MMSOLDState, MMSOLDInfo]:
        key_score, key_noise = jax.random.split(key)
        coords = state.coords
        grad_coords = -pulled_back_gradient(score(key_score, coords @ chol.T), chol)
        noise = jax.random.normal(key_noise, coords.shape, dtype)
        h = jnp.asarray(step_size, dtype)
        moved = coords - h * project(coords, grad_coords)
        if integrator == "leimkuhler_matthews":
            # P(xi_prev) + P(xi) = P(xi_prev + xi): the projection is linear
            moved = moved + jnp.sqrt(h / 2) * project(coords, state.prev_noise + noise)
        else:
            moved = moved + jnp.sqrt(2 * h) * project(coords, noise)
        if constrained:
            moved = retract(moved)
        positions = mean[None, :] + moved @ chol.T
        nonfinite = ~jnp.all(jnp.isfinite(positions))
        new_state = jax.tree.map(lambda new, old: jnp.where(nonfinite, old, new),
                                 MMSOLDState(positions, moved, noise), state)
        residual = new_state.positions - mean[None, :]
        sample_mean = jnp.mean(residual, axis=0)
        sample_cov = residual.T @ residual / residual.shape[0] - jnp.outer(sample_mean,
                                                                             sample_mean)
        info = MMSOLDInfo(
            mean_residual=jnp.max(jnp.abs(sample_mean)),
            cov_residual=jnp.max(jnp.abs(sample_cov - cov)) / cov_scale,
            nonfinite=nonfinite)
        return new_state, info

    return SamplingAlgorithm(init, step)


def pulled_back_gradient(score_z: jax.Array, chol: jax.Array) -> jax.Array:
    r"""Chain rule to whitened coordinates, row-wise: ``G_Y = G_Z @ L`` (not ``G_Z @ L.T``).

    With rows :math:`z_b = \mu^* + L y_b`, :math:`\nabla_{y_b} = L^\top \nabla_{z_b}`; stacked
    as rows this is ``G_Z @ L``. (The reference code's ``G_Z @ L.T`` agrees only for diagonal L.)

    Args:
        score_z: ``(B, d)`` gradients (or scores) with respect to the particles ``Z``.
        chol: ``(d, d)`` lower Cholesky factor ``L`` of ``Sigma*``.

    Returns:
        ``(B, d)`` the same quantity with respect to ``Y``.

    Example:
        >>> import jax.numpy as jnp
        >>> pulled_back_gradient(jnp.array([[1.0, 0.0]]), jnp.array([[2.0, 0.0], [1.0, 3.0]]))
        Array([[2., 0.]], dtype=float32)
    """
    return score_z @ chol


def mmsold(data, *, kernel_bandwidth: float, smoothing: float, num_smoothing_samples: int = 8,
           step_size: float, integrator: str = "leimkuhler_matthews", estimator: str = "exact",
           chunk_size: int | None = None, num_neighbours: int = 20, num_remainder: int = 20
           ) -> SamplingAlgorithm:
    r"""MM-SOLD: moment-matched score-smoothed overdamped Langevin (see the module docstring).

    Args:
        data: ``(n, d)`` finite training data (float32 or float64; sets the dtype).
        kernel_bandwidth: KDE bandwidth ``sigma_g > 0``.
        smoothing: LDS smoothing scale ``s >= 0`` (``0``: plain KDE score).
        num_smoothing_samples: ``M``, even; antithetic draws per particle and step.
        step_size: ``h > 0`` in whitened coordinates (the dynamics is preconditioned by
            ``Sigma*``). The KDE potential's curvature reaches ``1 / sigma_g^2``, so the explicit
            step is stable only while ``h * lambda_max(Sigma*) / sigma_g^2 < 2``.
        integrator: ``"leimkuhler_matthews"`` (noise ``sqrt(h/2) (xi_{k-1} + xi_k)``) or
            ``"euler"`` (``sqrt(2h) xi_k``).
        estimator: ``"exact"`` (softmax over all ``n`` points) or ``"knn"`` (``num_neighbours``
            nearest plus ``num_remainder`` reweighted random others, for large ``n``).
        chunk_size: particles per chunk of the score computation (memory
            ``chunk_size * M * n``); ``None`` is dense.
        num_neighbours: ``K_nn`` for ``estimator="knn"``.
        num_remainder: ``K_rem`` for ``estimator="knn"``.

    Returns:
        :class:`~jaxsample.SamplingAlgorithm` with ``init(key, num_particles)`` (``B >= d + 1``;
        particles start at random data points plus ``N(0, sigma_g^2 I)`` noise, retracted) and
        ``step(key, state) -> (MMSOLDState, MMSOLDInfo)``.

    Example:
        >>> import jax, jaxsample
        >>> data = jax.random.normal(jax.random.key(0), (50, 2))
        >>> alg = jaxsample.mmsold(data, kernel_bandwidth=0.3, smoothing=0.1, step_size=1e-2)
        >>> state = alg.init(jax.random.key(1), 64)
        >>> state, info = jaxsample.run(jax.random.key(2), alg, state, 20)
        >>> state.positions.shape, bool(info.cov_residual.max() < 1e-4)
        ((64, 2), True)
    """
    return _build(data, kernel_bandwidth, smoothing, num_smoothing_samples, step_size, integrator,
                  estimator, chunk_size, num_neighbours, num_remainder, constrained=True)


def smoothed_langevin(data, *, kernel_bandwidth: float, smoothing: float,
                      num_smoothing_samples: int = 8, step_size: float,
                      integrator: str = "leimkuhler_matthews", estimator: str = "exact",
                      chunk_size: int | None = None, num_neighbours: int = 20,
                      num_remainder: int = 20) -> SamplingAlgorithm:
    r"""Naive score-smoothed Langevin: :func:`mmsold` without the moment constraint.

    Independent particles follow the same ``Sigma*``-preconditioned dynamics
    :math:`y \leftarrow y - h L^\top \nabla V(\mu^* + L y) + \text{noise}` (no projection, no
    retraction), so they target ``e^{-V}`` itself; the ``Info`` residuals show how far its moments
    drift from ``(mu*, Sigma*)``. Same arguments and state as :func:`mmsold`; ``B >= 1``.

    Example:
        >>> import jax, jaxsample
        >>> from jaxsample.particles.mmsold import smoothed_langevin
        >>> data = jax.random.normal(jax.random.key(0), (50, 2))
        >>> alg = smoothed_langevin(data, kernel_bandwidth=0.3, smoothing=0.1, step_size=1e-2)
        >>> state, info = alg.step(jax.random.key(2), alg.init(jax.random.key(1), 8))
        >>> state.positions.shape
        (8, 2)
    """
    return _build(data, kernel_bandwidth, smoothing, num_smoothing_samples, step_size, integrator,
                  estimator, chunk_size, num_neighbours, num_remainder, constrained=False)


def cfdm_sample(key: jax.Array, data, *, num_samples: int, smoothing: float, num_steps: int = 100,
                num_smoothing_samples: int = 8, chunk_size: int | None = None
                ) -> tuple[jax.Array, CFDMInfo]:
    r"""σ-CFDM (closed-form diffusion model; Scarvelis, Sáez de Ocáriz Borde & Solomon, TMLR 2025).

    Euler integration of the smoothed closed-form flow of the linear path
    :math:`z_t = t x + (1 - t)\varepsilon_0` from :math:`z \sim N(0, I)` at ``t = h`` to ``t = 1``
    (``h = 1/num_steps``, ``num_steps - 1`` updates), as in the MM-SOLD reference baseline:

    .. math::
        z \leftarrow z + h\,\frac{z + (1 - t)\hat s}{t}, \qquad
        \hat s = \frac{\mathbb E_\varepsilon[\sum_i w_i(z;\varepsilon)\, t x_i] - z}{(1-t)^2},
        \quad w(z;\varepsilon) = \mathrm{softmax}_i\Big(-\frac{\|z - t x_i\|^2
        - 2 s t\langle\varepsilon, x_i\rangle}{2(1-t)^2}\Big).

    ``hat s`` is the smoothed KDE score of the centres ``t x_i`` with bandwidth ``1 - t``
    (:func:`~jaxsample.kernels.interactions.smoothed_kde_score`), ``M`` antithetic draws.

    Args:
        key: PRNG key.
        data: ``(n, d)`` training data.
        num_samples: number of samples.
        smoothing: ``s >= 0``; ``s = 0`` reproduces the training points (memorisation).
        num_steps: ``>= 2``.
        num_smoothing_samples: ``M``, even.
        chunk_size: samples per chunk of the score computation.

    Returns:
        ``(samples (num_samples, d), CFDMInfo)``.

    Example:
        >>> import jax
        >>> data = jax.random.normal(jax.random.key(0), (20, 2))
        >>> samples, info = cfdm_sample(jax.random.key(1), data, num_samples=8, smoothing=0.1,
        ...                             num_steps=20)
        >>> samples.shape, bool(info.nonfinite)
        ((8, 2), False)
    """
    data = _check_data(data)
    num_samples = check_int("num_samples", num_samples, 1)
    smoothing = check_number("smoothing", smoothing, positive=False)
    num_steps = check_int("num_steps", num_steps, 2)
    num_smoothing_samples = _check_num_smoothing_samples(num_smoothing_samples)
    chunk_size = check_chunk_size(chunk_size)
    return _cfdm(key, data, num_samples, smoothing, num_steps, num_smoothing_samples, chunk_size)


@functools.partial(jax.jit, static_argnums=(2, 4, 5, 6))
def _cfdm(key, data, num_samples, smoothing, num_steps, num_smoothing_samples, chunk_size):
    dtype = data.dtype
    dim = data.shape[1]
    h = 1.0 / num_steps
    key_start, key_steps = jax.random.split(key)

    def body(z, xs):
        t, step_key = xs
        noise = antithetic_normal(step_key, num_samples, num_smoothing_samples, dim, dtype)
        score = smoothed_kde_score(z, t * data, 1 - t, smoothing, noise, chunk_size=chunk_size)
        return z + h * (z + (1 - t) * score) / t, None

    times = h * jnp.arange(1, num_steps, dtype=dtype)
    z0 = jax.random.normal(key_start, (num_samples, dim), dtype)
    samples, _ = jax.lax.scan(body, z0, (times, jax.random.split(key_steps, num_steps - 1)))
    return samples, CFDMInfo(nonfinite=~jnp.all(jnp.isfinite(samples)))


# ----------------------------------------------------------------------------- tilt


def plugin_tilt(key: jax.Array, data, *, kernel_bandwidth: float, smoothing: float,
                num_smoothing_samples: int = 2048, num_quadrature: int | None = None,
                estimation_points=None, chunk_size: int | None = 16) -> Tilt:
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
        kernel_bandwidth: ``sigma_g > 0``.
        smoothing: ``s >= 0``.
        num_smoothing_samples: ``M``, even (Monte Carlo).
        num_quadrature: Gauss–Hermite nodes per axis; replaces Monte Carlo when given.
        estimation_points: ``(P, d)`` points standing in for ``p*``; default ``data``.
        chunk_size: estimation points per chunk of the score evaluation, which holds
            ``chunk_size × M × n`` logits at a time (None: all ``P`` at once).

    Returns:
        :class:`Tilt` in the data's dtype.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> angles = jnp.arange(12.0) * (2 * jnp.pi / 12)
        >>> circle = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)
        >>> tilt = plugin_tilt(jax.random.key(0), circle, kernel_bandwidth=0.1, smoothing=0.2)
        >>> bool(jnp.all(jnp.abs(tilt.linear) < 1e-3)), bool(tilt.quadratic[0, 0] < 0)
        (True, True)
    """
    data = _check_data(data)
    mean, cov, _ = moment_targets(data, kernel_bandwidth)
    smoothing = check_number("smoothing", smoothing, positive=False)
    num_smoothing_samples = _check_num_smoothing_samples(num_smoothing_samples)
    chunk_size = check_chunk_size(chunk_size)
    points = data if estimation_points is None else _check_data(estimation_points)
    if points.shape[1] != data.shape[1] or points.dtype != data.dtype:
        raise ValueError(
            f"estimation_points must have shape (P, {data.shape[1]}) and dtype {data.dtype}, "
            f"got {points.shape} {points.dtype}")
    dim = data.shape[1]
    centred, centred_data = points - mean[None, :], data - mean[None, :]
    if num_quadrature is None:
        shared = antithetic_normal(key, 1, num_smoothing_samples, dim, data.dtype)
        noise = jnp.broadcast_to(shared, (points.shape[0], num_smoothing_samples, dim))
        grad_v = -smoothed_kde_score(centred, centred_data, kernel_bandwidth, smoothing, noise,
                                     chunk_size=chunk_size)
    else:
        num_quadrature = check_int("num_quadrature", num_quadrature, 1)
        grad_v = jax.grad(lambda p: jnp.sum(_smoothed_potential(
            p, centred_data, kernel_bandwidth, smoothing, num_quadrature)))(centred)
    linear = -jnp.mean(grad_v, axis=0)
    stein = centred.T @ grad_v / points.shape[0]
    rhs = 2 * jnp.eye(dim, dtype=data.dtype) - (stein + stein.T)
    return Tilt(linear, symmetric_lyapunov_solve(cov, rhs))


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

    half_sq_norms = 0.5 * jnp.sum(jnp.square(data), axis=1)

    def potential(z):
        shifted = z[None, :] + smoothing * nodes
        logits = (shifted @ data.T - half_sq_norms[None, :]) / bandwidth**2
        quadratic = 0.5 * jnp.sum(jnp.square(shifted), axis=1) / bandwidth**2
        return jnp.sum(weights * (quadratic - jax.nn.logsumexp(logits, axis=1)))

    return jax.lax.map(potential, points, batch_size=chunk_size)


def exact_tilt(data, *, kernel_bandwidth: float, smoothing: float, grid_size: int = 201,
               margin: float | None = None, num_quadrature: int = 20, max_iterations: int = 50,
               tol: float = 1e-9) -> ExactTilt:
    r"""The exact tilt of MM-SOLD's large-particle limit, by quadrature (``d <= 2``).

    Finds :math:`(\lambda, \Lambda)` such that
    :math:`p^*(z) \propto e^{-V(z) - \lambda^\top u - \frac12 u^\top\Lambda u}`,
    :math:`u = z - \mu^*`, has mean :math:`\mu^*` and covariance :math:`\Sigma^*`, by Newton's
    method on the convex dual
    :math:`G(\lambda,\Lambda) = \log\int e^{-V - \lambda^\top u - \frac12 u^\top\Lambda u}\,dz +
    \frac12\mathrm{tr}(\Lambda\Sigma^*)` (gradient: the moment errors; Hessian: the covariance of
    the sufficient statistics), with backtracking. ``V`` is computed on a ``grid_size^d`` grid
    spanning the data plus ``margin`` by a ``num_quadrature^d``-node Gauss–Hermite rule over the
    smoothing noise. The Newton loop runs in NumPy float64 on the grid values: it is an offline
    utility (``O(grid_size^d * num_quadrature^d * n)`` work), not part of the sampler.

    Args:
        data: ``(n, d)`` training data, ``d`` in ``{1, 2}``.
        kernel_bandwidth: ``sigma_g > 0``.
        smoothing: ``s >= 0``.
        grid_size: points per axis.
        margin: distance added beyond the data on each side; default ``8 sigma_g + 4 s``.
        num_quadrature: Gauss–Hermite nodes per axis.
        max_iterations: Newton iterations.
        tol: tolerance on the max abs moment error.

    Returns:
        :class:`ExactTilt` (NumPy float64 values; ``grid``/``log_density`` for plotting).

    Example:
        >>> import numpy as np
        >>> angles = np.arange(12) * (2 * np.pi / 12)
        >>> circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        >>> tilt = exact_tilt(circle, kernel_bandwidth=0.1, smoothing=0.2, grid_size=101)
        >>> tilt.converged, bool(tilt.quadratic[0, 0] < 0)
        (True, True)
    """
    data = _check_data(data)
    mean, cov, _ = (np.asarray(a, np.float64) for a in moment_targets(data, kernel_bandwidth))
    bandwidth = check_number("kernel_bandwidth", kernel_bandwidth, positive=True)
    smoothing = check_number("smoothing", smoothing, positive=False)
    grid_size = check_int("grid_size", grid_size, 3)
    num_quadrature = check_int("num_quadrature", num_quadrature, 1)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    dim = data.shape[1]
    if dim > 2:
        raise ValueError(f"exact_tilt integrates on a grid and supports d <= 2, got d = {dim}")
    margin = 8 * bandwidth + 4 * smoothing if margin is None else check_number(
        "margin", margin, positive=True)
    centred = np.asarray(data, np.float64) - mean[None, :]
    axes = [np.linspace(lo - margin, hi + margin, grid_size)
            for lo, hi in zip(centred.min(axis=0), centred.max(axis=0), strict=True)]
    cell_volume = float(np.prod([a[1] - a[0] for a in axes]))
    u = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dim)
    potential = np.asarray(_smoothed_potential(
        jnp.asarray(u, data.dtype), jnp.asarray(centred, data.dtype), bandwidth, smoothing,
        num_quadrature), np.float64)

    pairs = [(i, j) for i in range(dim) for j in range(i, dim)]
    features = np.concatenate(
        [u] + [(0.5 if i == j else 1.0) * u[:, i:i + 1] * u[:, j:j + 1] for i, j in pairs], axis=1)
    target = np.concatenate([np.zeros(dim)] + [[(0.5 if i == j else 1.0) * cov[i, j]]
                                               for i, j in pairs])

    def dual(theta):
        logits = -potential - features @ theta
        log_norm = np.logaddexp.reduce(logits)
        return log_norm + theta @ target, np.exp(logits - log_norm)

    theta = np.zeros(target.shape[0])
    value, probs = dual(theta)
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - the count is reported
        expected = probs @ features
        gradient = target - expected
        if np.max(np.abs(gradient)) < tol:
            break
        centred_features = features - expected[None, :]
        hessian = centred_features.T @ (probs[:, None] * centred_features)
        direction = np.linalg.solve(hessian, gradient)
        step = 1.0
        while True:  # backtracking (Armijo) on the convex dual
            new_value, new_probs = dual(theta - step * direction)
            if new_value <= value - 1e-4 * step * (gradient @ direction) or step < 1e-8:
                break
            step *= 0.5
        theta, value, probs = theta - step * direction, new_value, new_probs

    linear = theta[:dim]
    quadratic = np.zeros((dim, dim))
    for value_ij, (i, j) in zip(theta[dim:], pairs, strict=True):
        quadratic[i, j] = quadratic[j, i] = value_ij
    tilted_mean = probs @ u
    tilted_second = u.T @ (probs[:, None] * u)
    moment_error = float(max(np.max(np.abs(tilted_mean)), np.max(np.abs(tilted_second - cov))))
    naive = -potential - np.logaddexp.reduce(-potential) - np.log(cell_volume)
    log_density = np.log(probs) - np.log(cell_volume)
    converged = moment_error < tol
    return ExactTilt(linear, quadratic, converged, iterations, moment_error, u + mean[None, :],
                     log_density, naive, cell_volume)
