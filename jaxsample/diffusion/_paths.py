"""The interface every noise path of the spherical-flow sampler implements (private).

A *path* says how a clean token embedding e is noised at time t ∈ [0, t_end] and how the
conditional law moves. :func:`jaxsample.diffusion.vmf.sample` needs from it:

* ``dim`` (static), ``t_end`` (the last time; < 1 for paths whose velocity has a 1/(1 − t)
  factor) and ``has_score`` (whether predictor–corrector sampling is available);
* ``init(key, shape, dtype)`` / ``from_noise(noise)``: draws of the t = 0 law, ``shape + (dim,)``
  (the latter from standard normal noise of that shape);
* ``log_likelihood(x, t, embeddings)``: ``(..., V)`` log p_t(x_l | e_k) up to a constant that
  does not depend on k: what an exact posterior needs;
* ``velocity(x, t, probs, embeddings)`` and ``score(x, t, probs, embeddings)``: the marginal
  velocity E[v_t(x | e) | x] and score ∇ log p_t(x) given the token posterior ``probs`` (…, V);
* ``move(x, v, dt)`` (one predictor step), ``langevin(x, score, step_size, noise)`` (one
  corrector step, given standard normal noise), ``corrector_scale(t)`` (the corrector's step-size
  rule, e.g. the natural variance scale of p_t(· | e), which multiplies the relative corrector
  step size) and ``default_corrector_step_size`` (that relative step size when none is given);
* ``sample_conditional(key, targets, t)``: exact draws x_t ~ p_t(· | e) for each row of
  ``targets`` (training data for a learned posterior, and tests);
* ``velocity_table(times)``: the conditional-velocity coefficient on a (time × angle) grid.

:class:`SpherePath` holds what the paths on the sphere share; the concrete paths are
:class:`jaxsample.diffusion.vmf.VMFPath` and the baselines in
:mod:`jaxsample.diffusion.baselines`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import is_concrete
from jaxsample.kernels import sphere

__all__ = ["FlowPath", "SpherePath", "VelocityTable"]

DEFAULT_NUM_TIMES = 65
_UNIT_TOLERANCE = 1e-4


class VelocityTable(NamedTuple):
    """A path's conditional-velocity coefficient on a (time × angle) grid.

    Attributes:
        times: ``(T,)`` times t.
        angles: ``(U,)`` angles θ_j between x and the target embedding (u = cos θ), the nodes of
            :func:`jaxsample.kernels.sphere.angle_grid`.
        log_coefficient: ``(T, U)`` log a_t(θ): the conditional velocity is a_t(u)·P_x e on the
            sphere (:class:`~jaxsample.diffusion.vmf.VMFPath`,
            :class:`~jaxsample.diffusion.baselines.GeodesicPath`) and a_t·(e − x), constant in
            θ, for :class:`~jaxsample.diffusion.baselines.EuclideanPath`.
    """

    times: jax.Array
    angles: jax.Array
    log_coefficient: jax.Array


def default_times(t_end) -> jax.Array:
    return jnp.linspace(0.0, 1.0, DEFAULT_NUM_TIMES) * t_end


class FlowPath(eqx.Module):
    """Base of every path :func:`jaxsample.diffusion.vmf.sample` accepts (see the module
    docstring for the methods a path provides)."""

    dim: int = eqx.field(static=True)

    has_score = False
    default_corrector_step_size = 1.0


class SpherePath(FlowPath):
    """Shared pieces of the paths that live on (S^{d−1})^L: uniform start, retracted Euler
    predictor and Langevin corrector, unit-embedding check."""

    def init(self, key, shape, dtype):
        return self.from_noise(sphere.normal(key, (*shape, self.dim), dtype))

    def from_noise(self, noise):
        """The t = 0 law from standard normal ``noise``: uniform on the sphere."""
        return sphere.retract(noise)

    def move(self, x, v, dt):
        # the retraction Retr(x + h v) rather than exp_x(h v): both are first-order steps; the
        # retraction measured slightly more accurate on the vMF transport (its shorter arc,
        # atan(h|v|), offsets Euler's overshoot) and three times cheaper on XLA:CPU
        return sphere.retract(x + dt * v)

    def langevin(self, x, score, step_size, noise):
        """Retr(x + ε s + √(2ε) P_x ξ) for standard normal ``noise`` ξ."""
        noise = sphere.tangent_project(x, noise)
        return sphere.retract(x + step_size * score + jnp.sqrt(2 * step_size) * noise)

    def check_embeddings(self, embeddings):
        """Refuses (does not normalise) embeddings whose rows are not unit vectors."""
        if is_concrete(embeddings):
            norms = np.linalg.norm(np.asarray(embeddings, np.float64), axis=-1)
            worst = float(np.max(np.abs(norms - 1)))
            if worst > _UNIT_TOLERANCE:
                raise ValueError(
                    f"embeddings must be unit vectors on S^{self.dim - 1} for "
                    f"{type(self).__name__} (row norms within {_UNIT_TOLERANCE} of 1), got a row "
                    f"norm off by {worst:.3g}; normalise them (e / ||e||) before sampling")
