"""ETD: entropic transport descent, a particle sampler built on entropic optimal transport.

Pacelli, Ratheesh & Theodorou, *Variational Inference via Entropic Transport Descent*,
arXiv:2606.25265 (2026). One step moves ``N`` particles ``x_i`` (uniform weights) as follows:

1. **Proposals.** ``M`` Gaussian proposals per particle, ``y_ik = m_i + σ ξ_ik`` with
   ``σ = √(2α)`` and centres ``m_i = x_i + α·clip(∇log π(x_i))`` when a score is given (a Langevin
   move; the score is rescaled to norm ``≤ score_clip``) or ``m_i = x_i`` without one (a random
   walk). ``α`` is ``proposal_step``.
2. **Importance weights** against the mixture that generated the pool,
   ``b_j ∝ π(y_j) / Σ_i N(y_j; m_i, σ²I)`` (floored at ``max − 30`` in log space, normalised).
3. **Coupling.** The entropic plan ``γ`` between ``(x_i, 1/N)`` and ``(y_j, b_j)`` for the cost
   ``C_ij = ½‖x_i − y_j‖² / median(C)``: balanced (Sinkhorn), unbalanced (KL penalty ``ρε`` on the
   column marginal) or Gibbs (``γ_ij ∝ b_j e^{−C_ij/ε}`` row by row, no iterations). Sinkhorn duals
   are carried in the state and can warm-start the next step (``warm_start=True``).
4. **Update.** ``x_i ← (1−η) x_i + η y_{j_i}`` with ``j_i ~ Cat(γ_i· / Σ_j γ_ij)`` (categorical:
   for the balanced plan the expected number of particles landing on ``y_j`` is ``N b_j``, an
   unbiased resampling of the weighted pool in which the plan decides who goes where) or the row
   barycentre ``Σ_j γ̃_ij y_j`` (deterministic, but shrinks the spread). ``η`` is ``step_fraction``.
5. **Mutation** (optional, ``mutation_steps > 0``): MALA steps (with a score) or random-walk
   Metropolis steps (without), each leaving ``π`` invariant; they restore diversity after
   resampling.

The step is the discrete form of a JKO step ``argmin_ρ KL(ρ‖π) + W₂²(ρ_k, ρ)/2τ`` relaxed to
couplings, with ``ε`` playing the role of ``τ``; see :mod:`jaxsample.kernels.transport` for the
transport pieces (log-domain Sinkhorn with a memory-bounded chunked geometry).

The module follows the sampler contract: :func:`init`, :func:`build_kernel` (static structure
only, cached) and the constructor :func:`etd`, whose float hyper-parameters are traced values, so
algorithms that differ only in ``epsilon``, ``proposal_step``, … share one compilation of
:func:`jaxsample.run` and ``jax.vmap`` over them works.

**Choosing ε and the step.** ``ε`` is relative to the median cost, so it does not need rescaling
with the dimension: ``ε ≈ 0.05–0.5`` works; small ``ε`` sends particles to their nearest
high-weight proposals (strongly local, more Sinkhorn iterations), large ``ε`` makes every row equal
to ``b`` (a plain importance resampling that forgets where particles were). The proposal step
``α`` dominates the behaviour in high dimension: with a small ``α`` the importance weights
concentrate on a few proposals, rows of the plan degenerate and particles are duplicated until the
ensemble's variance collapses (as SVGD's does). The default ``α = 0.5`` keeps the weights balanced
on standard-scale targets up to ``d ≈ 50`` with 100 particles (at ``d = 100`` it collapses too; see
``bench/results_etd.md``); scale ``α`` with the square of the target's length scale, and watch
``info.weight_ess`` and ``info.num_distinct``: if they fall to a handful, raise ``α`` or
``num_proposals``, or add ``mutation_steps``.

**Choosing the preconditioner.** One isotropic proposal scale cannot suit a posterior whose
principal standard deviations span orders of magnitude (Bayesian logistic regression: 24×): the
weights then pile onto a few proposals and the ensemble collapses. With a preconditioner ``L``
(``Σ = LLᵀ`` a covariance scale), every step runs in the whitened coordinates ``L⁻¹x``: centres
``m = x + αΣ∇log π``, proposals ``m + √(2α)Lξ``, the Mahalanobis cost, preconditioned MALA, and
``α`` is then in whitened units (the default 0.5 is the value that keeps the weights balanced on
a standard-scale target).

``"ensemble"`` whitens with the particles' Ledoit–Wolf covariance averaged over steps
(``ema=0.9``). The average is what keeps it alive: from a tight start (BLR, init N(0, 0.01 I))
the first step's weights are degenerate (ESS ≈ 1), every particle lands on one proposal, the
ensemble covariance is 0 and, without the average (``ema=0``), so are all later proposals: a
positive feedback with nothing to stop it (posterior sd ratio 2·10⁻⁴ on breast cancer). With
the average the proposals keep the scale of the earlier steps and the ensemble re-expands.
Measured at N = 100 (``bench/results_etd.md``): a fixed factor from
:func:`laplace_preconditioner` is the reliable choice for a unimodal posterior (BLR after 300
steps, posterior sd ratio / mean error in posterior sds against NUTS: 0.98 / 0.15 on breast
cancer, d = 31; 0.99 / 0.06 on German credit, d = 21); ``"ensemble"`` gave 0.97 / 0.06 on German
credit but 0.49 / 0.68 on breast cancer (no preconditioner: 0.14 / 0.64) and needs ``N`` well
above ``d``: its covariance estimate is noisy at ``d/N = 0.3–0.5`` and the importance weights in
``d ≥ 30`` do not forgive a wrong shape (DAMV 0.34 ± 0.07 on N(0, I₅₀) against 1.02 ± 0.01
without a preconditioner); ``"diagonal"`` suits axis-aligned scales (0.96 / 0.08 on German
credit, 0.29 / 0.48 on breast cancer). The default stays ``None`` (exactly the
unpreconditioned sampler), decided by these measurements: no adaptive preconditioner beat it on
the isotropic targets, and on multimodal targets the ensemble covariance is dominated by the
distance between modes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_chunk_size,
    check_hyperparameter,
    check_int,
    check_number,
    is_concrete,
)
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.kernels import logspace, transport

__all__ = [
    "ETDInfo",
    "ETDState",
    "LaplaceFit",
    "Precision",
    "build_kernel",
    "etd",
    "init",
    "laplace_preconditioner",
]


PRECONDITIONERS = ("ensemble", "diagonal")
COSTS = ("euclidean", "langevin")


class ETDState(NamedTuple):
    """State of an ETD particle system.

    Attributes:
        positions: particles ``(N, d)``.
        f: particle Sinkhorn duals ``(N,)`` from the last step (warm start).
        g: proposal Sinkhorn duals ``(N·M,)`` from the last step (warm start).
        preconditioner: the adaptive preconditioner's running statistic: the (EMA) ensemble
            covariance ``(d, d)`` for ``"ensemble"``, the RMSProp accumulator ``(d,)`` for
            ``"diagonal"``, empty ``(0,)`` otherwise.
        step: steps taken (int32); indexes ``epsilon`` / ``proposal_step`` schedules.
    """

    positions: jax.Array
    f: jax.Array
    g: jax.Array
    preconditioner: jax.Array
    step: jax.Array


class ETDInfo(NamedTuple):
    """Per-step diagnostics (scalars).

    Attributes:
        num_iterations: Sinkhorn iterations of this step (0 for the Gibbs coupling).
        converged: whether Sinkhorn met its tolerance.
        coupling_ess: mean over particles of ``1/Σ_j γ̃_ij²``: how many proposals a particle
            effectively chooses among.
        weight_ess: ``1/Σ_j b_j²``, the effective size of the weighted proposal pool (after the
            weight guard, if any).
        weight_temperature: the exponent ``β ∈ (0, 1]`` the weight guard applied to the
            importance weights (1: no tempering).
        num_distinct: number of distinct proposals taken (``N`` for barycentric updates); with
            ``step_fraction = 1`` and no mutation steps this is the number of distinct particles.
        num_invalid: proposals whose log-density was NaN or ±inf (given zero weight).
        cost_scale: the median of ``½‖x_i − y_j‖²`` (whitened) the cost was divided by.
        acceptance_rate: mean Metropolis acceptance of the mutation steps (1 when there are none).
        nonfinite: True if anything non-finite was met this step (a log-density, a score, the
            duals, the preconditioner). Invalid proposals get zero weight; if the plan itself is
            NaN or the move is not finite, the particles stay where they were this step.
    """

    num_iterations: jax.Array
    converged: jax.Array
    coupling_ess: jax.Array
    weight_ess: jax.Array
    weight_temperature: jax.Array
    num_distinct: jax.Array
    num_invalid: jax.Array
    cost_scale: jax.Array
    acceptance_rate: jax.Array
    nonfinite: jax.Array


class Precision(NamedTuple):
    """Wraps a precision matrix ``P`` (``(d, d)``) passed as ``preconditioner=Precision(P)``:
    the sampler whitens with ``chol(P⁻¹)``."""

    matrix: jax.Array


class LaplaceFit(NamedTuple):
    """Result of :func:`laplace_preconditioner`.

    Attributes:
        mode: the maximiser of ``logdensity_fn`` ``(d,)``.
        chol: lower Cholesky factor of the Laplace covariance ``(−∇² log π(mode))⁻¹``.
        converged: whether the optimiser met its tolerance.
        num_steps: optimiser steps taken.
    """

    mode: jax.Array
    chol: jax.Array
    converged: jax.Array
    num_steps: jax.Array


def laplace_preconditioner(logdensity_fn: Callable, position, *, max_steps: int = 500,
                           tolerance: float = 1e-6) -> LaplaceFit:
    """Laplace fit of ``π``: its mode by BFGS (optimistix) and ``chol((−∇² log π)⁻¹)`` there.

    Pass ``fit.chol`` as ``etd(..., preconditioner=fit.chol)`` (and start the particles near
    ``fit.mode``). The Hessian is ``jax.hessian`` of ``logdensity_fn`` (``O(d²)`` memory); if it
    is not negative definite at the point found, the Cholesky factor is NaN and the sampler
    refuses it.

    Args:
        logdensity_fn: ``log π(x)`` for one point ``(d,)``.
        position: starting point ``(d,)`` of the optimiser.
        max_steps: BFGS step cap.
        tolerance: BFGS relative and absolute tolerance.

    Returns:
        A :class:`LaplaceFit`.

    Example:
        >>> import jax.numpy as jnp
        >>> fit = laplace_preconditioner(lambda x: -0.5 * jnp.sum((x - 1.0)**2 / 4.0),
        ...                              jnp.zeros(2))
        >>> fit.mode.round(4).tolist(), jnp.diag(fit.chol).round(4).tolist()
        ([1.0, 1.0], [2.0, 2.0])
    """
    import optimistix as optx

    check_callable("logdensity_fn", logdensity_fn)
    position = check_array("position", position, ndim=1, finite=True)
    tolerance = check_number("tolerance", tolerance)
    solution = optx.minimise(lambda x, _: -logdensity_fn(x), optx.BFGS(rtol=tolerance,
                                                                       atol=tolerance),
                             position, max_steps=check_int("max_steps", max_steps, 1),
                             throw=False)
    mode = solution.value
    precision = -jax.hessian(logdensity_fn)(mode)
    return LaplaceFit(mode, _chol_of_precision(precision),
                      solution.result == optx.RESULTS.successful,
                      jnp.asarray(solution.stats["num_steps"], jnp.int32))


def _chol_of_precision(precision):
    precision = 0.5 * (precision + precision.T)
    cov = jnp.linalg.inv(precision)
    return jnp.linalg.cholesky(0.5 * (cov + cov.T))


def init(position: jax.Array, num_proposals: int = 25, *,
         preconditioner_state: jax.Array | None = None,
         rng_key: jax.Array | None = None) -> ETDState:
    """Initial state: the particles, zero duals, the preconditioner statistic, step 0.

    Args:
        position: initial particles ``(N, d)``, floating point (valid: the constructor's ``init``
            checks it).
        num_proposals: proposals per particle ``M`` (sets the size of ``g``).
        preconditioner_state: the adaptive preconditioner's initial statistic (the constructor
            computes it from ``position``); ``None``: empty.
        rng_key: unused (ETD's start is deterministic); accepted for the common signature.

    Returns:
        An :class:`ETDState`.
    """
    del rng_key
    position = jnp.asarray(position)
    n = position.shape[0]
    if preconditioner_state is None:
        preconditioner_state = jnp.zeros((0,), position.dtype)
    return ETDState(
        position,
        jnp.zeros((n,), position.dtype),
        jnp.zeros((n * num_proposals,), position.dtype),
        preconditioner_state,
        jnp.zeros((), jnp.int32),
    )


def _clip_by_norm(v: jax.Array, max_norm: jax.Array) -> jax.Array:
    """Rows rescaled to norm ``<= max_norm``; ``max_norm = 0`` (or ``inf``) means no clipping."""
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    floor = jnp.asarray(1e-8, v.dtype)
    factor = jnp.minimum(jnp.ones_like(norm), max_norm / jnp.maximum(norm, floor))
    return v * jnp.where(max_norm > 0, factor, jnp.ones_like(factor))


def _count_distinct(picks: jax.Array) -> jax.Array:
    ordered = jnp.sort(picks)
    return (1 + jnp.sum(ordered[1:] != ordered[:-1])).astype(jnp.int32)


def _log_density(logdensity_fn, x, batched=False):
    values = (logdensity_fn(x) if batched else jax.vmap(logdensity_fn)(x)).astype(x.dtype)
    return jnp.where(jnp.isnan(values), -jnp.inf, values)


def _raw_score(score_fn, x, batched=False):
    """Scores with non-finite rows zeroed, and whether any was non-finite."""
    s = (score_fn(x) if batched else jax.vmap(score_fn)(x)).astype(x.dtype)
    ok = jnp.all(jnp.isfinite(s), axis=1, keepdims=True)
    return jnp.where(ok, s, jnp.zeros_like(s)), ~jnp.all(ok)


def _drift(score_fn, x, score_clip, batched=False):
    """Clipped score with non-finite rows zeroed, and whether any was non-finite."""
    s, bad = _raw_score(score_fn, x, batched)
    return _clip_by_norm(s, score_clip), bad


def _mutate(key, x, log_density, drift, num_steps, step_size):
    """``num_steps`` MALA (``drift`` given) or random-walk Metropolis steps on every particle.

    ``log_density(z)`` and ``drift(z) -> (clipped score, bad)`` act on ``(N, d)`` blocks (in the
    whitened coordinates when the sampler is preconditioned: preconditioned MALA).
    """
    dtype = x.dtype
    h = step_size
    with_score = drift is not None

    def parts(z):
        logp = log_density(z)
        if with_score:
            s, bad = drift(z)
            return logp, z + h * s, bad
        return logp, z, jnp.zeros((), bool)

    def one(carry, step_key):
        z, logp, mean, bad = carry
        k_noise, k_accept = jax.random.split(step_key)
        prop = mean + jnp.sqrt(2 * h) * jax.random.normal(k_noise, z.shape, dtype)
        logp_prop, mean_prop, bad_prop = parts(prop)
        log_ratio = logp_prop - logp
        if with_score:
            back = jnp.sum(jnp.square(z - mean_prop), axis=1)
            fwd = jnp.sum(jnp.square(prop - mean), axis=1)
            log_ratio = log_ratio + (fwd - back) / (4 * h)
        log_u = jnp.log(jax.random.uniform(k_accept, logp.shape, dtype))
        accept = log_u < log_ratio  # False for NaN ratios

        def pick(new, old):
            return jnp.where(accept.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

        carry = (pick(prop, z), pick(logp_prop, logp), pick(mean_prop, mean), bad | bad_prop)
        return carry, jnp.mean(accept.astype(dtype))

    logp, mean, bad = parts(x)
    (x, _, _, bad), accepted = jax.lax.scan(
        one, (x, logp, mean, bad), jax.random.split(key, num_steps)
    )
    return x, jnp.mean(accepted), bad


def _ledoit_wolf(x: jax.Array, shrinkage) -> jax.Array:
    """Ensemble covariance shrunk towards ``(tr S / d) I``: Ledoit & Wolf (2004)'s intensity
    ``λ = min(1, β̄²/δ²)`` when ``shrinkage`` is None, else the given ``λ``."""
    n, d = x.shape
    centred = x - jnp.mean(x, axis=0, keepdims=True)
    sample = centred.T @ centred / n
    mu = jnp.trace(sample) / d
    eye = jnp.eye(d, dtype=x.dtype)
    if shrinkage is None:
        delta2 = jnp.sum(jnp.square(sample - mu * eye)) / d
        sq = jnp.sum(centred * centred, axis=1)
        per = sq**2 - 2 * jnp.sum((centred @ sample) * centred, axis=1) + jnp.sum(sample**2)
        beta2 = jnp.minimum(jnp.sum(per) / (n * n * d), delta2)
        lam = jnp.where(delta2 > 0, beta2 / jnp.maximum(delta2, jnp.finfo(x.dtype).tiny),
                        jnp.ones_like(delta2))
    else:
        lam = jnp.asarray(shrinkage, x.dtype)
    return lam * mu * eye + (1 - lam) * sample


def _safe_cholesky(cov):
    """``chol(cov + 1e-6·mean(diag)·I)``; falls back to the diagonal if that is not finite."""
    d = cov.shape[0]
    jitter = 1e-6 * jnp.maximum(jnp.mean(jnp.diagonal(cov)), jnp.finfo(cov.dtype).tiny)
    chol = jnp.linalg.cholesky(cov + jitter * jnp.eye(d, dtype=cov.dtype))
    ok = jnp.all(jnp.isfinite(chol))
    fallback = jnp.diag(jnp.sqrt(jnp.maximum(jnp.diagonal(cov), jitter)))
    return jnp.where(ok, chol, fallback), ~ok


def _temper(log_b: jax.Array, min_ess: jax.Array, num_bisections: int = 30):
    """The weight guard: ``b ∝ b^β`` with the largest ``β ∈ (0, 1]`` whose ESS is at least
    ``min_ess · P`` (bisection; ESS decreases in ``β``). Returns ``(log_b, β)``."""
    p = log_b.shape[0]
    target = min_ess * p
    finite = jnp.isfinite(log_b)

    def ess(beta):
        tempered = jnp.where(finite, beta * log_b, -jnp.inf)
        return jnp.exp(logspace.log_ess(tempered))

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        ok = ess(mid) >= target
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    one = jnp.ones((), log_b.dtype)
    lo, _ = jax.lax.fori_loop(0, num_bisections, body, (jnp.zeros_like(one), one))
    beta = jnp.where(ess(one) >= target, one, jnp.maximum(lo, jnp.asarray(1e-6, log_b.dtype)))
    tempered = logspace.log_normalize(jnp.where(finite, beta * log_b, -jnp.inf))
    return jnp.where(beta < 1, tempered, log_b), beta


def _at(value, step):
    """A hyper-parameter or the entry of its schedule (1-D) at ``step`` (held at the end)."""
    value = jnp.asarray(value)
    if value.ndim == 0:
        return value
    return value[jnp.minimum(step, value.shape[0] - 1)]


@functools.cache
def build_kernel(
    *,
    coupling: str = "balanced",
    update: str = "categorical",
    mutation_steps: int = 0,
    warm_start: bool = False,
    max_iterations: int = 200,
    chunk_size: int | None = None,
    preconditioner: str | None = None,
    cost: str = "euclidean",
    batched: bool = False,
    criterion: str = "marginal",
) -> Callable:
    """The ETD transition for a static structure (cached: equal structure, same function).

    Args:
        coupling: ``"balanced"``, ``"unbalanced"`` or ``"gibbs"``.
        update: ``"categorical"`` or ``"barycentric"``.
        mutation_steps: π-invariant MALA / random-walk Metropolis steps after the update.
        warm_start: start Sinkhorn from the state's duals.
        max_iterations: Sinkhorn's iteration cap.
        chunk_size: particle rows per block of every ``N × P`` interaction, or None (dense).
        preconditioner: None, ``"fixed"`` (the kernel's ``scale`` argument), ``"ensemble"`` or
            ``"diagonal"``.
        cost: ``"euclidean"`` (``½‖x_i − y_j‖²``) or ``"langevin"`` (``½‖m_i − y_j‖²``, the
            Langevin-residual cost), both in whitened coordinates and median-normalised.
        batched: ``logdensity_fn`` / ``score_fn`` take ``(n, d)`` blocks.
        criterion: Sinkhorn's stopping rule, ``"marginal"`` or ``"dual"``
            (see :func:`jaxsample.kernels.transport.solve_coupling`).

    Returns:
        ``kernel(key, state, logdensity_fn, score_fn=None, *, epsilon, proposal_step,
        step_fraction, mutation_step_size, rho, score_clip, tolerance, scale, shrinkage,
        ema, decay, min_weight_ess) -> (ETDState, ETDInfo)``. The float arguments may be traced;
        ``epsilon`` and ``proposal_step`` may be 1-D schedules indexed by ``state.step``;
        ``score_clip = 0`` means no clipping. Inputs are valid (:func:`etd` checked them).
    """

    def kernel(key: jax.Array, state: ETDState, logdensity_fn: Callable,
               score_fn: Callable | None = None, *, epsilon, proposal_step, step_fraction=1.0,
               mutation_step_size=None, rho=1.0, score_clip=5.0, tolerance=1e-2, scale=None,
               shrinkage=None, ema=0.9, decay=0.9, min_weight_ess=0.0
               ) -> tuple[ETDState, ETDInfo]:
        with jax.named_scope("etd_step"):
            x = state.positions
            n, d = x.shape
            dtype = x.dtype
            num_proposals = state.g.shape[0] // n
            cast = lambda v: jnp.asarray(v, dtype)
            eps = cast(_at(epsilon, state.step))
            alpha = cast(_at(proposal_step, state.step))
            eta, clip = cast(step_fraction), cast(score_clip)
            h_mutation = alpha if mutation_step_size is None else cast(mutation_step_size)
            key_prop, key_pick, key_mut = jax.random.split(key, 3)
            sigma = jnp.sqrt(2 * alpha)

            with jax.named_scope("preconditioner"):
                raw_score, bad_score = (None, jnp.zeros((), bool))
                new_statistic, bad_pre = state.preconditioner, jnp.zeros((), bool)
                if preconditioner is None:
                    whiten = colour = lambda v: v
                    pull = lambda s: s
                elif preconditioner == "diagonal":
                    beta = cast(decay)
                    if score_fn is not None:
                        raw_score, bad_score = _raw_score(score_fn, x, batched)
                        new_statistic = (beta * state.preconditioner
                                         + (1 - beta) * jnp.mean(raw_score**2, axis=0))
                        factor = jax.lax.rsqrt(new_statistic + jnp.asarray(1e-8, dtype))
                    else:
                        new_statistic = (beta * state.preconditioner
                                         + (1 - beta) * jnp.var(x, axis=0))
                        factor = jnp.sqrt(jnp.maximum(new_statistic,
                                                      jnp.finfo(dtype).tiny))
                    whiten = lambda v: v / factor[None, :]
                    colour = lambda u: u * factor[None, :]
                    pull = lambda s: s * factor[None, :]
                else:
                    if preconditioner == "fixed":
                        chol = jnp.asarray(scale, dtype)
                    else:
                        mix = cast(ema)
                        new_statistic = (mix * state.preconditioner
                                         + (1 - mix) * _ledoit_wolf(x, shrinkage))
                        chol, bad_pre = _safe_cholesky(new_statistic)
                    whiten = lambda v: jax.scipy.linalg.solve_triangular(
                        chol, v.T, lower=True).T
                    colour = lambda u: u @ chol.T
                    pull = lambda s: s @ chol

            def log_density_w(u):
                return _log_density(logdensity_fn, colour(u), batched)

            def drift_w(u, raw=None):
                if raw is None:
                    raw, bad = _raw_score(score_fn, colour(u), batched)
                else:
                    raw, bad = raw, bad_score
                return _clip_by_norm(pull(raw), clip), bad

            with jax.named_scope("proposals"):
                u = whiten(x)
                if score_fn is not None:
                    if preconditioner is None:
                        s, bad_score = _drift(score_fn, x, clip, batched)
                    else:
                        s, bad_score = drift_w(u, raw_score)
                    centres = u + alpha * s
                else:
                    centres = u
                noise = jax.random.normal(key_prop, (n * num_proposals, d), dtype)
                proposals = jnp.repeat(centres, num_proposals, axis=0) + sigma * noise
                log_target = log_density_w(proposals)

            log_b, num_invalid = transport.proposal_log_weights(
                log_target, proposals, centres, sigma, chunk_size=chunk_size)
            log_b, temperature = _temper(log_b, cast(min_weight_ess))
            with jax.named_scope("cost"):
                source = u if cost == "euclidean" else centres
                scale_c = transport.cost_scale(source, proposals)
                geom = transport.ParticleGeometry(source, proposals, inv_scale=1 / scale_c,
                                                  chunk_size=chunk_size)
            plan = transport.solve_coupling(
                geom, log_b, epsilon=eps, coupling=coupling, rho=cast(rho),
                init=(state.f, state.g) if warm_start else None, tolerance=cast(tolerance),
                max_iterations=max_iterations, criterion=criterion,
                inner_iterations=5 if criterion == "marginal" else 1)
            rows = transport.transport_rows(key_pick, geom, plan.g, proposals, epsilon=eps,
                                            update=update)

            moved = (1 - eta) * u + eta * rows.targets
            any_valid = num_invalid < proposals.shape[0]
            # NaN duals make every row's logits NaN and the categorical draw returns an arbitrary
            # finite index (so the check on `moved` alone would pass): keep the particles where
            # they were. -inf entries of g are legitimate (zero-weight proposals).
            plan_ok = ~jnp.any(jnp.isnan(plan.g)) & ~jnp.any(jnp.isnan(plan.f))
            u_new = jnp.where(any_valid & plan_ok & jnp.all(jnp.isfinite(moved)), moved, u)
            if mutation_steps > 0:
                with jax.named_scope("mutation"):
                    if preconditioner is None:
                        log_fn = lambda z: _log_density(logdensity_fn, z, batched)
                        drift_fn = (None if score_fn is None
                                    else lambda z: _drift(score_fn, z, clip, batched))
                    else:
                        log_fn = log_density_w
                        drift_fn = None if score_fn is None else drift_w
                    u_new, acceptance, bad_mut = _mutate(key_mut, u_new, log_fn, drift_fn,
                                                         mutation_steps, h_mutation)
            else:
                acceptance, bad_mut = jnp.ones((), dtype), jnp.zeros((), bool)
            x_new = u_new if preconditioner is None else colour(u_new)
            if preconditioner is not None:
                x_new = jnp.where(jnp.all(jnp.isfinite(x_new)), x_new, x)

            duals_ok = jnp.all(jnp.isfinite(plan.f)) & jnp.all(jnp.isfinite(plan.g))
            f = jnp.where(duals_ok, plan.f, jnp.zeros_like(plan.f))
            g = jnp.where(duals_ok, plan.g, jnp.zeros_like(plan.g))
            statistic_ok = jnp.all(jnp.isfinite(new_statistic))
            statistic = jnp.where(statistic_ok, new_statistic, state.preconditioner)
            if update == "categorical":
                num_distinct = _count_distinct(rows.picks)
            else:
                num_distinct = jnp.asarray(n, jnp.int32)
            info = ETDInfo(
                num_iterations=plan.num_iterations,
                converged=plan.converged,
                coupling_ess=jnp.mean(rows.row_ess),
                weight_ess=jnp.exp(-jax.nn.logsumexp(2 * log_b)),
                weight_temperature=temperature,
                num_distinct=num_distinct,
                num_invalid=num_invalid,
                cost_scale=scale_c,
                acceptance_rate=acceptance,
                nonfinite=((num_invalid > 0) | bad_score | bad_mut | ~duals_ok | bad_pre
                           | ~statistic_ok),
            )
            return ETDState(x_new, f, g, statistic, state.step + 1), info

    return kernel


def _score_clip(value):
    """``None``, ``0`` and ``inf`` all mean no clipping (stored as 0, the kernel's convention)."""
    if value is None:
        value = 0.0
    elif (is_concrete(value) and isinstance(value, float | np.floating | np.ndarray | jax.Array)
          and np.shape(value) == () and float(value) == math.inf):
        value = 0.0
    return check_hyperparameter("score_clip", value, positive=False)


def _schedule(name, value):
    """A positive hyper-parameter, or a 1-D schedule of them (one value per step)."""
    if np.ndim(value) == 1 and not isinstance(value, str):
        values = check_array(name, value, ndim=1, finite=True, min_rows=1)
        if is_concrete(values) and not bool(jnp.all(values > 0)):
            raise ValueError(f"{name} schedule must be > 0 everywhere")
        return values if not is_concrete(values) else np.asarray(values, np.float64)
    return check_hyperparameter(name, value)


def _preconditioner(value, dim_hint=None):
    """``(kind, scale)`` from the ``preconditioner`` argument."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return check_choice("preconditioner", value, PRECONDITIONERS), None
    if isinstance(value, Precision):
        matrix = check_array("preconditioner", value.matrix, ndim=2, finite=True)
        scale = _chol_of_precision(matrix)
    else:
        scale = check_array("preconditioner", value, ndim=2, finite=True)
    if scale.shape[0] != scale.shape[1]:
        raise ValueError(f"preconditioner must be a square (d, d) matrix, got {scale.shape}")
    if is_concrete(scale):
        if not bool(jnp.all(jnp.isfinite(scale))):
            raise ValueError("preconditioner: the precision matrix is not positive definite")
        if not bool(jnp.allclose(scale, jnp.tril(scale))) or not bool(
                jnp.all(jnp.diagonal(scale) > 0)):
            raise ValueError("preconditioner must be a lower-triangular Cholesky factor with a "
                             "positive diagonal (e.g. jnp.linalg.cholesky(cov))")
    return "fixed", scale


def etd(
    logdensity_fn: Callable,
    *,
    score_fn: Callable | None = None,
    num_proposals: int = 25,
    epsilon=0.1,
    proposal_step=0.5,
    coupling: str = "balanced",
    update: str = "categorical",
    step_fraction: float = 1.0,
    mutation_steps: int = 0,
    mutation_step_size: float | None = None,
    rho: float = 1.0,
    score_clip: float | None = 5.0,
    preconditioner=None,
    shrinkage: float | None = None,
    ema: float = 0.9,
    decay: float = 0.9,
    cost: str = "euclidean",
    min_weight_ess: float = 0.0,
    batched: bool = False,
    warm_start: bool = False,
    tolerance: float = 1e-2,
    criterion: str = "marginal",
    max_iterations: int = 200,
    chunk_size: int | None = None,
) -> SamplingAlgorithm:
    """Entropic transport descent (ETD) particle sampler.

    See the module docstring for the update rule and how to choose ``epsilon``,
    ``proposal_step`` and ``preconditioner``. Without ``score_fn`` the sampler is score-free: it
    evaluates only ``logdensity_fn`` and never differentiates it. Every float argument is a
    traced value of the step (sweeps and ``jax.vmap`` over it share one compilation).

    Args:
        logdensity_fn: ``log π(x)`` up to a constant for one point ``x`` of shape ``(d,)``,
            returning a scalar (``batched=True``: ``(n, d) -> (n,)``). NaN or ±inf values are
            allowed: such proposals get zero weight.
        score_fn: ``∇ log π(x)`` for one point (e.g. ``jax.grad(logdensity_fn)``), or None for
            the score-free sampler (random-walk proposals, random-walk Metropolis mutation).
        num_proposals: proposals per particle ``M >= 1``; the pool has ``P = N·M`` points.
        epsilon: entropic regularisation ``ε > 0`` relative to the median cost; or a 1-D array,
            a schedule (entry ``t`` at step ``t``, the last one held).
        proposal_step: ``α > 0`` in whitened units: centres move by ``α·Σ·score``, proposal
            std ``√(2α)`` (whitened); or a 1-D schedule.
        coupling: ``"balanced"`` (Sinkhorn, both marginals), ``"unbalanced"`` (KL penalty ``ρ``
            on the proposal marginal) or ``"gibbs"`` (semi-relaxed, one pass, no iterations).
        update: ``"categorical"`` (draw a proposal from the row) or ``"barycentric"`` (row mean).
        step_fraction: damping ``η ∈ (0, 1]``: ``x ← (1−η)x + η·target``.
        mutation_steps: π-invariant (preconditioned) MALA / random-walk Metropolis steps after
            each update.
        mutation_step_size: step ``h`` of the mutation kernel (default: ``proposal_step``).
        rho: unbalanced KL weight ``ρ > 0`` (``"unbalanced"`` only).
        score_clip: whitened scores are rescaled to at most this norm; ``None``, ``0`` or
            ``inf``: no clipping (the reference code's convention).
        preconditioner: ``None`` (identity: the unpreconditioned sampler), a fixed lower
            Cholesky factor ``L`` of a covariance (e.g. :func:`laplace_preconditioner`'s
            ``chol``) or ``Precision(P)``, ``"ensemble"`` (the particles' Ledoit–Wolf-shrunk
            covariance, optionally an EMA, recomputed every step) or ``"diagonal"`` (RMSProp on
            the squared scores, or the particles' variances without a score). Proposals, cost
            and mutation live in the whitened coordinates ``L⁻¹x``; the importance weights are
            exact for the proposal used (``L`` is fixed within a step and ``|det L|`` cancels).
        shrinkage: ``"ensemble"``: Ledoit–Wolf intensity ``λ ∈ [0, 1]`` towards
            ``(tr Σ/d) I``; None estimates it (Ledoit & Wolf 2004).
        ema: ``"ensemble"``: weight ``∈ [0, 1)`` of the previous covariance (0: none). The
            default 0.9 is the memory that keeps one degenerate step (weight ESS ≈ 1: every
            particle lands on one proposal, the ensemble covariance is 0) from shrinking the
            proposals to nothing; with 0 that collapse is permanent.
        decay: ``"diagonal"``: RMSProp decay ``β ∈ [0, 1)``.
        cost: ``"euclidean"`` (``½‖x_i − y_j‖²``, Mahalanobis when preconditioned) or
            ``"langevin"`` (``½‖m_i − y_j‖²`` from the Langevin centres: the reference code's
            LRET cost up to its scale, which the median normalisation removes).
        min_weight_ess: the weight-collapse guard: when the importance weights' ESS falls below
            this fraction of ``P``, they are tempered, ``b ∝ b^β`` with the largest ``β`` that
            restores it (``Info.weight_temperature``). It trades bias (towards the proposal
            mixture) for variance; 0 (default) turns it off.
        batched: ``logdensity_fn`` (and ``score_fn``) take ``(n, d)`` blocks.
        warm_start: start Sinkhorn from the previous step's duals. Off by default: the proposal
            pool is redrawn every step, so the old duals describe other points, and on the bench
            targets warm starts did not reduce the iterations (see ``bench/results_etd.md``).
        tolerance: Sinkhorn's tolerance. ``criterion="marginal"`` (ott-jax's): the ``L1`` error
            of the proposal marginal, i.e. the proposal mass misallocated by the plan, checked
            every 5 iterations (keep ``>= 1e-5`` in float32). ``"dual"`` (the reference code's):
            ``max |Δf|`` between two iterations, checked every iteration. The same number
            means less work under ``"dual"``.
        criterion: ``"marginal"`` or ``"dual"``.
        max_iterations: Sinkhorn's iteration cap.
        chunk_size: if given, every ``N × P`` interaction (mixture density, Sinkhorn, row draws)
            is computed ``chunk_size`` rows at a time and the ``N × P`` matrix never exists:
            memory ``O(chunk_size · P)``. ``None``: dense, faster for small problems.

    Returns:
        A :class:`~jaxsample.SamplingAlgorithm` with ``init(position, *, rng_key=None)``
        (``position`` ``(N, d)``, finite, floating) and
        ``step(key, state) -> (ETDState, ETDInfo)``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
        >>> alg = jaxsample.etd(logdensity, num_proposals=5, preconditioner="ensemble")
        >>> state = alg.init(2.0 * jax.random.normal(jax.random.key(0), (50, 2)))
        >>> state, info = jaxsample.run(jax.random.key(1), alg, state, num_steps=20)
        >>> state.positions.shape, info.converged.shape
        ((50, 2), (20,))
    """
    check_callable("logdensity_fn", logdensity_fn)
    check_callable("score_fn", score_fn, allow_none=True)
    num_proposals = check_int("num_proposals", num_proposals, 1)
    kind, scale = _preconditioner(preconditioner)
    hyper = dict(
        epsilon=_schedule("epsilon", epsilon),
        proposal_step=_schedule("proposal_step", proposal_step),
        step_fraction=check_hyperparameter("step_fraction", step_fraction, maximum=1.0),
        mutation_step_size=check_hyperparameter("mutation_step_size", mutation_step_size,
                                                allow_none=True),
        rho=check_hyperparameter("rho", rho),
        score_clip=_score_clip(score_clip),
        tolerance=check_hyperparameter("tolerance", tolerance),
    )
    if kind == "fixed":
        hyper["scale"] = scale
    elif kind == "ensemble":
        hyper["shrinkage"] = check_hyperparameter("shrinkage", shrinkage, positive=False,
                                                  allow_none=True, maximum=1.0)
        hyper["ema"] = check_hyperparameter("ema", ema, positive=False, maximum=0.999)
    elif kind == "diagonal":
        hyper["decay"] = check_hyperparameter("decay", decay, positive=False, maximum=0.999)
    if not (is_concrete(min_weight_ess) and float(min_weight_ess) == 0.0):
        hyper["min_weight_ess"] = check_hyperparameter("min_weight_ess", min_weight_ess,
                                                       positive=False, maximum=1.0)
    kernel = build_kernel(
        coupling=check_choice("coupling", coupling, transport.COUPLINGS),
        update=check_choice("update", update, transport.UPDATES),
        mutation_steps=check_int("mutation_steps", mutation_steps, 0),
        warm_start=bool(warm_start),
        max_iterations=check_int("max_iterations", max_iterations, 1),
        chunk_size=check_chunk_size(chunk_size),
        preconditioner=kind,
        cost=check_choice("cost", cost, COSTS),
        batched=bool(batched),
        criterion=check_choice("criterion", criterion, transport.CRITERIA),
    )
    step = Step(kernel, logdensity_fn=logdensity_fn, score_fn=score_fn, **hyper)

    def init_fn(position: jax.Array, *, rng_key: jax.Array | None = None) -> ETDState:
        position = check_array("position", position, ndim=2, finite=True, min_rows=2)
        d = position.shape[1]
        if d < 1:
            raise ValueError(f"position needs dim >= 1, got shape {position.shape}")
        point = jax.ShapeDtypeStruct((2, d) if batched else (d,), position.dtype)
        want = (2,) if batched else ()
        out = jax.eval_shape(logdensity_fn, point)
        if getattr(out, "shape", None) != want:
            raise ValueError(
                f"logdensity_fn must map input of shape {point.shape} to shape {want} "
                f"(batched={batched}); it returned shape "
                f"{getattr(out, 'shape', type(out).__name__)}")
        if score_fn is not None:
            out = jax.eval_shape(score_fn, point)
            if getattr(out, "shape", None) != point.shape:
                raise ValueError(
                    f"score_fn must map input of shape {point.shape} to the same shape, got "
                    f"{getattr(out, 'shape', type(out).__name__)}")
        if kind == "fixed" and scale.shape != (d, d):
            raise ValueError(f"preconditioner must have shape ({d}, {d}), got {scale.shape}")
        statistic = None
        if kind == "ensemble":
            statistic = _ledoit_wolf(position, hyper["shrinkage"])
        elif kind == "diagonal":
            if score_fn is not None:
                raw, _ = _raw_score(score_fn, position, batched)
                statistic = jnp.mean(raw**2, axis=0)
            else:
                statistic = jnp.var(position, axis=0)
        return init(position, num_proposals, preconditioner_state=statistic, rng_key=rng_key)

    return SamplingAlgorithm(init_fn, step)
