"""Beta-binomial kernels: log-beta with an accurate cheap derivative, the pmf, survival, pass@k.

A prompt attacked ``n`` times with success probability ``θ ~ Beta(α, β)`` has ``c ~
BetaBinomial(n, α, β)`` successes,

.. math::

    \\log P(c) = \\log\\binom{n}{c} + \\log B(c + α, n − c + β) − \\log B(α, β),

and the probability that ``N`` attempts all fail is
:math:`S(N) = E[(1 − θ)^N] = B(α, β + N)/B(α, β)`.

:func:`betaln` is written here rather than taken from ``jax.scipy.special.betaln``, whose
``algdiv`` branch (``b >= 8``) errs by up to ~1e-6 *in float64* (measured on jax 0.10.2: 3.6e-7 at
``(0.3, 8)``, 1.3e-6 at ``(8.1, 3)`` against SciPy). A likelihood whose value and gradient disagree
at that level stalls a line search: BFGS fits of 300 prompts failed to converge in 5–15 % of
bootstrap resamples. Here ``log Γ(b) − log Γ(a + b)`` for ``b >= 10`` comes from Stirling's series
written as differences (``−a log b − (a + b − ½)·log1p(a/b) + a + ω(b) − ω(a + b)``, each
``ω`` difference as ``b^{-m}·(−expm1(−m·log1p(a/b)))``), accurate to ~1e-14, and the
derivative :math:`∂_a \\log B(a, b) = ψ(a) − ψ(a + b)` — a digamma *difference* that loses every
digit to cancellation when ``b ≫ a`` in float32 — comes from :func:`digamma_difference`, the
asymptotic series of ψ differenced the same way. Writing the derivative by hand also halves the
compile time of every likelihood gradient (measured 3.9 s against 2.0 s for one BFGS fit).

Inputs are valid (positive shape parameters, ``0 <= c <= n``, matching dtypes): the public entry
point checked them. Everything is elementwise, jitted, and preserves the floating dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import digamma

__all__ = [
    "betaln",
    "digamma_difference",
    "log_gamma_ratio",
    "log_binomial_ratio",
    "log_survival",
    "logpmf",
]

# ψ(z) ~ log z − 1/(2z) − Σ_k B_2k / (2k z^2k): (2k, B_2k/(2k)) for k = 1..5
_PSI_SERIES = ((2, 1.0 / 12.0), (4, -1.0 / 120.0), (6, 1.0 / 252.0), (8, -1.0 / 240.0),
               (10, 1.0 / 132.0))
# log Γ(z) = (z − ½)log z − z + ½log 2π + ω(z), ω(z) ~ Σ_k B_2k / (2k(2k − 1) z^{2k−1})
_OMEGA_SERIES = ((1, 1.0 / 12.0), (3, -1.0 / 360.0), (5, 1.0 / 1260.0), (7, -1.0 / 1680.0),
                 (9, 1.0 / 1188.0))
# below this the series are not used (their truncation errors at z = 10 are ~2e-14)
_SERIES_FROM = 10.0


@jax.jit
def digamma_difference(x: jax.Array, y: jax.Array) -> jax.Array:
    """``ψ(x + y) − ψ(x)`` for ``x > 0, y >= 0``, accurate also when ``y ≪ x``.

    For ``x >= 10`` every term of the asymptotic series of ψ is differenced in closed form
    (``log1p(y/x)`` and ``x^{-m}·expm1(−m·log1p(y/x))``), so no two large numbers are subtracted;
    below 10 the two digammas are of moderate size and are subtracted directly.

    Example:
        >>> import jax.numpy as jnp
        >>> x, y = jnp.array(1e6), jnp.array(0.3)  # ψ(x + y) − ψ(x) ≈ y/x
        >>> round(float(digamma_difference(x, y) * 1e6), 5)
        0.3
    """
    large = x >= _SERIES_FROM
    xs = jnp.where(large, x, jnp.asarray(_SERIES_FROM, x.dtype))
    ratio = jnp.log1p(y / xs)
    series = ratio + 0.5 * (1.0 / xs) * (-jnp.expm1(-ratio))
    for power, coefficient in _PSI_SERIES:
        # −c·((x + y)^{-m} − x^{-m}) = −c·x^{-m}·expm1(−m·log1p(y/x))
        series = series - coefficient * xs ** (-power) * jnp.expm1(-power * ratio)
    xd = jnp.where(large, jnp.ones_like(x), x)
    direct = digamma(xd + y) - digamma(xd)
    return jnp.where(large, series, direct)


@jax.jit
def log_gamma_ratio(a: jax.Array, b: jax.Array) -> jax.Array:
    """``log Γ(b) − log Γ(a + b)`` for ``a, b > 0``, accurate when ``b`` is large.

    For ``b >= 10`` Stirling's series is differenced term by term (no cancellation between the
    two large log-gammas); below, the log-gammas are subtracted directly.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(log_gamma_ratio(jnp.array(1.0), jnp.array(1e6)) + jnp.log(1e6)), 6)
        0.0
    """
    large = b >= _SERIES_FROM
    bs = jnp.where(large, b, jnp.full_like(b, _SERIES_FROM))
    ratio = jnp.log1p(a / bs)
    series = -a * jnp.log(bs) - (a + bs - 0.5) * ratio + a
    for power, coefficient in _OMEGA_SERIES:
        # ω(b) − ω(a + b) = Σ d·b^{-m}·(1 − (b/(a + b))^m)
        series = series - coefficient * bs ** (-power) * jnp.expm1(-power * ratio)
    bd = jnp.where(large, jnp.ones_like(b), b)
    direct = jax.lax.lgamma(bd) - jax.lax.lgamma(a + bd)
    return jnp.where(large, series, direct)


@jax.custom_jvp
def _betaln(a: jax.Array, b: jax.Array) -> jax.Array:
    """``log B(a, b)`` for ``a, b > 0``: ``log Γ(min) + log_gamma_ratio(min, max)``.

    Accurate to ~1e-14 relative in float64 (against SciPy) with the derivative of
    :func:`digamma_difference`.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(jnp.exp(betaln(jnp.array(2.0), jnp.array(3.0)))), 6)  # B(2, 3) = 1/12
        0.083333
    """
    small, large = jnp.minimum(a, b), jnp.maximum(a, b)
    return jax.lax.lgamma(small) + log_gamma_ratio(small, large)


@_betaln.defjvp
def _betaln_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    return _betaln(a, b), -digamma_difference(a, b) * da - digamma_difference(b, a) * db


betaln = jax.jit(_betaln)


@jax.jit
def logpmf(successes: jax.Array, trials: jax.Array, alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """Beta-binomial ``log P(c; n, α, β)``.

    Uses ``log C(n, c) = −log(n + 1) − log B(c + 1, n − c + 1)``.

    Example:
        >>> import jax.numpy as jnp
        >>> c = jnp.arange(6.0)
        >>> total = jnp.exp(logpmf(c, jnp.array(5.0), jnp.array(0.5), jnp.array(2.0))).sum()
        >>> round(float(total), 5)
        1.0
    """
    log_choose = -jnp.log1p(trials) - betaln(successes + 1, trials - successes + 1)
    return log_choose + betaln(successes + alpha, trials - successes + beta) - betaln(alpha, beta)


@jax.jit
def log_survival(n: jax.Array, alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """``log S(N) = log B(α, β + N) − log B(α, β) = log E[(1 − θ)^N]``, θ ~ Beta(α, β).

    Its absolute error is about ``eps·|log B(α, β)|``, so ``1 − S`` keeps its relative accuracy
    while ``1 − S ≫ eps·|log B(α, β)|`` (use float64 below ~1e-4 in float32).

    Example:
        >>> import jax.numpy as jnp
        >>> a, b = jnp.array(0.5), jnp.array(3.0)
        >>> round(float(-jnp.expm1(log_survival(jnp.array(1.0), a, b))), 5)  # α/(α + β) = 1/7
        0.14286
    """
    value = betaln(alpha, beta + n) - betaln(alpha, beta)
    return jnp.where(n == 0, jnp.zeros_like(value), value)  # exact 0 (fused rounding may differ)


@jax.jit
def log_binomial_ratio(a: jax.Array, b: jax.Array, k: jax.Array) -> jax.Array:
    """``log[C(a, k)/C(b, k)]`` for ``0 <= a <= b`` and ``k >= 0``; ``−inf`` when ``a < k``.

    Written as ``log B(k, b − k + 1) − log B(k, a − k + 1)`` (for ``k >= 1``), which has no
    cancellation between large log-gammas. ``k = 0`` gives 0.

    Example:
        >>> import jax.numpy as jnp
        >>> ratio = log_binomial_ratio(jnp.array(4.0), jnp.array(6.0), jnp.array(2.0))
        >>> round(float(jnp.exp(ratio)), 6)  # C(4, 2)/C(6, 2)
        0.4
    """
    k_safe = jnp.where(k >= 1, k, jnp.ones_like(k))
    a_safe = jnp.where(a >= k_safe, a, k_safe)
    value = betaln(k_safe, b - k_safe + 1) - betaln(k_safe, a_safe - k_safe + 1)
    value = jnp.where(k >= 1, value, jnp.zeros_like(value))
    return jnp.where(a >= k, value, jnp.full_like(value, -jnp.inf))
