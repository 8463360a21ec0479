"""Gaussian sampling from smoothed-score queries in ``O(log κ)`` queries per sample.

Target ``π = N(m, Σ)`` with precision ``Λ = Σ^{-1}``, spectrum in ``[λ_min, λ_max]``,
``κ = λ_max/λ_min``. A method that sees only gradients ``∇log π(x) = −Λ(x − m)`` applies
polynomials in ``Λ`` and pays about ``√κ`` queries (:mod:`jaxsample.gaussian.baselines`). A method
that may query *smoothed* scores ``s_τ(x) = ∇log(π ∗ N(0, τI))(x) = −(Σ + τI)^{-1}(x − m)``
obtains one resolvent ``(Λ + τ^{-1}I)^{-1}z`` per query, and a rational quadrature of
``Λ^{-1/2}`` over the noise levels ``τ`` needs only ``O(log κ · log 1/ε)`` of them (J. Liu,
*Smoothed Score Queries and the Complexity of Sampling*, arXiv:2605.27769, 2026). The default
quadrature is the Hale–Higham–Trefethen elliptic rule (3–5× fewer levels than the paper's sinc
rule, and no ``1/ε`` in its round-off floor); the sinc rule is kept as ``rule="sinc"``.

- :func:`sample`: the smoothed-score sampler ``x = m + Σ_k w_k R_{τ_k} z`` (optionally with
  ``b``-bit dithered answers); :func:`transform_noise` is the same map applied to given noise.
- :class:`SmoothedScoreOracle`: ``s_τ`` for a dense or matrix-free precision, in forms that keep
  the resolvent accurate; the matrix-free one solves with lineax's conjugate gradients and reports
  the solver's iterations and convergence (:class:`~jaxsample.SolverStats`), which
  :class:`GaussianInfo` carries.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np

from jaxsample._checks import check_choice, check_int, check_key, check_number, is_concrete
from jaxsample._solver import from_lineax, warn_if_unsuccessful
from jaxsample.gaussian._common import (
    GaussianInfo,
    check_mean,
    check_noise,
    check_oracle,
    check_precision,
    check_spectrum,
    float_bits,
    make_info,
    no_solve,
    warn_if_nonfinite,
)
from jaxsample.kernels.resolvent import RULES, dithered_quantize, quadrature_rule, resolvent
from jaxsample.kernels.solver import batched, sequential

__all__ = [
    "GaussianInfo",
    "SmoothedScoreOracle",
    "sample",
    "transform_noise",
]


# ----------------------------------------------------------------------------------------------
# oracles


def _two_norm(x):
    return jnp.linalg.norm(x)


class SmoothedScoreOracle(eqx.Module):
    """The smoothed score ``s_τ(x) = −(Σ + τI)^{-1}(x − m)`` of ``N(m, Λ^{-1})``, evaluated stably.

    ``τ = 0`` gives the plain score ``−Λ(x − m)``, also available as ``oracle.score(x)`` for the
    gradient-only baselines. The forms used here keep what the sampler needs accurate: it forms
    ``R_τ z = τ z + τ² s_τ(m + z)``, which loses the factor ``τλ`` that ``τ² s_τ ≈ τ z`` cancels,
    so ``τ² s_τ`` must be accurate to round-off *relative to* ``τ z``. With ``v = x − m``:

    - dense ``Λ = Q diag(λ) Qᵀ`` (one ``eigh`` at construction), ``f(λ) = λ/(1 + τλ)``:
      ``s_τ(x) = −[f(λ_min) v + Q diag(f(λ) − f(λ_min)) Qᵀ v]`` — two terms of one sign, and at
      large ``τ`` the bulk ``≈ v/τ`` never goes through ``Q(·)Qᵀ`` (which would add ``√d``-sized
      round-off); it is ``−(v − Q diag(1/(1 + τλ)) Qᵀ v)/τ`` regrouped, accurate at every
      ``τ ≥ 0``;
    - matrix-free (``precision`` a function ``v -> Λ v``): ``s_τ(x) = −(v − w)/τ`` with
      ``(I + τΛ) w = v`` solved by conjugate gradients (``lineax.CG``, a positive-definite
      operator), and ``−Λ v`` at ``τ = 0``. The resolvent is then ``τ w``, as accurate as the solve:
      its relative residual ``tolerance`` enters the sample's whitened error as about
      ``tolerance · log κ``. For ``τλ ≪ 1`` the subtraction costs ``s_τ`` itself relative accuracy
      (``≈ tolerance/(τλ)``), which the sampler does not see. CG on ``I + τΛ`` takes up to
      ``≈ ½√κ log(2/tolerance)`` iterations per query at large ``τ``: the smoothed-score model
      counts queries, ``info.solver.num_iterations`` counts this work. A product ``Λ v`` rounded
      relative to ``‖Λ‖‖v‖`` limits any solve to about ``u κ`` relative accuracy in the
      ``λ_min`` directions.

    ``oracle.with_stats(x, tau)`` returns ``(s_τ(x), SolverStats)``: the CG iterations and whether
    CG met ``tolerance`` within ``max_iterations`` (zero iterations and ``True`` for the dense
    oracle). :func:`sample` collects them into :class:`GaussianInfo`; any oracle may offer this
    method. The oracle is an equinox Module (a pytree whose leaves are ``λ``, ``Q`` and ``m``),
    so the samplers compile once per shape, not once per precision (and per ``matvec``
    function for the matrix-free form).

    Args:
        precision: ``(d, d)`` symmetric positive-definite matrix, or a function ``v -> Λ v`` on
            ``(d,)`` vectors.
        mean: ``(d,)`` mean ``m``; its dtype is the oracle's.
        tolerance: matrix-free only: CG's relative residual tolerance
            ``‖r‖₂ ≤ tolerance · ‖x − m‖₂`` (default ``10 · eps`` of the dtype).
        max_iterations: matrix-free only: CG's iteration cap (default ``10 d``).

    Calling the oracle, ``oracle(x, tau) -> (d,)`` for ``x`` of shape ``(d,)`` and a scalar
    ``tau >= 0``, is the smoothed score; the class is its own constructor (a value, not a
    sampler), jaxsample's own packaging of the paper's oracle model.

    Raises:
        ValueError: non-square, non-symmetric or non-positive-definite ``precision``; shape
            mismatch with ``mean``; a ``matvec`` returning the wrong shape; bad ``tolerance`` or
            ``max_iterations``.
        TypeError: non-floating ``mean`` or a dtype mismatch.

    Example:
        >>> oracle = SmoothedScoreOracle(jnp.diag(jnp.array([1.0, 4.0])), jnp.zeros(2))
        >>> oracle(jnp.ones(2), 0.5)        # -(λ/(1 + τλ)) x
        Array([-0.6666667, -1.3333334], dtype=float32)
        >>> oracle.score(jnp.ones(2))
        Array([-1., -4.], dtype=float32)
    """

    mean: jax.Array
    eigenvalues: jax.Array | None
    eigenvectors: jax.Array | None
    matvec: Callable[[jax.Array], jax.Array] | None = eqx.field(static=True)
    tolerance: float | None = eqx.field(static=True)
    max_iterations: int | None = eqx.field(static=True)

    def __init__(self, precision: jax.Array | Callable[[jax.Array], jax.Array],
                 mean: jax.Array, *, tolerance: float | None = None,
                 max_iterations: int | None = None):
        mean = check_mean(mean)
        dim, dtype = mean.shape[0], mean.dtype
        self.mean = mean
        if callable(precision):
            check_oracle("precision (a matvec)", precision, dim, dtype, with_tau=False)
            tolerance = check_number("tolerance", tolerance, allow_none=True, maximum=1.0)
            max_iterations = check_int("max_iterations", max_iterations, 1, allow_none=True)
            self.matvec = precision
            self.tolerance = (10 * float(jnp.finfo(dtype).eps) if tolerance is None
                              else tolerance)
            self.max_iterations = 10 * dim if max_iterations is None else max_iterations
            self.eigenvalues = self.eigenvectors = None
            return
        precision = check_precision(precision, dim, dtype)
        eigenvalues, eigenvectors = jnp.linalg.eigh(precision)
        if is_concrete(eigenvalues) and float(eigenvalues[0]) <= 0:
            raise ValueError("precision must be positive definite, got smallest eigenvalue "
                             f"{float(eigenvalues[0])}")
        self.eigenvalues, self.eigenvectors = eigenvalues, eigenvectors
        self.matvec = self.tolerance = self.max_iterations = None

    def __call__(self, x, tau):
        return self.with_stats(x, tau)[0]

    def with_stats(self, x, tau):
        """``(s_τ(x), SolverStats)``: the score and the CG solve's iterations and convergence
        (zero iterations and ``successful`` for the dense form, which solves nothing)."""
        if self.matvec is None:
            return self._spectral(x, tau), no_solve()
        return self._conjugate_gradients(x, tau)

    def score(self, x):
        """The plain score ``∇log π(x) = −Λ(x − m)`` (``τ = 0``; one product, no solve)."""
        if self.matvec is None:
            return self._spectral(x, 0.0)
        return -self.matvec(x - self.mean)

    def _spectral(self, x, tau):
        """``s_τ(x) = −[f(λ_1) v + Q diag(f(λ) − f(λ_1)) Qᵀ v]``, ``f(λ) = λ/(1 + τλ)``.

        ``Λ = Q diag(λ) Qᵀ`` with ``λ_1 = λ_min`` first. Both terms have the sign of ``f > 0`` in
        every eigen-direction, so nothing cancels, and at large ``τ``, where ``f ≈ 1/τ`` for most
        ``λ``, the bulk ``f(λ_1) v`` never passes through ``Q(·)Qᵀ``: only the small excess
        ``f(λ) − f(λ_1) = (λ − λ_1)/((1 + τλ)(1 + τλ_1)) ≤ 1/(τ(1 + τλ_1))`` does. Regrouped,
        this is ``−(v − Q diag(1/(1 + τλ)) Qᵀ v)/τ``; unlike that form it stays accurate as
        ``τ → 0``.
        """
        with jax.named_scope("dense_smoothed_score"):
            tau = jnp.asarray(tau, self.mean.dtype)
            lam, lam_min = self.eigenvalues, self.eigenvalues[0]
            offset = x - self.mean
            bulk = lam_min / (1 + tau * lam_min)
            excess = (lam - lam_min) / (1 + tau * lam) / (1 + tau * lam_min)
            coordinates = self.eigenvectors.T @ offset
            return -(bulk * offset + self.eigenvectors @ (excess * coordinates))

    def _conjugate_gradients(self, x, tau):
        """``s_τ(x) = −(v − w)/τ`` with ``(I + τΛ) w = v = x − m`` by lineax's CG.

        The sampler forms ``R_τ z = τ z + τ² s_τ(m + z) = τ w`` (up to the rounding of ``v``):
        the solve's error enters the resolvent as ``τ (I + τΛ)^{-1} r``, never amplified by
        ``1 + τλ``, as it would be through ``(I + τΛ) y = Λ v``. At ``τ = 0`` it is the plain
        product ``−Λ v``.
        """
        with jax.named_scope("matrix_free_smoothed_score"):
            dtype = self.mean.dtype
            tau = jnp.asarray(tau, dtype)
            offset = x - self.mean

            def solve(offset):
                # Normalised right-hand side: CG stops at ‖r‖₂ ≤ tolerance·‖x − m‖₂ (lineax's
                # atol on a unit vector), SciPy's relative criterion, and x = m is no special case.
                norm = jnp.linalg.norm(offset)
                scale = jnp.where(norm > 0, norm, 1)
                operator = lx.FunctionLinearOperator(
                    lambda v: v + tau * self.matvec(v), jax.ShapeDtypeStruct(offset.shape, dtype),
                    tags=lx.positive_semidefinite_tag,
                )
                # stabilise_every=None keeps the recursive residual, which keeps decreasing where
                # a recomputed one stalls at round-off: the solve stops at ~round-off accuracy.
                solver = lx.CG(rtol=0.0, atol=self.tolerance, norm=_two_norm,
                               stabilise_every=None, max_steps=self.max_iterations)
                solution = lx.linear_solve(operator, offset / scale, solver, throw=False)
                stats = from_lineax(solution)
                safe_tau = jnp.where(tau > 0, tau, 1)
                return -(offset - solution.value * scale) / safe_tau, stats

            def product(offset):
                return -self.matvec(offset), no_solve()

            # τ is the same for every sample of a level, so under the sampler's vmap this stays a
            # branch: the product runs only at τ = 0
            return jax.lax.cond(tau > 0, solve, product, offset)


class _WithoutStats(eqx.Module):
    """A plain ``s(x, tau)`` seen through the ``with_stats`` protocol (it solves nothing)."""

    fn: Callable

    def __call__(self, x, tau):
        return self.fn(x, tau), no_solve()


def _with_stats(smoothed_score_fn):
    with_stats = getattr(smoothed_score_fn, "with_stats", None)
    return with_stats if callable(with_stats) else _WithoutStats(smoothed_score_fn)


# ----------------------------------------------------------------------------------------------
# the smoothed-score sampler


def _roundoff_floor(rule, lambda_max, dtype) -> float:
    """Predicted worst-case whitened error from round-off: ``u √λ_max Σ_k w_k τ_k``.

    Each level adds an absolute error of about ``u τ_k ‖z‖`` (the cancellation in
    ``τ z + τ² s_τ``), weighted by ``w_k``; in the worst direction the whitening ``Λ^{1/2}``
    multiplies it by ``√λ_max``. Sinc rule: ``w_k τ_k = (2h/π) √τ_k`` and
    ``√τ_max ≈ 2/(π ε √λ_min)``, so this is about ``u √κ / ε``. Elliptic rule:
    ``√λ_min Σ_j w_j τ_j = (2K/(πN)) Σ_j dn(v_j)/sn²(v_j)`` stays between 2.5 and 9 for
    ``ε ∈ [10⁻¹⁰, 10⁻³]`` and any ``κ`` (the largest ``τ`` is only ``≈ (2N/K)²/λ_min``), so the
    floor is ``≈ 5 u √κ`` with no ``1/ε``. Below it the tolerance cannot be met.
    """
    unit_roundoff = float(jnp.finfo(dtype).eps) / 2
    return unit_roundoff * math.sqrt(lambda_max) * float(np.sum(rule.weights * rule.taus))


def _resolvent_spread(rule, lambda_min) -> float:
    """``Σ_k (w_k τ_k/(1 + τ_k λ_min))²``: the squared weighted answer ranges per unit ``‖z‖²``.

    For the elliptic rule ``w_j τ_j/(1 + τ_j λ_min) = w_j/(μ_j + λ_min) = (2K/(πN)) dn(v_j)/√λ_min``
    exactly (``cn²(1 + sc²) = 1``), so the spread is ``(2K/(πN))² Σ_j dn²(v_j)/λ_min``
    ``≈ 4 K E(m)/(π² N λ_min) ≈ 4/(λ_min log(4/ε))``.
    """
    return float(np.sum((rule.weights * rule.taus / (1 + rule.taus * lambda_min)) ** 2))


def _auto_bits(rule, lambda_min, lambda_max, tol, dim) -> int:
    """Fewest bits per coordinate whose dither noise adds at most ``tol`` whitened covariance.

    The level-``k`` answer ``R_{τ_k} z = (Λ + μ_k)^{-1} z`` has ``‖·‖ ≤ B_k = ‖z‖/(μ_k + λ_min)``
    (``= τ_k ‖z‖/(1 + τ_k λ_min)``) whatever the rule; with ``N = 2^{b−1} − 1`` codes a side the
    noise variance per coordinate is ``Σ_k w_k² B_k² / (12 N²)``, of mean
    ``d · spread / (12 N²)`` (:func:`_resolvent_spread`); times ``λ_max`` it must stay below
    ``tol``. With the elliptic shifts that gives
    ``b ≈ 1 + ⌈½ log₂(κ d / (3 ε log(4/ε)))⌉``: ``b = O(log κ + log(d/ε))``, ``½ log₂ 10 ≈ 1.66``
    bits more per decade of ``κ``.
    """
    codes = math.sqrt(lambda_max * dim * _resolvent_spread(rule, lambda_min) / (12 * tol))
    return 1 + max(1, math.ceil(math.log2(codes + 1)))


@eqx.filter_jit
def _resolvent_transform(evaluate, z, dither_key, center, weights, taus, lambda_min, pre_tau,
                         bits, known_mean):
    with jax.named_scope("resolvent_transform"):
        z_norms = jnp.linalg.norm(z, axis=1, keepdims=True)
        stats = no_solve()
        if not known_mean:
            # One Tweedie step, x + τ s_τ(x) = m + (I + τΛ)^{-1}(x − m), at τ_pre ≥ 1/(u λ_min):
            # it contracts the distance to m to round-off before the first level. The step's
            # own error is relative to ‖x − m‖, not amplified by τ.
            center_score, stats = evaluate(center, pre_tau)
            center = center + pre_tau * center_score

        def level(carry, xs):
            base, acc, stats = carry
            weight, tau, level_key = xs
            if known_mean:
                base_score = None
            else:
                base_score, shared = evaluate(base, tau)
                stats = sequential(stats, shared)
            answers, solves = jax.vmap(
                lambda zi: resolvent(evaluate, zi, tau, base, base_score, has_aux=True))(z)
            # the batched solve runs until its slowest sample has converged
            stats = sequential(stats, batched(solves))
            if bits is not None:
                bound = tau / (1 + tau * lambda_min) * z_norms
                answers, _ = dithered_quantize(level_key, answers, bound, bits)
            if not known_mean:  # each level's shared query is a further Tweedie step towards m
                base = base + tau * base_score
            return (base, acc + weight * answers, stats), None

        level_keys = None if bits is None else jax.random.split(dither_key, taus.shape[0])
        (mean, acc, stats), _ = jax.lax.scan(
            level, (center, jnp.zeros_like(z), stats), (weights, taus, level_keys))
        return mean[None, :] + acc, stats


def _check_bits(bits):
    if bits is None or (isinstance(bits, str) and bits == "auto"):
        return bits
    if isinstance(bits, str):
        raise ValueError(f"bits must be None, 'auto' or a Python int in [2, 31], got {bits!r}")
    return check_int("bits", bits, 2, 31)


def transform_noise(
    key: jax.Array,
    smoothed_score_fn: Callable[[jax.Array, jax.Array], jax.Array],
    z: jax.Array,
    *,
    mean: jax.Array | None = None,
    lambda_min: float,
    lambda_max: float,
    tol: float,
    bits: int | str | None = None,
    rule: str = "elliptic",
) -> tuple[jax.Array, GaussianInfo]:
    """Maps standard normal noise ``z`` to samples ``x = m + S z``; :func:`sample` without the draw.

    Same method, arguments, accounting and checks as :func:`sample`, which is
    ``transform_noise(dither_key, fn, normal(noise_key, (num_samples, d)), ...)``. Without
    ``bits`` the map is linear in ``z`` with ``S = r(Λ)`` symmetric and the key is unused, so
    ``S`` can be read off unit vectors; use it for common random numbers or to test the method.

    Args:
        key: PRNG key for the dither of finite-bit answers (``bits``); unused otherwise, but
            required like every key (the one-shot shape: key first).
        smoothed_score_fn: as in :func:`sample`.
        z: ``(n, d)`` noise; it fixes ``d`` and the dtype.
        mean: ``(d,)`` mean, or ``None`` (estimated by Tweedie steps, see :func:`sample`).
        lambda_min, lambda_max, tol, bits, rule: as in :func:`sample`.

    Returns:
        ``(samples, info)`` with ``samples`` of shape ``(n, d)``.

    Example:
        >>> lam = jnp.array([1.0, 100.0])
        >>> score = SmoothedScoreOracle(jnp.diag(lam), jnp.zeros(2))
        >>> x, _ = transform_noise(jax.random.key(0), score, jnp.eye(2), mean=jnp.zeros(2),
        ...                        lambda_min=1.0, lambda_max=100.0, tol=1e-3)
        >>> bool(jnp.allclose(jnp.diag(x), lam**-0.5, rtol=2e-3))
        True
    """
    key = check_key("key", key)
    lambda_min, lambda_max, tol = check_spectrum(lambda_min, lambda_max, tol)
    z = check_noise(z)
    num_samples, dim = z.shape
    dtype = z.dtype
    known_mean = mean is not None
    if known_mean:
        mean = check_mean(mean)
        if mean.shape[0] != dim or mean.dtype != dtype:
            raise ValueError(
                f"mean ({mean.dtype}, shape {mean.shape}) must match z ({dtype}, d = {dim})"
            )
        center = mean
    else:
        center = jnp.zeros(dim, dtype)
    check_oracle("smoothed_score_fn", smoothed_score_fn, dim, dtype, with_tau=True)
    bits = _check_bits(bits)
    rule = check_choice("rule", rule, tuple(RULES))

    quadrature = quadrature_rule(rule, lambda_min, lambda_max, tol)
    num_levels = quadrature.taus.shape[0]
    floor = _roundoff_floor(quadrature, lambda_max, dtype)
    if floor > tol:
        growth = "about u*sqrt(kappa)/tol" if rule == "sinc" else "about 5*u*sqrt(kappa)"
        message = (
            f"tol = {tol:g} is below the {dtype} round-off floor {floor:.2g} of the {rule} rule "
            f"for kappa = {lambda_max / lambda_min:.3g} ({growth})"
        )
        if dtype != jnp.float64:
            raise ValueError(message + "; use float64 inputs (jax_enable_x64) or a larger tol")
        warnings.warn(message + "; the samples will be less accurate than tol", stacklevel=3)
    if bits == "auto":
        bits = _auto_bits(quadrature, lambda_min, lambda_max, tol, dim)

    pre_tau = max(quadrature.taus[0], 2 / (float(jnp.finfo(dtype).eps) * lambda_min))
    samples, stats = _resolvent_transform(
        _with_stats(smoothed_score_fn),
        z,
        key,
        center,
        jnp.asarray(quadrature.weights, dtype),
        jnp.asarray(quadrature.taus, dtype),
        jnp.asarray(lambda_min, dtype),
        jnp.asarray(pre_tau, dtype),
        bits,
        known_mean,
    )
    shared = 0 if known_mean else num_levels + 1
    answer_bits = float_bits(dtype) if bits is None else bits
    info = make_info(num_samples * num_levels + shared, num_levels, answer_bits, samples, stats)
    # eager calls say once what the Info flags (nothing under jit/vmap: read info.solver)
    warn_if_unsuccessful(info.solver, "the smoothed-score oracle's inner solve")
    warn_if_nonfinite(info.nonfinite, "the smoothed-score sampler")
    return samples, info


def sample(
    key: jax.Array,
    smoothed_score_fn: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    mean: jax.Array | None = None,
    dim: int | None = None,
    lambda_min: float,
    lambda_max: float,
    tol: float,
    num_samples: int,
    bits: int | str | None = None,
    rule: str = "elliptic",
) -> tuple[jax.Array, GaussianInfo]:
    """Draws ``N(m, Λ^{-1})`` samples from smoothed-score queries only, ``O(log κ)`` per sample.

    A quadrature rule ``λ^{-1/2} ≈ r(λ) = Σ_k w_k/(λ + μ_k)`` on ``[λ_min, λ_max]`` with noise
    levels ``τ_k = 1/μ_k`` and ``z ~ N(0, I_d)`` give::

        x = m + Σ_k w_k R_{τ_k} z,     R_τ z = τ z + τ² s_τ(m + z) = (Λ + τ^{-1}I)^{-1} z

    so ``x = m + S z`` with ``S = r(Λ)`` and ``max |r(λ)√λ − 1| ≤ e`` on the spectrum: the
    whitened covariance error is ``‖Λ^{1/2} S² Λ^{1/2} − I‖ ≤ 2e + e²``, and
    ``TV ≤ (3/2)‖·‖_F ≤ (3/2)√d (2e + e²)`` (Devroye, Mehrabian & Reddad 2018): take
    ``tol ≈ δ_TV/(3√d)`` for a TV target ``δ_TV``. Levels run in a ``lax.scan``, samples in a
    ``vmap`` (memory ``O(num_samples · d)``).

    Rules (:mod:`jaxsample.kernels.resolvent`):

    - ``"elliptic"`` (default): the Hale–Higham–Trefethen rule, the midpoint rule after the
      substitution ``t = √λ_min sc(v | 1 − 1/κ)``; ``e ≤ tol`` by its error bound
      ``4 e^{−2πN K'/K}``, with ``N = ⌈K/(2πK') log(4/ε)⌉`` levels: 6, 10, 13, 17 for
      ``ε = 1e-6`` and ``κ = 1e2, 1e4, 1e6, 1e8``
      (:func:`~jaxsample.kernels.resolvent.elliptic_rule`);
    - ``"sinc"``: the trapezoid rule in ``log τ`` that J. Liu (arXiv:2605.27769, 2026) analyses,
      ``e ≤ 2 tol``, ``q = O((log κ + log 1/ε) log 1/ε)`` levels: 49, 52, 56, 60 for the same
      cases (:func:`~jaxsample.kernels.resolvent.sinc_rule`).

    Queries: with a known mean, one per level per sample, ``q · num_samples``. With ``mean=None``
    each level also queries ``s_τ(b_k)`` at a base point shared by all samples,
    ``R_τ z = τ z + τ²[s_τ(b_k + z) − s_τ(b_k)]``; the base points are Tweedie steps
    ``b_{k+1} = b_k + τ_k s_{τ_k}(b_k)`` from one step at ``τ_pre = max(τ_1, 1/(u λ_min))``
    (``u`` the unit round-off), which lands within round-off of ``m``:
    ``q · num_samples + q + 1`` queries, and the last base point is the mean estimate. An oracle
    with an inner solver (the matrix-free :class:`SmoothedScoreOracle`) reports its iterations
    and convergence through ``with_stats``; ``info.solver`` (a :class:`~jaxsample.SolverStats`)
    carries them.

    Finite-bit answers (``bits``): each answer ``R_{τ_k} z`` is sent with ``b`` bits per
    coordinate through :func:`jaxsample.kernels.resolvent.dithered_quantize` on its range
    ``±‖z‖/(μ_k + λ_min)``; the subtractive dither makes the error uniform and independent of the
    answer, so the sample gains independent noise of covariance
    ``‖z‖² Σ_k (w_k/(μ_k + λ_min))² / (12 (2^{b−1} − 1)²) · I``. For the elliptic shifts
    ``w_j/(μ_j + λ_min) = (2K/(πN)) dn(v_j)/√λ_min`` exactly. ``bits="auto"`` picks the fewest
    bits that keep the noise's whitened size below ``tol``: ``b = O(log κ + log(d/ε))``
    (elliptic: ``≈ 1 + ½ log₂(κ d/(3 ε log(4/ε)))``) and ``q · d · b = O(log² κ)`` bits per
    sample for fixed ``d`` and ``ε``.

    Precision: ``τ z + τ² s_τ`` cancels by the factor ``1 + τλ``; the predicted worst-case
    whitened round-off is ``u √λ_max Σ_k w_k τ_k``: ``≈ 5 u √κ`` for the elliptic rule (its
    largest ``τ`` is ``≈ (2N/K)²/λ_min``), ``≈ u √κ / tol`` for the sinc rule (its truncation
    pushes ``τ_max`` to ``(2/(πε))²/λ_min``). A tolerance below it is refused in float32
    (``ValueError``: use float64) and warned about in float64. Elliptic: float64 serves
    ``tol = 1e-10`` up to ``κ ≈ 10¹⁰``, float32 ``tol = 1e-3`` up to ``κ ≈ 10⁶``; sinc: float64
    ``tol = 1e-6`` up to ``κ ≈ 10⁸``, float32 ``tol = 1e-3`` up to ``κ ≈ 500``. It assumes
    answers accurate to round-off relative to ``τ z`` (as :class:`SmoothedScoreOracle`'s are); an
    oracle with relative error ``δ > u`` (e.g. the dense float32 ``eigh`` oracle, ``δ ~ √d u``)
    raises it by ``δ/u``, and a mean far larger than the spread adds ``u ‖m‖`` per level.

    Args:
        key: PRNG key.
        smoothed_score_fn: ``s(x, tau) -> (d,)``, the score of ``π ∗ N(0, tau I)`` at ``x``
            (e.g. :class:`SmoothedScoreOracle`); called with ``tau`` of the samples' dtype.
            Oracles from :class:`SmoothedScoreOracle` are pytrees: a new precision of the same
            shape reuses the compiled sampler; a plain function is compiled once per object.
        mean: ``(d,)`` mean ``m`` if known; it fixes ``d`` and the dtype.
        dim: ``d`` when ``mean`` is ``None`` (the dtype is then JAX's default float).
        lambda_min, lambda_max: bounds on the spectrum of ``Λ``, ``0 < lambda_min <= lambda_max``;
            a loose bound costs only logarithmically. With ``tol`` they fix the number of levels
            (a static shape), so they are Python numbers, not traced values.
        tol: relative tolerance ``ε`` of the rational approximation, in ``(0, 1)``.
        num_samples: number of samples, a Python int ``>= 1``.
        bits: ``None`` (exact answers), a Python int in ``[2, 31]`` (bits per coordinate), or
            ``"auto"``.
        rule: ``"elliptic"`` or ``"sinc"``.

    Returns:
        ``(samples, info)``: ``(num_samples, d)`` samples and a :class:`GaussianInfo`.

    Raises:
        ValueError: bad spectral bounds or ``tol``, tolerance below the float32 round-off floor,
            an oracle returning the wrong shape or dtype, bad ``bits``, ``dim`` or ``rule``.
        TypeError: non-floating ``mean``, non-int ``num_samples``, a non-callable oracle, a bad
            key.

    Example:
        >>> lam, m = jnp.array([1.0, 100.0]), jnp.array([1.0, -1.0])
        >>> score = SmoothedScoreOracle(jnp.diag(lam), m)
        >>> x, info = sample(jax.random.key(0), score, mean=m, lambda_min=1.0, lambda_max=100.0,
        ...                  tol=1e-3, num_samples=2)
        >>> x.shape, int(info.num_levels), int(info.num_queries)
        ((2, 2), 4, 8)
    """
    key = check_key("key", key)
    num_samples = check_int("num_samples", num_samples, 1)
    if mean is not None:
        mean = check_mean(mean)
        if dim is not None and dim != mean.shape[0]:
            raise ValueError(f"dim = {dim} does not match mean of shape {mean.shape}")
        dim, dtype = mean.shape[0], mean.dtype
    else:
        if dim is None:
            raise ValueError("dim must be a Python int >= 1 when mean is None, got None")
        dim = check_int("dim", dim, 1)
        dtype = jnp.zeros(()).dtype
    noise_key, dither_key = jax.random.split(key)
    z = jax.random.normal(noise_key, (num_samples, dim), dtype)
    return transform_noise(
        dither_key, smoothed_score_fn, z, mean=mean, lambda_min=lambda_min,
        lambda_max=lambda_max, tol=tol, bits=bits, rule=rule,
    )
