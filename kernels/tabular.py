"""Tabular MDP kernels: backward induction, exact policy evaluation, occupancy, Dirichlet draws.

Inputs are valid (the public entry points of :mod:`jaxsample.decision` checked them): transitions
``(H, S, A, S)`` with rows summing to 1, rewards ``(H, S, A)``, policy laws ``(H, S, A)``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["backward_induction", "dirichlet", "empirical_transitions", "evaluate", "occupancy",
           "stagewise"]


def empirical_transitions(counts: jax.Array, dtype) -> jax.Array:
    """Empirical next-state laws ``P̂(s′|s, a) = N(s, a, s′) / N(s, a)`` from ``(..., S)`` counts,
    uniform where a pair was never visited.

    Example:
        >>> import jax.numpy as jnp
        >>> empirical_transitions(jnp.array([[3, 1], [0, 0]]), jnp.float32).tolist()
        [[0.75, 0.25], [0.5, 0.5]]
    """
    n = counts.astype(dtype)
    total = jnp.sum(n, axis=-1, keepdims=True)
    uniform = jnp.full_like(n, 1.0 / counts.shape[-1])
    return jnp.where(total > 0, n / jnp.maximum(total, 1), uniform)


def stagewise(array: jax.Array, horizon: int) -> jax.Array:
    """``(H, ...)`` per-stage arrays from a stage-homogeneous ``(1, ...)`` one (or ``(H, ...)``
    unchanged)."""
    return jnp.broadcast_to(array, (horizon, *array.shape[1:]))


def backward_induction(transitions: jax.Array, rewards: jax.Array):
    """``V_{H+1} = 0``, ``Q_h = r_h + P_h V_{h+1}``, ``V_h = max_a Q_h``, ``π_h = argmax_a Q_h``.

    Returns:
        ``(values (H, S), q (H, S, A), policy (H, S) int32)``; the policy takes the first
        maximising action.

    Example:
        >>> import jax.numpy as jnp
        >>> p = jnp.ones((2, 1, 2, 1))
        >>> r = jnp.array([[[0.0, 1.0]], [[0.5, 0.2]]])
        >>> v, q, pi = backward_induction(p, r)
        >>> v.tolist(), pi.tolist()
        ([[1.5], [0.5]], [[1], [0]])
    """
    with jax.named_scope("backward_induction"):
        def step(v_next, arrays):
            p, r = arrays
            q = r + p @ v_next
            v = jnp.max(q, axis=-1)
            return v, (v, q, jnp.argmax(q, axis=-1).astype(jnp.int32))

        v_end = jnp.zeros(transitions.shape[1], transitions.dtype)
        _, out = jax.lax.scan(step, v_end, (transitions, rewards), reverse=True)
        return out


def evaluate(transitions: jax.Array, rewards: jax.Array, probs: jax.Array) -> jax.Array:
    """Exact values ``(H, S)`` of the policy law ``probs`` (``(H, S, A)``):
    ``V_h(s) = Σ_a π_h(a|s) (r_h(s, a) + Σ_{s′} P_h(s′|s, a) V_{h+1}(s′))``."""
    with jax.named_scope("evaluate_policy"):
        def step(v_next, arrays):
            p, r, pi = arrays
            v = jnp.sum(pi * (r + p @ v_next), axis=-1)
            return v, v

        v_end = jnp.zeros(transitions.shape[1], transitions.dtype)
        _, values = jax.lax.scan(step, v_end, (transitions, rewards, probs), reverse=True)
        return values


def occupancy(transitions: jax.Array, initial: jax.Array, probs: jax.Array) -> jax.Array:
    """State occupancy ``d_h(s)`` ``(H, S)`` of the policy law ``probs`` from ``initial``."""
    with jax.named_scope("occupancy"):
        def step(d, arrays):
            p, pi = arrays
            return jnp.einsum("s,sa,sat->t", d, pi, p), d

        _, occ = jax.lax.scan(step, initial, (transitions, probs))
        return occ


def dirichlet(key: jax.Array, alpha: jax.Array, num_tries: int = 8) -> jax.Array:
    """``Dir(alpha)`` draws along the last axis from Gamma variates (Marsaglia & Tsang 2000).

    ``G(α) = G(α + 1)·U^{1/α}``; ``G(α + 1)`` by Marsaglia–Tsang's squeeze-free rejection with
    ``d = α + 2/3``, ``c = 1/√(9d)``: ``v = (1 + c·x)³`` for ``x ∼ N(0, 1)``, accepted when
    ``v > 0`` and ``log u < x²/2 + d − d·v + d·log v``. Each variate takes the first of
    ``num_tries`` vectorised proposals that is accepted. For ``α + 1 ≥ 1`` a proposal is accepted
    with probability above 0.95, so all ``num_tries = 8`` fail with probability below
    ``0.05⁸ ≈ 4·10⁻¹¹`` per variate; the first proposal is then used (``d`` if its ``v ≤ 0``).

    Why not ``jax.random.dirichlet``: its Gamma sampler is a per-element rejection ``while_loop``
    that costs about 3 CPU-seconds to compile each time it is traced, which dominated every
    compilation of the posterior-sampling loop; this fixed-shape form compiles in a fraction.

    Args:
        key: PRNG key.
        alpha: ``(..., S)`` positive concentrations.
        num_tries: proposals per variate.

    Returns:
        ``(..., S)`` draws of ``alpha``'s dtype, each row summing to 1.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> draws = dirichlet(jax.random.key(0), jnp.full((4000, 3), 2.0))
        >>> [round(float(m), 1) for m in draws.mean(0)]
        [0.3, 0.3, 0.3]
    """
    with jax.named_scope("dirichlet"):
        dtype = alpha.dtype
        # one uniform draw feeds the normals (inverse error function, as jax.random.normal
        # does), the acceptance tests and the boost: each random call costs a compilation
        lo = jnp.nextafter(jnp.asarray(-1.0, dtype), jnp.asarray(0.0, dtype))
        shape = (2 * num_tries + 1, *alpha.shape)
        # drawn flat: the partitionable threefry's compile time grows with the draw's rank
        draws = jax.random.uniform(key, (math.prod(shape),), dtype).reshape(shape)
        x = jnp.sqrt(jnp.asarray(2.0, dtype)) * jax.lax.erf_inv(
            jnp.maximum(2 * draws[:num_tries] - 1, lo))
        u = draws[num_tries:2 * num_tries]
        d = (alpha + jnp.asarray(2.0 / 3.0, dtype))[None]
        c = jax.lax.rsqrt(9 * d)
        y = c * x
        v = (1 + y) ** 3
        positive = y > -1
        # d·(1 − v + log v) = d·(3(log1p(y) − y) − 3y² − y³): no cancellation of O(d) terms
        # when d is large (posterior counts in the millions)
        log1p_y = jnp.log1p(jnp.where(positive, y, 0))
        log_ratio = x * x / 2 + d * (3 * (log1p_y - y) - 3 * y * y - y * y * y)
        accept = positive & (jnp.log(u) < log_ratio)
        first = jnp.argmax(accept, axis=0)
        chosen = jnp.take_along_axis(d * jnp.where(positive, v, 1), first[None], axis=0)[0]
        boost = jnp.maximum(draws[-1], jnp.finfo(dtype).tiny)
        # log-space normalisation: U^{1/α} underflows for small α
        log_g = jnp.log(chosen) + jnp.log(boost) / alpha
        return jax.nn.softmax(log_g, axis=-1)
