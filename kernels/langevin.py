r"""One Metropolis-adjusted Langevin step for a batch of points, with any drift.

The proposal and the Metropolis–Hastings correction (Roberts & Tweedie, 1996) with a drift ``b``
the caller chooses:

.. math::
    z' = z + h\beta\, b(z) + \sqrt{2h}\,\xi,\quad \xi \sim N(0, I),\qquad
    \log\alpha = \min\Big(0,\ \beta\big(\log\pi(z') - \log\pi(z)\big)
    + \frac{\|z' - z - h\beta b(z)\|^2 - \|z - z' - h\beta b(z')\|^2}{4h}\Big).

The same ``b`` defines the forward and the reverse proposal density, so the step is a valid
Metropolis–Hastings step for the proposal kernel ``N(z + hβb(z), 2hI)`` whatever ``b`` is: it
leaves ``π^β`` invariant (and is ``π^β``-reversible) for the score (MALA), a clipped or
preconditioned score (ETD's mutation), a tempered score (parallel tempering, ``β < 1``) or
``b = 0`` (random-walk Metropolis with step ``√(2h)``). ``b = ∇log π`` makes it MALA; any other
``b`` changes only the acceptance rate, never the invariant law.

The points carry a leading batch (``z`` of shape ``(..., d)``, ``log π(z)`` of shape ``(...)``);
every point accepts or rejects on its own. Inputs are valid (the public entry point checked them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["MALAMove", "mala_step"]


class MALAMove(NamedTuple):
    """The result of :func:`mala_step` (every field has the batch shape, vectors add ``(d,)``).

    Attributes:
        position: the new points ``(..., d)`` (the proposal where accepted, else the old point).
        logdensity: ``log π`` at the new points ``(...)``.
        drift: ``b`` at the new points ``(..., d)``.
        acceptance_rate: the acceptance probability ``α`` of the proposal ``(...)`` (0 where
            ``nonfinite``).
        is_accepted: whether the proposal was taken ``(...)``.
        nonfinite: the proposal's log-density or drift was NaN or ±inf ``(...)``; such proposals
            are always rejected (a ``+inf`` density never captures the chain).
    """

    position: jax.Array
    logdensity: jax.Array
    drift: jax.Array
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def _per_point(value, dtype):
    """A scalar or batch-shaped parameter, and its broadcast against ``(..., d)`` vectors."""
    value = jnp.asarray(value, dtype)
    return value, (value if value.ndim == 0 else value[..., None])


def mala_step(key: jax.Array, position: jax.Array, logdensity: jax.Array, drift: jax.Array,
              fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]], step_size, *,
              inverse_temperature=None) -> MALAMove:
    r"""One Metropolis-adjusted Langevin step of every point of a batch (see the module docstring).

    Args:
        key: PRNG key (split into the proposal noise and the acceptance uniforms).
        position: current points ``z`` ``(..., d)``.
        logdensity: ``log π(z)`` ``(...)`` (untempered).
        drift: ``b(z)`` ``(..., d)`` (untempered).
        fn: ``fn(z) -> (log π(z), b(z))`` on a batch of the same shape (the caller vmaps).
        step_size: ``h > 0``, a scalar or one per point ``(...)``.
        inverse_temperature: ``β`` (scalar or ``(...)``): the step targets ``π^β`` with drift
            ``βb``; ``None`` is ``β = 1`` with no extra operations.

    Returns:
        A :class:`MALAMove`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> fn = lambda z: (-0.5 * jnp.sum(z**2, axis=-1), -z)
        >>> z = jnp.zeros((4, 2))
        >>> move = mala_step(jax.random.key(0), z, *fn(z), fn, 0.5)
        >>> move.position.shape, move.is_accepted.shape
        ((4, 2), (4,))
    """
    dtype = position.dtype
    h, h_vec = _per_point(step_size, dtype)
    if inverse_temperature is None:
        beta = None
        shift = h_vec
    else:
        beta, beta_vec = _per_point(inverse_temperature, dtype)
        shift = h_vec * beta_vec
    key_noise, key_accept = jax.random.split(key)
    mean = position + shift * drift
    proposal = mean + jnp.sqrt(2 * h_vec) * jax.random.normal(key_noise, position.shape, dtype)
    logdensity_new, drift_new = fn(proposal)
    logdensity_new = logdensity_new.astype(dtype)
    nonfinite = ~(jnp.isfinite(logdensity_new) & jnp.all(jnp.isfinite(drift_new), axis=-1))
    forward = jnp.sum(jnp.square(proposal - mean), axis=-1)
    backward = jnp.sum(jnp.square(position - (proposal + shift * drift_new)), axis=-1)
    log_ratio = logdensity_new - logdensity
    if beta is not None:
        log_ratio = beta * log_ratio
    log_ratio = log_ratio + (forward - backward) / (4 * h)
    log_u = jnp.log(jax.random.uniform(key_accept, logdensity.shape, dtype))
    accept = (log_u < log_ratio) & ~nonfinite  # False for NaN ratios too
    alpha = jnp.where(nonfinite, jnp.zeros_like(log_ratio),
                      jnp.exp(jnp.minimum(log_ratio, jnp.zeros_like(log_ratio))))
    vector_accept = accept[..., None]
    return MALAMove(
        jnp.where(vector_accept, proposal, position),
        jnp.where(accept, logdensity_new, logdensity),
        jnp.where(vector_accept, drift_new.astype(dtype), drift),
        alpha,
        accept,
        nonfinite,
    )
