"""Λ^{-1/2} z from oracle queries: quadrature rules over resolvents, dithered quantiser, baselines.

The smoothed-score Gaussian sampler draws ``x = m + S z`` with ``S ≈ Λ^{-1/2}``, where ``Λ`` is a
precision matrix it only sees through queries. This module holds the numerical pieces:

- Quadrature rules (host, NumPy/SciPy float64) ``Λ^{-1/2} ≈ Σ_k w_k (Λ + μ_k I)^{-1}`` with noise
  levels ``τ_k = 1/μ_k``, returned as a :class:`QuadratureRule`:

  - :func:`elliptic_rule`: the Hale–Higham–Trefethen rule — the midpoint rule after the conformal
    substitution ``t = √λ_min sc(v | m)``; geometric convergence ``≈ 4 e^{-2πN K'/K}`` gives
    ``N = O(log κ · log 1/ε)`` nodes with a small constant (6 to 17 nodes for ``ε = 1e-6``,
    ``κ = 1e2 … 1e8``);
  - :func:`sinc_rule`: the plain trapezoid (sinc) rule in ``u = log t`` with error-controlled step
    and truncation (the rule the paper analyses; ~3–5× more nodes).

  Node counts are Python ints, hence static shapes under ``jit``.
- :func:`inverse_sqrt_rational`: the scalar rational function ``r(λ)`` a rule realises.
- :func:`resolvent`: ``R_τ z = (Λ + τ^{-1} I)^{-1} z`` from a smoothed-score oracle through
  ``R_τ z = τ z + τ² [s_τ(c + z) − s_τ(c)]``.
- :func:`dithered_quantize`: a ``b``-bit uniform quantiser with subtractive dither.
- Baselines that see only plain products ``Λ v``: :func:`chebyshev_inverse_sqrt` (host
  coefficients) with :func:`chebyshev_apply`, and :func:`lanczos_inverse_sqrt`.

Inputs are assumed valid: the public entry points of :mod:`jaxsample.gaussian` check them.

References: J. Liu, *Smoothed Score Queries and the Complexity of Sampling*, arXiv:2605.27769
(2026); N. Hale, N. J. Higham & L. N. Trefethen, *Computing A^α, log(A), and related matrix
functions by contour integrals*, SIAM J. Numer. Anal. 46 (2008), method 3. Neither jax, lineax,
optax nor ott-jax provides these matrix-function kernels, so they are written here; the Jacobi
elliptic functions come from ``scipy.special`` (``ellipj``, ``ellipk``, ``ellipkm1``; jax has none,
and the nodes are host-side set-up).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft
import scipy.special

__all__ = [
    "QuadratureRule",
    "RULES",
    "SincRule",
    "chebyshev_apply",
    "chebyshev_inverse_sqrt",
    "dithered_quantize",
    "elliptic_num_nodes",
    "elliptic_rule",
    "inverse_sqrt_rational",
    "lanczos_inverse_sqrt",
    "quadrature_rule",
    "resolvent",
    "sinc_rule",
    "sinc_step",
]


class QuadratureRule(NamedTuple):
    """Host-side quadrature rule ``λ^{-1/2} ≈ Σ_k w_k τ_k/(1 + τ_k λ)`` (NumPy float64 arrays).

    Attributes:
        weights: ``(q,)`` weights ``w_k`` of the resolvents ``(λ + μ_k)^{-1}``.
        taus: ``(q,)`` noise levels ``τ_k = 1/μ_k``, decreasing (largest ``τ`` first).
    """

    weights: np.ndarray
    taus: np.ndarray


class SincRule(NamedTuple):
    """The :func:`sinc_rule`: a :class:`QuadratureRule`'s fields and the trapezoid step.

    Attributes:
        weights: ``(q,)`` weights ``w_k = (2h/π) e^{kh}``.
        taus: ``(q,)`` noise levels ``τ_k = e^{-2kh}``, decreasing.
        step: the step ``h`` of the trapezoid rule (:func:`sinc_step`).
    """

    weights: np.ndarray
    taus: np.ndarray
    step: float


def elliptic_num_nodes(lambda_min: float, lambda_max: float, tol: float) -> int:
    """Nodes of :func:`elliptic_rule` from its error bound: ``N = ⌈K/(2πK') · log(4/ε)⌉``.

    ``K = K(m)`` and ``K' = K(1 − m)`` are the complete elliptic integrals of the parameter
    ``m = 1 − λ_min/λ_max`` (``scipy.special.ellipkm1`` / ``ellipk``). The midpoint rule's
    relative error is ``≤ 4 e^{−2πN K'/K}`` (see :func:`elliptic_rule`), so this ``N`` meets
    ``tol``. As ``κ → ∞``, ``K ≈ ½ log(16κ)`` and ``K' → π/2``:
    ``N ≈ log(16κ) log(4/ε) / (2π²)``, about ``0.28 log(4/ε)`` more nodes per decade of ``κ``.

    Example:
        >>> [elliptic_num_nodes(1.0, k, 1e-6) for k in (1e2, 1e4, 1e6, 1e8)]
        [6, 10, 13, 17]
    """
    ratio = float(lambda_min) / float(lambda_max)
    if ratio >= 1.0:
        return 1  # λ constant: one node is exact
    rate = 2 * math.pi * float(scipy.special.ellipk(ratio)) / float(scipy.special.ellipkm1(ratio))
    return max(1, math.ceil(math.log(4 / float(tol)) / rate))


def elliptic_rule(lambda_min: float, lambda_max: float, tol: float) -> QuadratureRule:
    """The Hale–Higham–Trefethen rule for ``λ^{-1/2}`` on ``[lambda_min, lambda_max]``.

    Start from ``λ^{-1/2} = (2/π) ∫_0^∞ dt / (t² + λ)`` and substitute
    ``t = √λ_min sc(v | m)``, ``m = 1 − λ_min/λ_max``, ``v ∈ (0, K)`` (Jacobi elliptic functions,
    ``d sc/dv = dn/cn²``). The midpoint rule with ``N`` nodes ``v_j = (j − ½) K/N`` gives::

        r(λ) = Σ_j w_j / (λ + μ_j),   μ_j = λ_min sc²(v_j),
        w_j = (2/π)(K/N) √λ_min dn(v_j)/cn²(v_j),   τ_j = 1/μ_j.

    The integrand in ``v`` is even about ``0`` and about ``K`` (a ``2K``-periodic function), and its
    poles — where ``t(v)² = −λ`` — all lie on ``Im v = K' = K(1 − m)``. The periodic midpoint rule
    then converges geometrically: each pole pair has residue ``1/(π√λ)`` relative to ``λ^{-1/2}``,
    so ``|r(λ)√λ − 1| ≤ 4 e^{−2πN K'/K}`` to leading order, uniformly on the interval, and
    :func:`elliptic_num_nodes` picks the smallest ``N`` that meets ``tol`` by this bound
    (measured: the realised maximum error is 0.5–1.0 ``tol`` over ``κ ∈ [1, 10¹⁴]``,
    ``tol ∈ [10⁻¹¹, 10⁻²]``). N. Hale, N. J. Higham & L. N. Trefethen, SIAM J. Numer. Anal. 46
    (2008), method 3.

    The shifts are symmetric about ``√(λ_min λ_max)``: with ``x = K − v``, ``sc(v) = cs(x)/k'``
    and ``dn(v)/cn²(v) = dn(x)/(k' sn²(x))`` (``k'² = λ_min/λ_max``), hence
    ``μ_{N+1−j} = λ_max cs²(v_j)`` and ``w_{N+1−j} = (2/π)(K/N)√λ_max dn(v_j)/sn²(v_j)``. The upper
    half of the nodes is computed this way, so no ``cn`` near its zero at ``K`` is ever divided
    by. Host-side SciPy float64 (``scipy.special.ellipj``; jax has no elliptic functions); inputs
    are assumed valid (``jaxsample.gaussian`` checks them).

    Args:
        lambda_min: lower spectral bound, ``> 0``.
        lambda_max: upper spectral bound, ``>= lambda_min``.
        tol: relative tolerance ``ε`` in ``(0, 1)``.

    Returns:
        A :class:`QuadratureRule` with ``N`` nodes (largest ``τ`` first).

    Example:
        >>> rule = elliptic_rule(1.0, 1e8, 1e-8)
        >>> lam = np.geomspace(1.0, 1e8, 200)
        >>> r = (rule.weights * rule.taus / (1 + rule.taus * lam[:, None])).sum(1)
        >>> len(rule.taus), bool(np.max(np.abs(r * np.sqrt(lam) - 1)) <= 1e-8)
        (22, True)
    """
    lam_min = float(lambda_min)
    # m = 1 − λ_min/λ_max rounds; take the complementary parameter p = 1 − m that SciPy will
    # see, rounded down so that [λ_min, λ_min/p] covers [λ_min, λ_max].
    m = 1.0 - lam_min / float(lambda_max)
    if 1.0 - m > lam_min / float(lambda_max):
        m = float(np.nextafter(m, 1.0))
    p = 1.0 - m
    num_nodes = elliptic_num_nodes(lam_min, lam_min / p, tol)
    quarter = math.pi / 2 if p >= 1.0 else float(scipy.special.ellipkm1(p))
    v = (np.arange(num_nodes) + 0.5) * quarter / num_nodes
    sn, cn, dn, _ = scipy.special.ellipj(v, m)
    scale = (2 / math.pi) * quarter / num_nodes
    upper = v > quarter / 2
    mirror = num_nodes - 1 - np.arange(num_nodes)  # v[mirror] = K − v
    shifts = np.where(upper, (lam_min / p) * (cn[mirror] / sn[mirror]) ** 2,
                      lam_min * (sn / cn) ** 2)
    weights = np.where(upper, scale * math.sqrt(lam_min / p) * dn[mirror] / sn[mirror] ** 2,
                       scale * math.sqrt(lam_min) * dn / cn**2)
    return QuadratureRule(weights=weights, taus=1 / shifts)


def sinc_step(tol: float) -> float:
    """The step ``h = π² / (log(1/ε) + log 8)`` of :func:`sinc_rule`."""
    return math.pi**2 / (math.log(1 / float(tol)) + math.log(8))


def sinc_rule(lambda_min: float, lambda_max: float, tol: float) -> SincRule:
    """Sinc-quadrature nodes for ``λ^{-1/2}`` on ``[lambda_min, lambda_max]`` to relative ``tol``.

    With ``t = e^u``, ``λ^{-1/2} = (2/π) ∫_ℝ e^u / (e^{2u} + λ) du``. The integrand is analytic in
    the strip ``|Im u| < π/2``, so the trapezoid rule with step ``h`` errs by about ``e^{-π²/h}``:
    ``h = π² / (log(1/ε) + log 8)`` (:func:`sinc_step`). The tails below
    ``u_lo = ½ log λ_min − log(2/(πε))`` and above ``u_hi = ½ log λ_max + log(2/(πε))`` each
    contribute at most ``ε`` relative error. With nodes ``k h`` for
    ``⌊u_lo/h⌋ ≤ k ≤ ⌈u_hi/h⌉``::

        r(λ) = Σ_k w_k / (λ + e^{2kh}) = Σ_k w_k τ_k / (1 + τ_k λ),
        w_k = (2h/π) e^{kh},   τ_k = e^{-2kh}

    satisfies ``max |r(λ) √λ − 1| ≲ ε`` on the interval (the three parts add: assert ``≤ 2ε``). The
    node count ``q ≈ [½ log κ + 2 log(2/(πε))] (log(1/ε) + log 8) / π²`` grows by a constant per
    decade of ``κ = λ_max/λ_min``. This is the rule J. Liu's query bound is proved for; its
    truncation puts ``τ_max ≈ (2/(πε))²/λ_min``, which :func:`elliptic_rule` avoids.

    Runs on the host so that ``q`` is a Python int (a static shape under ``jit``). Inputs are
    assumed valid (``jaxsample.gaussian`` checks them).

    Args:
        lambda_min: lower spectral bound, ``> 0``.
        lambda_max: upper spectral bound, ``>= lambda_min``.
        tol: relative tolerance ``ε`` in ``(0, 1)``.

    Returns:
        A :class:`SincRule` with ``q`` weights and noise levels (largest ``τ`` first).

    Example:
        >>> rule = sinc_rule(1.0, 1e4, 1e-6)
        >>> lam = np.geomspace(1.0, 1e4, 50)
        >>> r = (rule.weights * rule.taus / (1 + rule.taus * lam[:, None])).sum(1)
        >>> bool(np.max(np.abs(r * np.sqrt(lam) - 1)) <= 2e-6)
        True
    """
    lam_min, lam_max, eps = float(lambda_min), float(lambda_max), float(tol)
    step = sinc_step(eps)
    tail = math.log(2 / (math.pi * eps))
    k_lo = math.floor((0.5 * math.log(lam_min) - tail) / step)
    k_hi = math.ceil((0.5 * math.log(lam_max) + tail) / step)
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    return SincRule(weights=(2 * step / math.pi) * np.exp(k * step), taus=np.exp(-2 * k * step),
                    step=step)


RULES = {"elliptic": elliptic_rule, "sinc": sinc_rule}


def quadrature_rule(
    rule: str, lambda_min: float, lambda_max: float, tol: float
) -> QuadratureRule | SincRule:
    """The rule named ``rule`` (``"elliptic"`` or ``"sinc"``) on the interval, to ``tol``.

    Both carry ``weights`` and ``taus`` (largest ``τ`` first); assumed valid input.
    """
    return RULES[rule](lambda_min, lambda_max, tol)


def inverse_sqrt_rational(lam: jax.Array, weights: jax.Array, taus: jax.Array) -> jax.Array:
    """The rational approximation ``r(λ) = Σ_k w_k τ_k / (1 + τ_k λ) ≈ λ^{-1/2}``.

    Evaluated in this form (no subtraction), it is accurate to rounding at every ``τ_k``.

    Args:
        lam: ``(...)`` positive values.
        weights: ``(q,)`` quadrature weights (e.g. ``QuadratureRule.weights``).
        taus: ``(q,)`` noise levels.

    Returns:
        ``(...)`` array of ``r(lam)`` in ``lam``'s dtype.

    Example:
        >>> rule = sinc_rule(1.0, 100.0, 1e-4)
        >>> r = inverse_sqrt_rational(jnp.array([4.0]), rule.weights, rule.taus)
        >>> bool(jnp.abs(r[0] - 0.5) < 1e-4)
        True
    """
    lam = jnp.asarray(lam)
    shape = (1,) * lam.ndim + (-1,)
    weights = jnp.asarray(weights, lam.dtype).reshape(shape)
    taus = jnp.asarray(taus, lam.dtype).reshape(shape)
    return jnp.sum(weights * taus / (1 + taus * lam[..., None]), axis=-1)


def resolvent(
    smoothed_score_fn: Callable[[jax.Array, jax.Array], jax.Array],
    z: jax.Array,
    tau: jax.Array,
    center: jax.Array,
    center_score: jax.Array | None = None,
    *,
    has_aux: bool = False,
):
    """The resolvent ``R_τ z = (Λ + τ^{-1} I)^{-1} z`` from one smoothed-score query.

    For ``π = N(m, Λ^{-1})`` the smoothed score is ``s_τ(x) = −(Σ + τI)^{-1}(x − m)`` and
    ``(Σ + τI)^{-1} = τ^{-1} I − τ^{-2} R_τ``, hence for any centre ``c``::

        R_τ z = τ z + τ² [s_τ(c + z) − s_τ(c)]

    With ``c = m`` the second term is ``s_τ(m) = 0`` (pass ``center_score=None``): one query. Else
    ``s_τ(c)`` is one more query, shared by every ``z`` at this ``τ``. The two terms cancel at large
    ``τ``: the absolute round-off is about ``u τ ‖z‖`` (``u`` the unit round-off) while
    ``‖R_τ z‖ ≤ ‖z‖/λ_min``; :func:`jaxsample.gaussian.sample` turns that into a tolerance floor.

    Args:
        smoothed_score_fn: ``s(x, tau) -> (d,)`` for a point ``x`` of shape ``(d,)`` and a scalar
            noise level ``tau`` of ``x``'s dtype.
        z: ``(d,)`` direction.
        tau: scalar noise level ``τ > 0``.
        center: ``(d,)`` base point ``c`` (the mean when it is known).
        center_score: ``(d,)`` answer ``s_τ(c)``, or ``None`` when ``c`` is the mean.
        has_aux: ``smoothed_score_fn`` returns ``(score, aux)`` (e.g. an inner solver's
            statistics); ``aux`` is passed through, as in ``jax.grad(..., has_aux=True)``.

    Returns:
        ``(d,)`` array ``R_τ z`` in ``z``'s dtype, or ``(R_τ z, aux)`` with ``has_aux``.

    Example:
        >>> lam = jnp.array([1.0, 4.0])
        >>> score = lambda x, tau: -(lam / (1 + tau * lam)) * x       # N(0, diag(1/lam))
        >>> r = resolvent(score, jnp.ones(2), jnp.float32(0.5), jnp.zeros(2))
        >>> bool(jnp.allclose(r, 1 / (lam + 2.0)))
        True
    """
    with jax.named_scope("resolvent"):
        tau = jnp.asarray(tau, z.dtype)
        out = smoothed_score_fn(center + z, tau)
        score, aux = out if has_aux else (out, None)
        if center_score is not None:
            score = score - center_score
        value = tau * z + tau**2 * score
    return (value, aux) if has_aux else value


def dithered_quantize(
    key: jax.Array, v: jax.Array, bound: jax.Array, bits: int
) -> tuple[jax.Array, jax.Array]:
    """A ``bits``-bit uniform quantiser on ``[−bound, bound]`` with subtractive dither.

    With step ``Δ = bound / (2^{b−1} − 1)`` and shared dither ``D ~ U[−Δ/2, Δ/2]`` (one per
    coordinate), the sender transmits the integer codes ``n = round((v + D)/Δ)``, which fit in ``b``
    bits (``|n| ≤ 2^{b−1} − 1``) whenever ``|v| ≤ bound``; the receiver forms ``n Δ − D = v + e``.
    By Schuchman's condition ``e ~ U[−Δ/2, Δ/2]`` independently of ``v``: mean 0, variance
    ``Δ²/12``. Values beyond ``bound`` are clipped, which breaks that property; callers pick
    ``bound`` so that it cannot happen.

    Args:
        key: PRNG key for the dither.
        v: ``(...)`` values to quantise.
        bound: scalar or array broadcastable against ``v`` (same rank), ``> 0``.
        bits: bits per coordinate, a Python int in ``[2, 31]`` (assumed valid).

    Returns:
        ``(reconstruction, codes)``: ``v + e`` in ``v``'s dtype, and the int32 codes sent.

    Example:
        >>> v = jnp.linspace(-1.0, 1.0, 5)
        >>> v_hat, codes = dithered_quantize(jax.random.key(0), v, jnp.float32(1.0), bits=8)
        >>> bool(jnp.max(jnp.abs(v_hat - v)) <= 0.5 / 127 + 1e-6)
        True
        >>> int(jnp.max(jnp.abs(codes))) <= 127
        True
    """
    max_code = 2 ** (bits - 1) - 1
    with jax.named_scope("dithered_quantize"):
        step = jnp.asarray(bound, v.dtype) / max_code
        dither = (jax.random.uniform(key, v.shape, v.dtype) - 0.5) * step
        safe_step = jnp.where(step > 0, step, 1)  # a zero bound means v = 0: send code 0
        codes = jnp.clip(jnp.round((v + dither) / safe_step), -max_code, max_code)
        return codes * step - dither, codes.astype(jnp.int32)


def _chebyshev_points(lam_min, lam_max, num_points):
    """Chebyshev points of the first kind mapped to ``[lam_min, lam_max]``."""
    theta = math.pi * (np.arange(num_points) + 0.5) / num_points
    return 0.5 * (lam_max + lam_min) + 0.5 * (lam_max - lam_min) * np.cos(theta)


def _chebyshev_values(coefficients, num_points):
    """Values of ``Σ_j c_j T_j`` at ``num_points`` Chebyshev points of the first kind (DCT-III)."""
    padded = np.zeros(num_points)
    padded[: coefficients.size] = coefficients
    padded[1:] *= 0.5
    return scipy.fft.dct(padded, type=3)


def chebyshev_inverse_sqrt(lambda_min: float, lambda_max: float, tol: float) -> np.ndarray:
    """Chebyshev coefficients of the lowest degree ``n`` with ``max |p_n(λ) √λ − 1| ≤ tol``.

    ``λ^{-1/2}`` on ``[λ_min, λ_max]`` is interpolated at Chebyshev points (DCT-II); its
    coefficients decay like ``ρ^{-j}``, ``ρ = (√κ + 1)/(√κ − 1)``, so ``n ≈ (√κ/2) log(1/tol)``: the
    ``√κ`` barrier of methods that see only products ``Λ v``. The degree is the smallest whose
    truncated series meets ``tol`` on an 8× oversampled Chebyshev grid (bisection; each check is one
    FFT), so the baseline is charged no more products than it needs. Host-side NumPy/SciPy;
    memory grows with the degree (about 4.6 GB at ``κ = 1e10``, ``tol = 1e-6``, degree 622 932).
    The search starts from the a-priori degree ``log(16√κ/ε)/log ρ`` and doubles it at most
    twice: a ``tol`` that the float64 evaluation of the series cannot confirm (its round-off
    grows like ``u √κ``) raises instead of doubling without bound.

    Args:
        lambda_min, lambda_max: spectral bounds, ``0 < lambda_min <= lambda_max``.
        tol: relative tolerance in ``(0, 1)``.

    Returns:
        ``(n + 1,)`` float64 coefficients ``c_0 … c_n`` in the variable
        ``x = (2λ − λ_max − λ_min)/(λ_max − λ_min)``; applying them costs ``n`` products.

    Raises:
        ValueError: ``tol`` cannot be confirmed in float64 (e.g. ``κ = 1e8``, ``tol = 1e-10``).

    Example:
        >>> len(chebyshev_inverse_sqrt(1.0, 100.0, 1e-6)) - 1     # degree
        61
    """
    lam_min, lam_max, eps = float(lambda_min), float(lambda_max), float(tol)
    if lam_max == lam_min:
        return np.array([lam_min**-0.5])
    rho = (math.sqrt(lam_max / lam_min) + 1) / (math.sqrt(lam_max / lam_min) - 1)
    num_points = 2 * math.ceil(math.log(16 * math.sqrt(lam_max / lam_min) / eps) / math.log(rho))
    num_points = max(num_points, 16)

    def max_error(coefficients):
        lam = _chebyshev_points(lam_min, lam_max, 8 * coefficients.size)
        return np.max(np.abs(_chebyshev_values(coefficients, lam.size) * np.sqrt(lam) - 1))

    for doubling in range(3):
        lam = _chebyshev_points(lam_min, lam_max, num_points)
        coefficients = scipy.fft.dct(lam**-0.5, type=2) / num_points
        coefficients[0] *= 0.5
        error = max_error(coefficients[: num_points // 2])
        if error <= eps:
            break
        if doubling == 2:
            raise ValueError(
                f"tol = {eps:g} cannot be confirmed for a float64 Chebyshev series of "
                f"lambda^(-1/2) on [{lam_min:g}, {lam_max:g}]: best {error:.2g} at degree "
                f"{num_points // 2 - 1}"
            )
        num_points *= 2
    lo, hi = 0, num_points // 2 - 1  # degree hi meets tol
    while lo < hi:
        mid = (lo + hi) // 2
        if max_error(coefficients[: mid + 1]) <= eps:
            hi = mid
        else:
            lo = mid + 1
    return coefficients[: hi + 1]


def chebyshev_apply(
    matvec: Callable[[jax.Array], jax.Array],
    z: jax.Array,
    coefficients: jax.Array,
    lambda_min: float,
    lambda_max: float,
) -> jax.Array:
    """``p_n(Λ) z = Σ_j c_j T_j(A) z`` with ``A = (2Λ − (λ_max + λ_min) I)/(λ_max − λ_min)``.

    The three-term recurrence ``T_{j+1}(A) z = 2A T_j(A) z − T_{j−1}(A) z`` runs in a
    ``lax.scan``; it costs ``n = len(coefficients) − 1`` products ``Λ v`` and is stable because
    ``‖T_j(A)‖ ≤ 1`` on the spectrum.

    Args:
        matvec: ``v -> Λ v`` for ``v`` of shape ``(d,)``.
        z: ``(d,)`` vector.
        coefficients: ``(n + 1,)`` Chebyshev coefficients (from :func:`chebyshev_inverse_sqrt`).
        lambda_min, lambda_max: the interval the coefficients were built on (Python floats).

    Returns:
        ``(d,)`` array ``p_n(Λ) z`` in ``z``'s dtype.

    Example:
        >>> lam = jnp.array([1.0, 9.0])
        >>> c = jnp.asarray(chebyshev_inverse_sqrt(1.0, 9.0, 1e-5), jnp.float32)
        >>> y = chebyshev_apply(lambda v: lam * v, jnp.ones(2), c, 1.0, 9.0)
        >>> bool(jnp.allclose(y, jnp.array([1.0, 1 / 3]), rtol=1e-4))
        True
    """
    with jax.named_scope("chebyshev_apply"):
        coefficients = jnp.asarray(coefficients, z.dtype)
        if coefficients.shape[0] == 1:
            return coefficients[0] * z
        center = 0.5 * (lambda_max + lambda_min)
        half_width = 0.5 * (lambda_max - lambda_min)

        def shifted(v):
            return (matvec(v) - center * v) / half_width

        t_prev, t_curr = z, shifted(z)
        acc = coefficients[0] * t_prev + coefficients[1] * t_curr

        def body(carry, c):
            t_prev, t_curr, acc = carry
            t_next = 2 * shifted(t_curr) - t_prev
            return (t_curr, t_next, acc + c * t_next), None

        (_, _, acc), _ = jax.lax.scan(body, (t_prev, t_curr, acc), coefficients[2:])
        return acc


def lanczos_inverse_sqrt(
    matvec: Callable[[jax.Array], jax.Array], z: jax.Array, num_steps: int
) -> jax.Array:
    """Krylov approximation ``Λ^{-1/2} z ≈ ‖z‖ V_n T_n^{-1/2} e_1`` (Chow & Saad 2014).

    ``n`` Lanczos steps with full re-orthogonalisation (classical Gram–Schmidt, twice) build the
    orthonormal basis ``V_n`` of the Krylov space ``K_n(Λ, z)`` and the tridiagonal
    ``T_n = V_nᵀ Λ V_n``; ``T_n^{-1/2} e_1`` comes from its eigendecomposition. On breakdown (the
    Krylov space is invariant, e.g. ``n`` ≥ the number of distinct eigenvalues) the remaining steps
    are padded with an identity block that does not touch ``e_1``, so the answer is exact. Costs
    ``n`` products ``Λ v`` and ``O(n² d)`` flops; use float64 (this is the reference Krylov method).

    Args:
        matvec: ``v -> Λ v`` for ``v`` of shape ``(d,)``.
        z: ``(d,)`` nonzero vector.
        num_steps: number of Lanczos steps ``n``, a Python int in ``[1, d]`` (assumed valid).

    Returns:
        ``(d,)`` array in ``z``'s dtype.

    Example:
        >>> lam = jnp.array([1.0, 4.0, 16.0])
        >>> y = lanczos_inverse_sqrt(lambda v: lam * v, jnp.ones(3), num_steps=3)
        >>> bool(jnp.allclose(y, lam**-0.5, rtol=1e-4))
        True
    """
    with jax.named_scope("lanczos_inverse_sqrt"):
        dim = z.shape[0]
        dtype = z.dtype
        z_norm = jnp.linalg.norm(z)
        breakdown = dim * jnp.finfo(dtype).eps

        def body(j, carry):
            basis, alphas, betas, v, v_prev, beta_prev, active, scale = carry
            basis = basis.at[j].set(v)
            w = matvec(v)
            alpha = jnp.vdot(v, w)
            w = w - alpha * v - beta_prev * v_prev
            for _ in range(2):  # full re-orthogonalisation against every stored vector
                w = w - basis.T @ (basis @ w)
            beta = jnp.linalg.norm(w)
            scale = jnp.maximum(scale, jnp.abs(alpha) + beta)
            keep = active & (beta > breakdown * scale)
            alphas = alphas.at[j].set(jnp.where(active, alpha, 1))
            betas = betas.at[j].set(jnp.where(keep, beta, 0))
            v_next = jnp.where(keep, w / jnp.where(keep, beta, 1), 0)
            return basis, alphas, betas, v_next, v, jnp.where(keep, beta, 0), keep, scale

        zero = jnp.zeros((), dtype)
        init = (
            jnp.zeros((num_steps, dim), dtype),
            jnp.zeros(num_steps, dtype),
            jnp.zeros(num_steps, dtype),
            z / z_norm,
            jnp.zeros_like(z),
            zero,
            jnp.array(True),
            zero,
        )
        basis, alphas, betas, *_ = jax.lax.fori_loop(0, num_steps, body, init)
        off_diagonal = betas[:-1]
        tridiagonal = jnp.diag(alphas) + jnp.diag(off_diagonal, 1) + jnp.diag(off_diagonal, -1)
        eigenvalues, eigenvectors = jnp.linalg.eigh(tridiagonal)
        coefficients = eigenvectors @ (eigenvectors[0] / jnp.sqrt(eigenvalues))
        return z_norm * (basis.T @ coefficients)
