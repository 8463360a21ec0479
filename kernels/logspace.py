"""Log-space helpers: normalisation, ESS, ``log1mexp``, ``logaddexp``, segment LSE, tempering.

Wherever exponentials meet (importance weights, softmax rows, mixture densities) jaxsample works
with log-weights and carries ``−inf`` for zero mass rather than NaN. These are the shared pieces;
draws from log-weights are :mod:`jaxsample.kernels.resampling`'s.

Inputs are valid: the public entry point checked them.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxsample.kernels.roots import bisect

__all__ = ["log1mexp", "log_ess", "log_normalize", "logaddexp", "segment_logsumexp",
           "temper_to_ess"]


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


def log1mexp(a: jax.Array) -> jax.Array:
    """``log(1 − e^a)`` for ``a <= 0``, accurate for every ``a`` (Mächler 2012, *Accurately
    computing log(1 − exp(−|a|))*): ``log(−expm1(a))`` for ``a > −log 2``, ``log1p(−exp(a))``
    below; ``−inf`` at ``a = 0``. Both branches are evaluated on safe inputs, so gradients stay
    finite wherever the value is.

    Example:
        >>> import jax.numpy as jnp
        >>> [round(float(v), 4) for v in log1mexp(jnp.array([-1e-9, -1.0, -50.0]))]
        [-20.7233, -0.4587, -0.0]
    """
    near = a > -math.log(2)
    a_near = jnp.where(near, a, -jnp.ones_like(a))
    a_far = jnp.where(near, -jnp.ones_like(a), a)
    return jnp.where(near, jnp.log(-jnp.expm1(a_near)), jnp.log1p(-jnp.exp(a_far)))


def logaddexp(a: jax.Array, b: jax.Array) -> jax.Array:
    """``log(e^a + e^b)``, as ``jnp.logaddexp``, with a zero (not NaN) gradient where both are
    ``−inf``.

    ``jnp.logaddexp(−inf, −inf)`` is ``−inf`` but its gradient is NaN, which poisons a
    differentiated recursion that adds empty (``−inf``) terms, e.g. the elementary symmetric
    polynomials of :mod:`jaxsample.kernels.ksubset` before ``r`` items are seen. Elsewhere values
    and gradients are ``jnp.logaddexp``'s.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> float(logaddexp(jnp.log(1.0), jnp.log(3.0)) - jnp.log(4.0))
        0.0
        >>> float(jax.grad(logaddexp)(-jnp.inf, -jnp.inf))
        0.0
    """
    top = jax.lax.stop_gradient(jnp.maximum(a, b))
    top = jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))
    total = jnp.exp(a - top) + jnp.exp(b - top)
    positive = total > 0
    safe = jnp.where(positive, total, jnp.ones_like(total))
    return jnp.where(positive, top + jnp.log(safe), jnp.full_like(total, -jnp.inf))


def temper_to_ess(log_weights: jax.Array, min_ess, *, num_bisections: int = 30
                  ) -> tuple[jax.Array, jax.Array]:
    """Temper log-weights, ``w ∝ w^β``, with the largest ``β ∈ (0, 1]`` whose ESS is ``>= min_ess``.

    Kish's ESS of ``w^β`` falls as ``β`` grows (from ``K`` at ``β = 0``), so ``β`` is found by
    bisection (:func:`jaxsample.kernels.roots.bisect`); ``β = 1`` (the weights unchanged) when
    they already meet ``min_ess``, and ``β`` is floored at ``10⁻⁶``. Tempered weights target
    ``q^{1−β} π^β`` rather than ``π`` (SMC's adaptive tempering, Jasra et al. 2011): callers
    follow them with ``π``-invariant moves.

    Args:
        log_weights: ``(K,)`` unnormalised log-weights (``−inf`` allowed; stays ``−inf``).
        min_ess: the ESS to keep, a count in ``[1, K]``.
        num_bisections: bisection steps (static).

    Returns:
        ``(normalised tempered log-weights, β)``; the log-weights are returned normalised only
        when tempered (``β < 1``), as given otherwise.

    Example:
        >>> import jax.numpy as jnp
        >>> log_w = jnp.array([0.0, -10.0, -10.0, -10.0])
        >>> tempered, beta = temper_to_ess(log_w, 2.0)
        >>> round(float(jnp.exp(log_ess(tempered))), 3), float(beta) < 1
        (2.0, True)
    """
    finite = jnp.isfinite(log_weights)
    target = jnp.asarray(min_ess, log_weights.dtype)

    def ess(beta):
        return jnp.exp(log_ess(jnp.where(finite, beta * log_weights, -jnp.inf)))

    one = jnp.ones((), log_weights.dtype)
    lo, _ = bisect(lambda beta: ess(beta) >= target, jnp.zeros_like(one), one,
                   num_iterations=num_bisections)
    beta = jnp.where(ess(one) >= target, one, jnp.maximum(lo, jnp.asarray(1e-6, one.dtype)))
    tempered = log_normalize(jnp.where(finite, beta * log_weights, -jnp.inf))
    return jnp.where(beta < 1, tempered, log_weights), beta


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
