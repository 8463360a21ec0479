"""Log-space helpers: normalisation, effective sample size, segment log-sum-exp, categorical draws.

Wherever exponentials meet (importance weights, softmax rows, mixture densities) jaxsample works
with log-weights and carries ``−inf`` for zero mass rather than NaN. These are the shared pieces.

:func:`categorical` draws by inverse CDF with **one uniform per draw**: the row is normalised
(``softmax``), cumulated, and each uniform ``u ~ U[0, 1)`` picks ``min{j : F_j > u·F_K}``.
``jax.random.categorical`` draws one Gumbel per category instead (``K`` exponentials and logs per
draw); measured inside an ETD step (N = 100 rows, P = 2 500 categories) that noise took 11.1 ms
against 0.45 ms here, and it dominated 64-draw two-level softmax calls. Both are exact samplers of
the same law; they consume keys differently, so their streams differ.

Inputs are valid: the public entry point checked them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["categorical", "log_ess", "log_normalize", "segment_logsumexp"]


def log_normalize(log_weights: jax.Array, axis: int = -1) -> jax.Array:
    """``log w − LSE(log w)`` along ``axis`` (``−inf`` entries stay ``−inf``).

    Example:
        >>> import jax.numpy as jnp
        >>> jnp.exp(log_normalize(jnp.log(jnp.array([1.0, 3.0, 0.0])))).round(4).tolist()
        [0.25, 0.75, 0.0]
    """
    return log_weights - jax.nn.logsumexp(log_weights, axis=axis, keepdims=True)


def log_ess(log_weights: jax.Array, axis: int = -1) -> jax.Array:
    """Log of Kish's effective sample size ``(Σw)² / Σw²`` of unnormalised log-weights.

    ``exp`` of it lies in ``[1, K]``: ``K`` for equal weights, 1 when one weight holds all mass.

    Example:
        >>> import jax.numpy as jnp
        >>> float(jnp.exp(log_ess(jnp.zeros(8))))
        8.0
    """
    return 2 * jax.nn.logsumexp(log_weights, axis=axis) - jax.nn.logsumexp(
        2 * log_weights, axis=axis
    )


def segment_logsumexp(values: jax.Array, segment_ids: jax.Array, num_segments: int) -> jax.Array:
    """``log Σ_{i: s_i = k} exp(v_i)`` for every segment ``k`` (``−inf`` for empty segments).

    Stable: the per-segment maximum is subtracted before exponentiating.

    Args:
        values: ``(n,)`` log-values (``−inf`` allowed).
        segment_ids: ``(n,)`` ints in ``[0, num_segments)``.
        num_segments: static number of segments.

    Returns:
        ``(num_segments,)`` of ``values``' dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> out = segment_logsumexp(jnp.zeros(3), jnp.array([0, 0, 2]), 3)
        >>> [round(float(v), 4) for v in out]
        [0.6931, -inf, 0.0]
    """
    top = jax.ops.segment_max(values, segment_ids, num_segments=num_segments)
    safe_top = jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))
    shifted = jnp.exp(values - safe_top[segment_ids])
    total = jax.ops.segment_sum(shifted, segment_ids, num_segments=num_segments)
    return jnp.where(total > 0, jnp.log(total) + safe_top, -jnp.inf).astype(values.dtype)


def categorical(key: jax.Array, log_weights: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
    """Draws ``j ~ Cat(softmax(log_weights))`` by inverse CDF, one uniform per draw.

    ``log_weights`` may be unnormalised and hold ``−inf`` (zero mass: never drawn); every row needs
    at least one finite entry. Batched rows:
    ``log_weights`` of shape ``(..., K)`` gives draws of shape ``shape + (...)`` per the leading
    batch, i.e. ``shape`` draws for every row, like ``jax.random.categorical(key, logits,
    shape=shape + batch)`` with ``axis=-1``.

    The CDF is accumulated in the input dtype; a draw's probability is exact up to the round-off
    of that sum (``~K·u`` relative, u the unit round-off), which for float32 and ``K <= 10⁶`` is far
    below any Monte Carlo error.

    Args:
        key: PRNG key.
        log_weights: ``(..., K)`` floating.
        shape: draws per row (leading axes of the result).

    Returns:
        int32 indices of shape ``shape + log_weights.shape[:-1]``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> draws = categorical(jax.random.key(0), jnp.log(jnp.array([0.0, 1.0, 9.0])), (4000,))
        >>> [round(float(jnp.mean(draws == k)), 1) for k in range(3)]
        [0.0, 0.1, 0.9]
    """
    batch = log_weights.shape[:-1]
    num_categories = log_weights.shape[-1]
    dtype = log_weights.dtype
    probs = jax.nn.softmax(log_weights, axis=-1)
    cdf = jnp.cumsum(probs, axis=-1)
    total = jnp.broadcast_to(cdf[..., -1], shape + batch)
    u = jax.random.uniform(key, shape + batch, dtype) * total

    def search(row_cdf, row_u, row_probs):
        idx = jnp.searchsorted(row_cdf, row_u, side="right").astype(jnp.int32)
        # u·F_K can round up to F_K itself: fall back to the last category with positive mass
        last = num_categories - 1 - jnp.argmax(row_probs[::-1] > 0).astype(jnp.int32)
        return jnp.minimum(idx, last)

    num_rows = cdf.size // num_categories
    num_draws = u.size // num_rows
    flat_u = u.reshape((num_draws, num_rows)).T
    picks = jax.vmap(search)(cdf.reshape((num_rows, num_categories)), flat_u,
                             probs.reshape((num_rows, num_categories)))
    return picks.T.reshape(shape + batch)
