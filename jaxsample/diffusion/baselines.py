"""Baseline noise paths of the vMF spherical flow (:mod:`jaxsample.diffusion.vmf`).

Both plug into :func:`jaxsample.diffusion.vmf.sample` and the exact oracles exactly like
:class:`~jaxsample.diffusion.vmf.VMFPath`, so a comparison isolates the path geometry:

* :class:`GeodesicPath` — Riemannian flow matching from a uniform source (Chen & Lipman 2023):
  x_t = slerp(x₀, e, t), x₀ ~ Unif(S^{d−1}), so the angle to e is θ_t = (1 − t)θ₀;
* :class:`EuclideanPath` — linear (rectified) flow matching in ℝ^d: x_t = t·e + (1 − t)·ε,
  ε ~ N(0, I_d), decoded by the posterior at t_end.

Both velocities carry a 1/(1 − t) factor, so they stop at ``t_end < 1`` and decode there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample._checks import check_hyperparameter, check_int, is_concrete
from jaxsample.diffusion._paths import FlowPath, SpherePath, VelocityTable, default_times
from jaxsample.kernels import sphere

__all__ = ["EuclideanPath", "GeodesicPath"]


def _check_t_end(t_end):
    t_end = check_hyperparameter("t_end", t_end, maximum=1.0)
    if is_concrete(t_end) and float(t_end) >= 1:
        raise ValueError(f"t_end must be < 1 (the velocity has a 1/(1 - t) factor), got "
                         f"{float(t_end)}")
    return t_end


def _inverse_sinc(theta):
    """θ/sin θ, smooth at 0, capped where sin θ underflows near π."""
    sinc = jnp.sinc(theta / jnp.pi)
    return 1 / jnp.maximum(sinc, jnp.finfo(theta.dtype).tiny)


class GeodesicPath(SpherePath):
    """Geodesic (slerp) path on the sphere from a uniform source: θ_t = (1 − t)·θ₀.

    Conditional law (derived): with θ = arccos(eᵀx) and σ = 1 − t,

    .. math::  p_t(x \\mid e) ∝ \\frac{\\sin^{d−2}(θ/σ)}{σ\\,\\sin^{d−2}θ}\\,
               \\mathbf 1[θ < σπ], \\qquad v_t(x \\mid e) = \\frac{θ}{σ}\\,
               \\frac{P_x e}{\\|P_x e\\|} = \\frac{θ}{σ \\sin θ}\\,P_x e .

    No score (the support is a cap that shrinks to e), so only ``sampler="ode"``.

    Args:
        dim: d ≥ 2.
        t_end: last time, in (0, 1) (traced leaf).

    Example:
        >>> import jax.numpy as jnp
        >>> path = GeodesicPath(3)
        >>> e = jnp.array([[0.0, 0.0, 1.0]])
        >>> x = jnp.array([[1.0, 0.0, 0.0]])          # θ = π/2
        >>> v = path.velocity(x, jnp.float32(0.5), jnp.ones((1, 1)), e)
        >>> [round(float(c), 4) for c in v[0]]       # θ/σ = π towards e
        [0.0, 0.0, 3.1416]
    """

    t_end: jax.Array

    def __init__(self, dim: int, t_end=0.99):
        self.dim = check_int("dim", dim, 2)
        self.t_end = _check_t_end(t_end)

    def _log_coefficient(self, theta, t):
        return -jnp.log1p(-t) + jnp.log(_inverse_sinc(theta))

    def velocity_table(self, times: jax.Array | None = None,
                       num_angles: int = 1025) -> VelocityTable:
        """log(θ/((1 − t) sin θ)) on ``times`` × the angle grid (+inf at θ = π)."""
        times = default_times(jnp.asarray(self.t_end)) if times is None else jnp.asarray(times)
        angles = sphere.angle_grid(num_angles, times.dtype)
        log_a = self._log_coefficient(angles[None, :], times[:, None])
        return VelocityTable(times, angles, log_a)

    def log_likelihood(self, x, t, embeddings):
        """(d − 2)[log sin(θ/σ) − log sin θ] − log σ inside the cap θ < σπ, −inf outside."""
        theta = jnp.arccos(jnp.clip(x @ embeddings.T, -1, 1))
        sigma = 1 - t
        ratio = theta / sigma
        inside = ratio < jnp.pi
        # sin(θ/σ)/sin θ = sinc(θ/(σπ)) / (σ sinc(θ/π)): finite at θ = 0
        log_ratio = (jnp.log(jnp.where(inside, jnp.sinc(ratio / jnp.pi), 1))
                     + jnp.log(_inverse_sinc(theta)) - jnp.log(sigma))
        return jnp.where(inside, (self.dim - 2) * log_ratio - jnp.log(sigma), -jnp.inf)

    def velocity(self, x, t, probs, embeddings):
        """Σ_k π_k θ_k/((1 − t) sin θ_k) P_x e_k (zero weight where π_k = 0)."""
        cosines = x @ embeddings.T
        theta = jnp.arccos(jnp.clip(cosines, -1, 1))
        coefficient = _inverse_sinc(theta) / (1 - t)
        weights = jnp.where(probs > 0, probs * coefficient, jnp.zeros_like(probs))
        return sphere.tangent_sum(x, weights, embeddings)

    def sample_conditional(self, key, targets, t):
        """x_t = exp_{x₀}(t·log_{x₀}(e)), x₀ uniform, for each row e of ``targets``."""
        start = sphere.uniform(key, targets.shape[:-1], self.dim, targets.dtype)
        return sphere.exp_map(start, t * sphere.log_map(start, targets))


class EuclideanPath(FlowPath):
    """Linear flow matching in ℝ^d: x_t = t·e + (1 − t)·ε, ε ~ N(0, I_d).

    With σ = 1 − t: p_t(x | e) = N(x; t e, σ² I), conditional velocity (e − x)/σ, marginal
    velocity Σ_k π_k (e_k − x)/σ and score Σ_k π_k (t e_k − x)/σ². Embeddings need not be
    unit vectors. The corrector is plain Langevin in ℝ^d with ε = c·σ².

    Args:
        dim: d ≥ 2.
        t_end: last time, in (0, 1) (traced leaf).

    Example:
        >>> import jax.numpy as jnp
        >>> path = EuclideanPath(2)
        >>> v = path.velocity(jnp.zeros((1, 2)), jnp.float32(0.5), jnp.ones((1, 1)),
        ...                   jnp.array([[1.0, 0.0]]))
        >>> v.tolist()
        [[2.0, 0.0]]
    """

    t_end: jax.Array

    has_score = True
    on_sphere = False

    def __init__(self, dim: int, t_end=0.99):
        self.dim = check_int("dim", dim, 2)
        self.t_end = _check_t_end(t_end)

    def init(self, key, shape, dtype):
        return sphere.normal(key, (*shape, self.dim), dtype)

    def from_noise(self, noise):
        return noise

    def move(self, x, v, dt):
        return x + dt * v

    def langevin(self, x, score, step_size, noise):
        return x + step_size * score + jnp.sqrt(2 * step_size) * noise

    def check_embeddings(self, embeddings):
        """Any finite embeddings are accepted."""

    def velocity_table(self, times: jax.Array | None = None,
                       num_angles: int = 1025) -> VelocityTable:
        """log(1/(1 − t)), the coefficient of (e − x), constant along the angle axis."""
        times = default_times(jnp.asarray(self.t_end)) if times is None else jnp.asarray(times)
        angles = sphere.angle_grid(num_angles, times.dtype)
        log_a = jnp.broadcast_to(-jnp.log1p(-times)[:, None], (times.shape[0], num_angles))
        return VelocityTable(times, angles, log_a)

    def log_likelihood(self, x, t, embeddings):
        """(t e_kᵀx − t²‖e_k‖²/2)/σ²: log N(x; t e_k, σ² I) up to a k-independent constant."""
        cosines = x @ embeddings.T
        sq_norms = jnp.sum(embeddings**2, axis=-1).reshape((1,) * (cosines.ndim - 1) + (-1,))
        return (t * cosines - 0.5 * t**2 * sq_norms) / (1 - t) ** 2

    def _weighted(self, x, t, probs, embeddings, scale):
        mass = jnp.sum(probs, axis=-1, keepdims=True)
        return scale * (probs @ embeddings) - mass * x

    def velocity(self, x, t, probs, embeddings):
        return self._weighted(x, t, probs, embeddings, 1) / (1 - t)

    def score(self, x, t, probs, embeddings):
        return self._weighted(x, t, probs, embeddings, t) / (1 - t) ** 2

    def corrector_scale(self, t):
        return (1 - t) ** 2

    def sample_conditional(self, key, targets, t):
        """x_t = t·e + (1 − t)·ε for each row e of ``targets``."""
        return t * targets + (1 - t) * sphere.normal(key, targets.shape, targets.dtype)
