r"""Exact finite-state theory of stopped chains: the minimal-flow classifier, the terminal law.

A chain with transition matrix ``K`` starts at ``X₀ ~ p₀`` and, at every visit to ``x``, stops with
probability ``σ(x)`` (:mod:`jaxsample.mcmc.stopping`). Its occupation ``G`` (expected visits) solves
``G = p₀ + (G ⊙ (1 − σ))K``, its terminal law is ``p_T = σ ⊙ G`` and ``E[L] = Σ_x G(x)(1 − σ(x))``.
:func:`optimal_stop_tabular` solves ``p_T = π`` for the shortest exact classifier ``σ* = π/G*``;
:func:`terminal_law` evaluates any ``σ``. Both are dense solves, jittable, ``vmap`` over problems of
one size; use float64 for round-off-exact values.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_array, check_simplex, check_stochastic_matrix, is_concrete

__all__ = ["TabularStopInfo", "optimal_stop_tabular", "terminal_law"]


class TabularStopInfo(NamedTuple):
    """The occupation and length of a stopped chain on a finite state space.

    Attributes:
        occupation: ``(n,)`` ``G``, the expected number of visits to each state.
        expected_length: ``E[L]``, the expected number of moves.
        nonfinite: a non-finite value in the result or the occupation (a singular system: a
            recurrent class where ``σ = 0``, or a reducible ``K``).
    """

    occupation: jax.Array
    expected_length: jax.Array
    nonfinite: jax.Array


def _info(occupation, expected_length, result) -> TabularStopInfo:
    finite = jnp.all(jnp.isfinite(occupation)) & jnp.all(jnp.isfinite(result)) & jnp.isfinite(
        expected_length)
    return TabularStopInfo(occupation, expected_length, ~finite)


def _common_dtype(*arrays):
    return jnp.result_type(*(a.dtype for a in arrays))


def optimal_stop_tabular(transition, init_probs, target_probs
                         ) -> tuple[jax.Array, TabularStopInfo]:
    r"""The exact minimal-flow stopping classifier ``σ* = π/G*`` on a finite state space.

    Solves ``G(I − K) = p₀ − πK`` (row vectors) by
    ``π_K = 𝟙ᵀ(I − K + 𝟙𝟙ᵀ)⁻¹`` (the stationary law of ``K``),
    ``G₀ = (p₀ − πK)(I − K + 𝟙π_K)⁻¹`` (fundamental matrix), and
    ``G* = G₀ + t*π_K`` with ``t* = max_x (π(x) − G₀(x))/π_K(x)``, the least flow with
    ``G* ≥ π``. Then ``σ*G* = π`` exactly (for any irreducible ``K``, π-invariant or not),
    ``max σ* = 1``, and ``E[L] = ΣG* − 1`` is the least of all exact classifiers. Two dense
    ``jnp.linalg.solve`` calls; use float64 (``jax.config.update("jax_enable_x64", True)``) for
    round-off-exact results. Jittable; ``vmap`` over problems of one size.

    Args:
        transition: ``(n, n)`` row-stochastic, irreducible.
        init_probs: ``(n,)`` initial law ``p₀``.
        target_probs: ``(n,)`` target ``π``.

    Returns:
        ``(sigma (n,), TabularStopInfo(occupation G*, expected_length, nonfinite))``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.mcmc import optimal_stop_tabular, terminal_law
        >>> K = jnp.array([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]])
        >>> pi, p0 = jnp.array([0.25, 0.5, 0.25]), jnp.array([1.0, 0.0, 0.0])
        >>> sigma, info = optimal_stop_tabular(K, p0, pi)
        >>> p_T, _ = terminal_law(K, p0, sigma)
        >>> [round(float(v), 6) for v in p_T]
        [0.25, 0.5, 0.25]
    """
    transition = check_stochastic_matrix("transition", transition)
    n = transition.shape[0]
    init_probs = check_simplex("init_probs", init_probs, shape=(n,))
    target_probs = check_simplex("target_probs", target_probs, shape=(n,))
    dtype = _common_dtype(transition, init_probs, target_probs)
    return _optimal_stop(transition.astype(dtype), init_probs.astype(dtype),
                         target_probs.astype(dtype))


@jax.jit
def _optimal_stop(transition, init_probs, target_probs):
    with jax.named_scope("optimal_stop_tabular"):
        n = transition.shape[0]
        eye = jnp.eye(n, dtype=transition.dtype)
        ones = jnp.ones((n,), transition.dtype)
        base = eye - transition
        stationary = jnp.linalg.solve((base + 1.0).T, ones)
        rhs = init_probs - target_probs @ transition
        g0 = jnp.linalg.solve((base + jnp.outer(ones, stationary)).T, rhs)
        ratio = jnp.where(stationary > 0, (target_probs - g0) / stationary, -jnp.inf)
        occupation = g0 + jnp.max(ratio) * stationary
        sigma = jnp.where(occupation > 0, jnp.clip(target_probs / occupation, 0.0, 1.0), 1.0)
        return sigma, _info(occupation, jnp.sum(occupation) - 1.0, sigma)


def terminal_law(transition, init_probs, sigma) -> tuple[jax.Array, TabularStopInfo]:
    r"""The exact terminal law of the stopped chain: ``p_T = p₀(I − D_{1−σ}K)⁻¹ D_σ``.

    Also returns the occupation ``G = p₀(I − D_{1−σ}K)⁻¹`` and ``E[L] = Σ_x G(x)(1 − σ(x))``
    (``= ΣG − 1`` when the chain stops almost surely). One ``jnp.linalg.solve``; float64 for
    round-off-exact values.

    Args:
        transition: ``(n, n)`` row-stochastic.
        init_probs: ``(n,)`` initial law.
        sigma: ``(n,)`` stopping probabilities in ``[0, 1]``, positive on every recurrent class.

    Returns:
        ``(terminal_probs (n,), TabularStopInfo(occupation, expected_length, nonfinite))``.
    """
    transition = check_stochastic_matrix("transition", transition)
    n = transition.shape[0]
    init_probs = check_simplex("init_probs", init_probs, shape=(n,))
    sigma = check_array("sigma", sigma, shape=(n,), finite=True)
    if is_concrete(sigma) and (np.any(np.asarray(sigma) < 0) or np.any(np.asarray(sigma) > 1)):
        raise ValueError(f"sigma must lie in [0, 1], got range [{float(np.min(sigma))}, "
                         f"{float(np.max(sigma))}]")
    dtype = _common_dtype(transition, init_probs, sigma)
    return _terminal(transition.astype(dtype), init_probs.astype(dtype), sigma.astype(dtype))


@jax.jit
def _terminal(transition, init_probs, sigma):
    with jax.named_scope("terminal_law"):
        n = transition.shape[0]
        continuing = (1.0 - sigma)[:, None] * transition
        occupation = jnp.linalg.solve((jnp.eye(n, dtype=transition.dtype) - continuing).T,
                                      init_probs)
        terminal = occupation * sigma
        return terminal, _info(occupation, jnp.sum(occupation * (1.0 - sigma)), terminal)
