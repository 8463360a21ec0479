"""Closed-form maximisers on the unit sphere: linear-plus-norm (UCB) and linear over a cap.

* :func:`solve_secular`: the root :math:`s \\ge 0` of the secular equation
  :math:`\\sum_i b_i^2/(s + d_i)^2 = 1` (``d ≥ 0``), by bracketed Newton with bisection
  safeguard in one ``lax.while_loop`` (fixed iteration cap, so it ``jit``\\ s and ``vmap``\\ s);
* :func:`ucb_argmax`: :math:`\\max_{\\|u\\|=1} μ^\\top u + β\\sqrt{u^\\top Σ u}` through that
  equation;
* :func:`cap_argmax`: :math:`\\max a^\\top u` over the spherical cap
  :math:`\\{u : ∠(u, u_0) ≤ ρ\\}`.

**UCB on the sphere.** Since :math:`\\sqrt{u^\\top Σ u} = \\max_{\\|v\\| ≤ 1} v^\\top Σ^{1/2} u`,

.. math::

    \\max_{\\|u\\|=1} μ^\\top u + β\\sqrt{u^\\top Σ u}
    = \\max_{\\|v\\| ≤ 1} \\|μ + βΣ^{1/2} v\\|,

the maximisation of a convex function over the ball: a trust-region subproblem. With
:math:`Σ = Q\\,\\mathrm{diag}(λ)\\,Q^\\top`, :math:`\\tilde μ = Q^\\top μ`,
:math:`m_i = β\\sqrt{λ_i}` and :math:`b_i = m_i \\tilde μ_i`,
its optimum has :math:`v_i = b_i/(ν − m_i^2)` with
:math:`ν ≥ \\max_i m_i^2` and :math:`\\|v\\| = 1`: writing :math:`s = ν − m_{\\max}^2`,
:math:`d_i = m_{\\max}^2 − m_i^2 ≥ 0`, the secular equation above. Its left side decreases
strictly in s, and the root lies in :math:`[0, \\|b\\|]` (at :math:`s = \\|b\\|` every term is at
most :math:`b_i^2/\\|b\\|^2`). Then :math:`z = \\tilde μ + m ⊙ v`, the maximiser is
:math:`u^* = Qz/\\|z\\|` and the maximum is :math:`\\|z\\|`.

**The hard case.** When b has no weight on the top eigenspace (:math:`d_i = 0`) and
:math:`\\sum_{d_i > 0} b_i^2/d_i^2 < 1`, the root is s = 0 and v takes the remaining norm
:math:`τ = (1 − \\|v\\|^2)^{1/2}` along a top eigenvector. This is the common case of Bayesian
linear regression with fewer observations than dimensions: every unobserved direction keeps the
prior variance (the top eigenvalue, many times repeated) and the posterior mean has no component
there. Eigenvalues within ``16·√D·eps·λ_max`` of the top are treated as top (``eigh``'s own
error), and a top weight ``‖b_top‖`` below ``16·√D·eps·‖b‖`` as zero (the round-off of
:math:`Q^\\top μ`); either misclassification changes the maximum by a round-off amount.

**The solver.** Newton on :math:`ψ(s) = g(s)^{-1/2} − 1` with :math:`g(s) = \\sum b_i^2/(s+d_i)^2`
(increasing in s and nearly linear, the Moré–Sorensen choice) from s = ‖b‖, keeping the bracket
:math:`[lo, hi]` with ψ(lo) < 0 ≤ ψ(hi) and bisecting whenever a Newton step leaves it; it stops
when :math:`|ψ| ≤` ``tolerance`` or the bracket is ``tolerance`` of its upper end wide. It is
written here because optimistix's Newton root finder has no bracket (it can step to s < 0, where
the equation has spurious roots) and its bisection alone takes ~50 steps in float64.

**Cap argmax** (TuRBO-style trust region on the sphere): if :math:`∠(u_0, a) ≤ ρ` the
unconstrained maximiser :math:`a/\\|a\\|` lies in the cap; otherwise the maximiser is on its
boundary, :math:`u^* = \\cos ρ\\,u_0 + \\sin ρ\\,\\hat t` with
:math:`\\hat t = P_{u_0} a/\\|P_{u_0} a\\|` (rotate u₀ towards a by ρ);
if a is antiparallel to u₀ every boundary point is optimal and one is
returned.

The kernels are ``jax.jit``-compiled (inlined inside another transformation). They assume
valid input (unit ``center``, symmetric PSD ``Σ`` given by its ``eigh``, β ≥ 0,
0 ≤ ρ ≤ π): the public entry points check it. All preserve the input dtype.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels import sphere
from jaxsample.kernels.solver import SolverStats

__all__ = ["SecularInfo", "cap_argmax", "solve_secular", "ucb_argmax"]


class SecularInfo(NamedTuple):
    """Diagnostics of one secular-equation solve.

    Attributes:
        solver: :class:`~jaxsample.kernels.solver.SolverStats`: the Newton/bisection
            iterations taken (0 in the hard case) and ``RESULTS.successful`` where the stopping
            rule was met within ``max_iterations`` (always in the hard case),
            ``max_iterations_reached`` where it was not, ``nonfinite`` where a non-finite value
            met the solve.
        hard_case: the root is s = 0 with the norm completed along a top eigenvector.
        nonfinite: a non-finite value met the solve.
    """

    solver: SolverStats
    hard_case: jax.Array
    nonfinite: jax.Array


def _safe_div(a, b):
    positive = b > 0
    return jnp.where(positive, a / jnp.where(positive, b, 1), 0)


@functools.partial(jax.jit, static_argnames=("max_iterations", "tolerance"))
def solve_secular(b: jax.Array, d: jax.Array, *, max_iterations: int = 64,
                  tolerance: float | None = None) -> tuple[jax.Array, SecularInfo]:
    """Root ``s ≥ 0`` of :math:`\\sum_i b_i^2/(s + d_i)^2 = 1`.

    Args:
        b: ``(n,)`` weights.
        d: ``(n,)`` shifts, ``d ≥ 0``; components with ``d_i = 0`` and ``b_i = 0`` are the top
            eigenspace of a hard case.
        max_iterations: cap on the Newton/bisection iterations.
        tolerance: relative stopping tolerance (default ``4·eps`` of the dtype).

    Returns:
        ``(s, info)``; ``s = 0`` with ``info.hard_case`` when the sum at ``s = 0`` (terms with
        ``d_i = 0`` dropped) is at most one and no top component carries weight.

    Example:
        >>> import jax.numpy as jnp
        >>> s, info = solve_secular(jnp.array([3.0, 4.0]), jnp.array([0.0, 0.0]))
        >>> round(float(s), 5), bool(info.solver.converged)
        (5.0, True)
    """
    with jax.named_scope("solve_secular"):
        dtype = b.dtype
        tol = jnp.asarray(4 * jnp.finfo(dtype).eps if tolerance is None else tolerance, dtype)
        b2 = b * b
        top = d <= 0
        hard = ~jnp.any(top & (b2 > 0)) & (jnp.sum(_safe_div(b2, d * d)) <= 1)

        def g_and_slope(s):
            shifted = s + d
            g = jnp.sum(_safe_div(b2, shifted**2))
            slope = jnp.sum(_safe_div(b2, shifted**3))  # -g'/2
            return g, slope

        def psi(s):
            g, slope = g_and_slope(s)
            root_g = jnp.sqrt(g)
            return 1 / root_g - 1, slope / (g * root_g)  # psi and psi' (> 0)

        hi0 = jnp.sqrt(jnp.sum(b2))

        def cond(carry):
            s, slope, lo, hi, value, it = carry
            done = (jnp.abs(value) <= tol) | (hi - lo <= tol * hi)
            return (it < max_iterations) & ~done

        def body(carry):
            s, slope, lo, hi, value, it = carry
            newton = s - value / slope
            inside = (newton > lo) & (newton < hi) & jnp.isfinite(newton)
            s = jnp.where(inside, newton, (lo + hi) / 2)
            value, slope = psi(s)
            lo = jnp.where(value < 0, s, lo)
            hi = jnp.where(value >= 0, s, hi)
            return s, slope, lo, hi, value, it + 1

        zero = jnp.zeros((), dtype)
        safe_hi = jnp.where(hi0 > 0, hi0, 1)
        value0, slope0 = psi(safe_hi)  # ψ(‖b‖) ≥ 0: the bracket is [0, ‖b‖]
        start = (safe_hi, slope0, zero, safe_hi, value0, jnp.zeros((), jnp.int32))
        # the hard case (and b = 0) skips the loop: its root is s = 0
        s, _, lo, hi, value, it = jax.lax.cond(
            hard | (hi0 <= 0), lambda c: (zero, zero, zero, zero, zero, c[5]),
            lambda c: jax.lax.while_loop(cond, body, c), start)
        converged = hard | (hi0 <= 0) | (jnp.abs(value) <= tol) | (hi - lo <= tol * hi)
        nonfinite = ~(jnp.all(jnp.isfinite(b)) & jnp.all(jnp.isfinite(d)) & jnp.isfinite(s))
        return s, SecularInfo(SolverStats.of(it, converged=converged, nonfinite=nonfinite), hard,
                              nonfinite)


@functools.partial(jax.jit, static_argnames=("max_iterations",))
def ucb_argmax(mean: jax.Array, eigenvalues: jax.Array, eigenvectors: jax.Array, beta,
               *, max_iterations: int = 64) -> tuple[jax.Array, jax.Array, SecularInfo]:
    """:math:`\\arg\\max_{\\|u\\|=1} μ^\\top u + β\\sqrt{u^\\top Σ u}` (module docstring).

    Args:
        mean: ``(D,)`` μ.
        eigenvalues: ``(D,)`` eigenvalues of Σ (any order, ≥ 0).
        eigenvectors: ``(D, D)`` the matching eigenvectors as columns (``jnp.linalg.eigh``).
        beta: β ≥ 0.
        max_iterations: cap of the secular solve.

    Returns:
        ``(u, value, info)``: the maximiser (unit), the maximum ``‖z‖``, the solve's
        :class:`SecularInfo`.

    Example:
        >>> import jax.numpy as jnp
        >>> lam, q = jnp.linalg.eigh(jnp.diag(jnp.array([1.0, 4.0])))
        >>> u, value, _ = ucb_argmax(jnp.array([0.0, 0.0]), lam, q, 1.0)
        >>> [round(abs(float(c)), 4) for c in u], round(float(value), 4)
        ([0.0, 1.0], 2.0)
    """
    with jax.named_scope("ucb_argmax"):
        dtype = mean.dtype
        dim = mean.shape[-1]
        beta = jnp.asarray(beta, dtype)
        lam = jnp.maximum(eigenvalues, 0)
        lam_max = jnp.max(lam)
        eps = jnp.finfo(dtype).eps
        slack = 16 * jnp.sqrt(jnp.asarray(dim, dtype)) * eps
        top = lam >= lam_max * (1 - slack)
        m2 = beta**2 * jnp.where(top, lam_max, lam)
        m = jnp.sqrt(m2)
        mu_t = eigenvectors.T @ mean
        b = m * mu_t
        b_top = jnp.sqrt(jnp.sum(jnp.where(top, b * b, 0)))
        b = jnp.where(top & (b_top <= slack * jnp.linalg.norm(b)), 0, b)
        d = jnp.where(top, 0, beta**2 * lam_max - m2)
        s, info = solve_secular(b, d, max_iterations=max_iterations)
        v = _safe_div(b, s + d)
        gap = jnp.maximum(1 - jnp.sum(v * v), 0)
        # complete the norm along one top eigenvector (the hard case; round-off otherwise)
        first_top = jnp.argmax(top)
        fill = jnp.where(mu_t[first_top] < 0, -1, 1) * jnp.sqrt(gap)
        v = v.at[first_top].add(jnp.where(info.hard_case | (s <= 0), fill, 0))
        z = mu_t + m * v
        value = jnp.linalg.norm(z)
        u = eigenvectors @ z
        norm = jnp.linalg.norm(u)
        # z = 0 only when μ = 0 and β = 0: every u is optimal, return the top eigenvector
        u = jnp.where(norm > 0, u / jnp.where(norm > 0, norm, 1), eigenvectors[:, first_top])
        return u, value, info


@jax.jit
def cap_argmax(a: jax.Array, center: jax.Array, angle) -> jax.Array:
    """:math:`\\arg\\max a^\\top u` over the cap :math:`\\{u ∈ S^{D−1} : ∠(u, u_0) ≤ ρ\\}`.

    Args:
        a: ``(..., D)`` linear objectives (non-zero).
        center: ``(..., D)`` cap centres u₀ (unit), broadcast against ``a``.
        angle: cap half-angle ρ in radians, ``0 ≤ ρ ≤ π`` (broadcast over the leading axes).

    Example:
        >>> import jax.numpy as jnp
        >>> u = cap_argmax(jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0]), jnp.pi / 4)
        >>> [round(float(c), 4) for c in u]
        [0.7071, 0.7071]
    """
    with jax.named_scope("cap_argmax"):
        center = jnp.broadcast_to(center, a.shape)
        angle = jnp.broadcast_to(jnp.asarray(angle, a.dtype), a.shape[:-1])[..., None]
        free = sphere.retract(a)
        inside = jnp.sum(free * center, axis=-1, keepdims=True) >= jnp.cos(angle)
        tangent = sphere.tangent_project(center, a)
        norm = jnp.linalg.norm(tangent, axis=-1, keepdims=True)
        # a antiparallel to u0: any tangent direction; take the one the smallest |u0_i| picks
        axis = jax.nn.one_hot(jnp.argmin(jnp.abs(center), axis=-1), a.shape[-1], dtype=a.dtype)
        fallback = sphere.retract(sphere.tangent_project(center, axis))
        # below round-off of ‖a‖ the projection has lost its tangency: treat as antiparallel
        small = 16 * jnp.finfo(a.dtype).eps * jnp.linalg.norm(a, axis=-1, keepdims=True)
        direction = jnp.where(norm > small, tangent / jnp.where(norm > small, norm, 1), fallback)
        boundary = jnp.cos(angle) * center + jnp.sin(angle) * direction
        return jnp.where(inside, free, boundary)
