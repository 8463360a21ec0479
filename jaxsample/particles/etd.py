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
5. **Mutation** (``mutation_steps``, default 2; 0 is the paper's plain step): MALA steps (with
   a score) or random-walk Metropolis steps (without), each leaving ``π`` invariant; they
   restore diversity after resampling and pull back what the weight guard biased.

The step is the discrete form of a JKO step ``argmin_ρ KL(ρ‖π) + W₂²(ρ_k, ρ)/2τ`` relaxed to
couplings, with ``ε`` playing the role of ``τ``; see :mod:`jaxsample.kernels.transport` for the
transport pieces (log-domain Sinkhorn with a memory-bounded chunked geometry).

The module follows the sampler contract: :func:`init`, :func:`build_kernel` (static structure
only, cached) and the constructor :func:`etd`, whose float hyper-parameters are traced values, so
algorithms that differ only in ``epsilon``, ``proposal_step``, … share one compilation of
:func:`jaxsample.run` and ``jax.vmap`` over them works.

**What the defaults do, and why** (measured on the posterior suite of
``bench/bench_posteriors.py``, 100 particles, 500 steps; the table is in
``bench/results_etd.md``). The paper's plain step is exact only while the importance weights
are healthy, and from ``d ≈ 20`` they are not: the mixture of ``N`` Gaussians is a poor
density for the pool, the weight ESS falls to 1–2, every particle lands on one or two
proposals, and the cloud collapses for good (German credit, d = 21, and the Brownian bridge,
d = 30: one distinct particle after 500 steps). With the defaults below ETD is calibrated on
eight schools, German credit, the Brownian bridge and the banana (sd ratio 0.80–1.01, mean
bias² ≤ 0.023), and on radon, stochastic volatility and an ill-conditioned Gaussian
(d = 90–103) it is not, and raises ``collapsed`` (:data:`ETD_HARD` below calibrates it
there); on Neal's funnel and the centred eight schools the cloud stays in the neck, and the
scale-mixture Stein test below raises ``collapsed``. So by default:

- ``mutation_steps=2``: π-invariant MALA moves after every update, their step adapted towards
  0.574 acceptance (``mutation_adaptation_rate``), and the proposal step follows it
  (``proposal_follows_mutation``): the adapted MALA step measures the target's local scale,
  so one default ``α`` serves posteriors whose scales differ by orders of magnitude.
- ``min_weight_ess=0.1``: weights whose ESS falls below ``0.1·N`` are tempered to it
  (``b ∝ b^β``); tempered weights target ``q^{1−β}π^β``, and the mutation steps pull the cloud
  back to ``π``. Off without mutation steps, where nothing would correct the bias.
- ``preconditioner="ensemble"``: the proposals, cost and mutation run in the coordinates
  whitened by the particles' shrunk covariance (below). On the suite it is what turned the
  collapses at ``d = 21–30`` into calibrated clouds (with the mutation steps but without it,
  500 steps: German credit sd ratio 0.66 and Brownian bridge 0.54, both flagged; with it 1.01
  and 0.94; the paper's plain step collapses both to one particle).
- The proposal step is *not* adapted to a weight-ESS band by default
  (``proposal_adaptation_rate=0``): the ESS is not monotone in ``α`` (for small ``α`` the pool
  sits on the particles and the weights are ``∝ π(x_i)``), and chasing the band drove ``α`` to
  nothing on ``N(0, I₅₀)`` (DAMV 0.47 against 0.99 without).

**Hard posteriors** (``jaxsample.etd(logdensity, score_fn="autodiff", **ETD_HARD)``, with
``N ≥ 2d`` particles). At ``d ≈ 100`` the defaults are flagged, never calibrated (sd ratio
0.17–0.34 on radon, stochastic volatility and the ill-conditioned Gaussian): the ensemble
covariance of a cloud that is too narrow whitens it as too narrow, and the clipped drift
(norm 5 in whitened units, where a typical whitened score has norm ``√d ≈ 10``) turns MALA
into a random walk (adapted step 0.03 instead of 0.25). :data:`ETD_HARD` changes four settings:

- ``preconditioner="fisher"``: whiten with the geometric mean of the particles' covariance
  ``C`` and the inverse of their scores' covariance ``S``
  (:func:`jaxsample.kernels.linalg.fisher_covariance`). On a Gaussian ``S = Σ⁻¹CΣ⁻¹`` for
  *any* cloud, so the mean is ``Σ`` itself whatever the cloud's spread: the preconditioner is
  right before the cloud is (it needs ``N > d`` for full-rank ``C`` and ``S``);
- ``shrinkage=0``: Ledoit–Wolf shrinkage pulls both towards isotropy and spoils the mean on an
  ill-conditioned target (sd ratio 0.54 with shrinkage against 0.95 without, d = 100,
  ``N = 256``);
- ``score_clip=50``: the whitened drift is clipped only far from the posterior (a typical
  whitened score has norm ``√d``: 10 at d = 100, 32 at d = 1 000), where an unclipped drift
  threw particles of radon out to where the density overflows (every step non-finite, sd
  ratio 2.9) and the clip at 5 of the defaults would make MALA a random walk;
- ``mutation_steps=16``: the transport step's weights are degenerate at ``d ≈ 100`` (weight
  ESS 2–3 of ``N·M``, tempered), so the π-invariant moves carry the sampling; with 8 moves the
  hierarchical scales of radon and stochastic volatility were borderline after 500 steps (sd
  ratio 0.84–0.86, mean bias² 0.04–0.06), with 16 they are not (0.92–0.94, 0.015).

**The verdict.** Every step records evidence that the cloud is not a sample of ``π`` (the
flag ``info.degenerate``): fewer than ``collapse_fraction·N`` distinct proposals taken, the
cloud's effective rank below ``collapse_fraction·min(N − 1, d)``, one proposal holding the
weight (ESS < 1.5), and, with a score, three Stein tests that need no reference:
``E_π[(x − c)·∇log π(x)] = −d`` gives ``info.stein_ratio`` (the cloud's spread against ``π``'s,
about the squared sd ratio on a Gaussian; degenerate outside ``stein_band = (0.6, 1.6)``, or
one coordinate's ratio outside ``coordinate_stein_band = (0.3, 3)`` and significant at the
Bonferroni level 0.01 over the coordinates) and
``E_π[∇log π] = 0`` gives ``info.score_bias`` (about the mean bias² in posterior sds;
degenerate above 0.05), and the scale-mixture test of
:func:`jaxsample.kernels.stein.scaling_ratios` gives ``info.scaling_flag`` (each coordinate's
Stein term along the field that also dilates the others: it sees a cloud stuck in a funnel's
neck, right in every local spread and wrong along the funnel; degenerate when a coordinate's
ratio is outside ``scaling_band = (0.5, 1.5)`` and significant). ``collapsed`` is raised
when degenerate steps dominate the recent past (an exponential average with memory
``collapse_patience = 10`` steps above 1/2); an eager :func:`jaxsample.run` then warns once,
and :func:`jaxsample.diagnostics.diagnose` names the problem and the remedy. The Stein checks
see what counting particles cannot: a cloud of 100 distinct particles 30× too narrow
(ill-conditioned Gaussian, d = 100), off-centre, or stuck in a funnel's neck.

**Choosing ε and the step.** ``ε`` is relative to the median cost, so it does not need rescaling
with the dimension: ``ε ≈ 0.05–0.5`` works; small ``ε`` sends particles to their nearest
high-weight proposals (strongly local, more Sinkhorn iterations), large ``ε`` makes every row equal
to ``b`` (a plain importance resampling that forgets where particles were). Without mutation
steps the proposal step ``α`` dominates the behaviour in high dimension: with a small ``α`` the
importance weights concentrate on a few proposals, rows of the plan degenerate and particles are
duplicated until the ensemble's variance collapses (as SVGD's does); ``α = 0.5`` keeps the
weights balanced on standard-scale targets up to ``d ≈ 50`` with 100 particles. Watch
``info.weight_ess``, ``info.num_distinct`` and ``info.stein_ratio``.

**Choosing the preconditioner.** One isotropic proposal scale cannot suit a posterior whose
principal standard deviations span orders of magnitude (Bayesian logistic regression: 24×): the
weights then pile onto a few proposals and the ensemble collapses. With a preconditioner ``L``
(``Σ = LLᵀ`` a covariance scale), every step runs in the whitened coordinates ``L⁻¹x``: centres
``m = x + αΣ∇log π``, proposals ``m + √(2α)Lξ``, the Mahalanobis cost, preconditioned MALA, and
``α`` is then in whitened units. ``"ensemble"`` whitens with the particles' Ledoit–Wolf
covariance averaged over steps (``ema=0.9``); the average keeps one degenerate step (weight ESS
≈ 1, every particle on one proposal, covariance 0) from shrinking the proposals to nothing, and
the statistic is frozen while the cloud's effective rank is below the collapse threshold, so a
collapsed cloud cannot lock it in. A fixed factor from :func:`laplace_preconditioner` suits a
unimodal, near-Gaussian posterior (BLR after 300 steps, sd ratio / mean error in posterior sds
against NUTS: 0.98 / 0.15 on breast cancer, d = 31; 0.99 / 0.06 on German credit, d = 21) and
not a funnel or a hierarchical model at small scale. ``"diagonal"`` suits axis-aligned scales.
On multimodal targets the ensemble covariance is dominated by the distance between modes.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_band,
    check_callable,
    check_choice,
    check_chunk_size,
    check_fn_output,
    check_hyperparameter,
    check_initial_logdensity,
    check_int,
    check_number,
    check_position,
    is_concrete,
    resolve_score_fn,
    score_callable,
)
from jaxsample._pytree import on_flat, ravel, unravel
from jaxsample._solver import from_optimistix
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.kernels import langevin, linalg, logspace, stein, transport
from jaxsample.kernels.solver import RESULTS, SolverStats
from jaxsample.kernels.solver import select as select_result

__all__ = [
    "ETD_HARD",
    "ETDInfo",
    "ETDState",
    "LaplaceFit",
    "LaplaceInfo",
    "Precision",
    "build_kernel",
    "etd",
    "init",
    "laplace_preconditioner",
]


PRECONDITIONERS = ("ensemble", "fisher", "diagonal")
# the adapted steps stay within a factor e^±7 ≈ 10^±3 of the given ones: where no proposal step
# can meet the weight-ESS target (high dimension), the proposals keep a scale of their own
# rather than shrinking to nothing
_MAX_LOG_SCALE = 7.0
COSTS = ("euclidean", "langevin")
# the documented switch for hard posteriors (d ≈ 100, hierarchical scales): see the module
# docstring, "Hard posteriors"; read-only, so a user cannot change every later caller's preset
ETD_HARD = types.MappingProxyType({"preconditioner": "fisher", "shrinkage": 0.0,
                               "score_clip": 50.0, "mutation_steps": 16})
# the family-wise level of the per-coordinate Stein tests' significance part (Bonferroni over
# the d coordinates; their effect parts are ``coordinate_stein_band`` and ``scaling_band``)
STEIN_LEVEL = 0.01


class ETDState(NamedTuple):
    """State of an ETD particle system.

    Attributes:
        positions: particles ``(N, d)``.
        f: particle Sinkhorn duals ``(N,)`` from the last step (warm start).
        g: proposal Sinkhorn duals ``(N·M,)`` from the last step (warm start).
        preconditioner: the adaptive preconditioner's running statistic: the (EMA) ensemble
            covariance ``(d, d)`` for ``"ensemble"``, the (EMA) covariances of the particles
            and of their scores ``(2, d, d)`` for ``"fisher"``, the RMSProp accumulator
            ``(d,)`` for ``"diagonal"``, empty ``(0,)`` otherwise.
        step: steps taken (int32); indexes ``epsilon`` / ``proposal_step`` schedules.
        log_step_scale: the adapted multiplier ``log(α_t / α)`` of the proposal step (0 at
            the start; it stays 0 when ``proposal_adaptation_rate = 0``, the default).
        log_mutation_scale: the adapted multiplier ``log(h_t / h)`` of the mutation step (it
            stays 0 when ``mutation_adaptation_rate = 0``).
        degenerate_rate: exponential average of ``info.degenerate`` with weight
            ``1/collapse_patience`` per step (0 at the start).
        collapsed: ``degenerate_rate > 1/2``: most recent steps looked degenerate, the cloud
            is not a sample of ``π``; :func:`jaxsample.run` warns when a run ends in this
            state.
    """

    positions: jax.Array
    f: jax.Array
    g: jax.Array
    preconditioner: jax.Array
    step: jax.Array
    log_step_scale: jax.Array
    log_mutation_scale: jax.Array
    degenerate_rate: jax.Array
    collapsed: jax.Array


class ETDInfo(NamedTuple):
    """Per-step diagnostics (scalars).

    Attributes:
        solver: Sinkhorn's :class:`~jaxsample.SolverStats` (0 iterations for the Gibbs
            coupling).
        coupling_ess: mean over particles of ``1/Σ_j γ̃_ij²``: how many proposals a particle
            effectively chooses among.
        weight_ess: ``1/Σ_j b_j²``, the effective size of the weighted proposal pool before
            the weight guard.
        weight_temperature: the exponent ``β ∈ (0, 1]`` the weight guard applied to the
            importance weights (1: no tempering).
        num_distinct: number of distinct proposals taken (``N`` for barycentric updates).
        effective_rank: effective rank (:func:`jaxsample.kernels.linalg.effective_rank`) of
            the whitened cloud before mutation.
        stein_ratio: the cloud's spread relative to the target's by Stein's identity,
            ``−(1/Nd) Σ_i (x_i − x̄)·∇log π(x_i)`` at the incoming particles: 1 in expectation
            for a sample of ``π`` (integration by parts: ``E_π[(x − c)·∇log π(x)] = −d``),
            below 1 for a cloud narrower than ``π``, above 1 for a wider one (about the squared
            sd ratio on a Gaussian). NaN without a score function.
        stein_ratio_min: the smallest per-coordinate ratio ``−(1/N) Σ_i (x_ik − x̄_k)
            ∂_k log π(x_i)`` (each is 1 in expectation under ``π``): one coordinate the cloud
            covers too narrowly hides in the mean over ``d`` but shows here (a cloud stuck in
            a funnel's neck does not: see ``scaling_flag``).
        stein_ratio_max: the largest per-coordinate ratio.
        score_bias: how far the cloud's mean is off, from the other Stein identity
            ``E_π[∇log π] = 0``: ``max(mean_k z_k² − 1, 0)/N`` with ``z_k = √N·mean_i s_ik /
            sd_i s_ik`` per coordinate: about 0 for a sample of ``π`` (noise of sd about
            ``√(2/d)/N`` for independent particles, more for duplicated ones) and the mean bias²
            in posterior sds, ``mean_k ((m_k − μ_k)/σ_k)²``, on a Gaussian.
            NaN without a score function.
        scaling_ratio_min: the smallest per-coordinate Stein ratio along the scale-mixture
            field (:func:`jaxsample.kernels.stein.scaling_ratios`: one coordinate's spread
            with the others dilated along; 1 under ``π``). NaN without a score function.
        scaling_flag: the scale-mixture (funnel) test fired this step: some coordinate's
            scaling ratio is outside ``scaling_band`` and significant at the Bonferroni
            level 0.01 (:func:`jaxsample.diagnostics.stein_check`'s flag). It sees a cloud
            stuck in a funnel's neck, which the linear ratios above do not.
        num_invalid: proposals whose log-density was NaN or ±inf (given zero weight).
        cost_scale: the median of ``½‖x_i − y_j‖²`` (whitened) the cost was divided by.
        proposal_step: the proposal step ``α_t`` used this step (after adaptation).
        mutation_step_size: the mutation step ``h_t`` used this step (after adaptation).
        acceptance_rate: mean Metropolis acceptance of the mutation steps (1 when there are none).
        degenerate: this step looked degenerate: distinct proposals taken or the cloud's
            effective rank below ``collapse_fraction`` of ``N`` (resp. ``min(N − 1, d)``), the
            raw weight ESS below 1.5 (one proposal holds the mass), ``stein_ratio`` outside
            ``stein_band``, a per-coordinate ratio outside ``coordinate_stein_band`` (and
            significant: Bonferroni, level 0.01 over ``d``),
            ``score_bias`` above ``max_score_bias`` or ``scaling_flag``.
        collapsed: the exponential average of ``degenerate`` (weight ``1/collapse_patience``
            per step) is above 1/2: degenerate steps dominate the recent past (the first flag
            comes after 7 degenerate steps in a row with the default patience 10).
        nonfinite: True if anything non-finite was met this step (a log-density, a score, the
            duals, the preconditioner). Invalid proposals get zero weight; if the plan itself is
            NaN or the move is not finite, the particles stay where they were this step.
    """

    solver: SolverStats
    coupling_ess: jax.Array
    weight_ess: jax.Array
    weight_temperature: jax.Array
    num_distinct: jax.Array
    effective_rank: jax.Array
    stein_ratio: jax.Array
    stein_ratio_min: jax.Array
    stein_ratio_max: jax.Array
    score_bias: jax.Array
    scaling_ratio_min: jax.Array
    scaling_flag: jax.Array
    num_invalid: jax.Array
    cost_scale: jax.Array
    proposal_step: jax.Array
    mutation_step_size: jax.Array
    acceptance_rate: jax.Array
    degenerate: jax.Array
    collapsed: jax.Array
    nonfinite: jax.Array


class Precision(NamedTuple):
    """Wraps a precision matrix ``P`` (``(d, d)``) passed as ``preconditioner=Precision(P)``:
    the sampler whitens with ``chol(P⁻¹)``."""

    matrix: jax.Array


class LaplaceFit(NamedTuple):
    """The Laplace approximation ``N(mode, LLᵀ)`` from :func:`laplace_preconditioner`.

    Attributes:
        mode: the maximiser of ``logdensity_fn`` ``(d,)`` (the starting point if the optimiser
            produced a non-finite one under tracing).
        chol: lower Cholesky factor ``L`` of the covariance ``(−∇² log π(mode) + λI)⁻¹``;
            always finite.
    """

    mode: jax.Array
    chol: jax.Array


class LaplaceInfo(NamedTuple):
    """How the Laplace fit went.

    Attributes:
        solver: BFGS's :class:`~jaxsample.SolverStats`; ``RESULTS.not_positive_definite`` when
            the Hessian had to be damped (the fit is then usable but is not a Laplace
            approximation at a maximum).
        damping: the ``λ >= 0`` added to the negative Hessian's eigenvalues (0 when it was
            positive definite).
        nonfinite: the optimiser or the Hessian produced a non-finite value (under tracing; an
            eager call raises instead).
    """

    solver: SolverStats
    damping: jax.Array
    nonfinite: jax.Array


def laplace_preconditioner(logdensity_fn: Callable, position, *, max_iterations: int = 500,
                           tolerance: float = 1e-6) -> tuple[LaplaceFit, LaplaceInfo]:
    """Laplace fit of ``π``: its mode by BFGS (optimistix) and ``chol((−∇² log π)⁻¹)`` there.

    Pass ``fit.chol`` as ``etd(..., preconditioner=fit.chol)`` (and start the particles near
    ``fit.mode``). The Hessian is ``jax.hessian`` of ``logdensity_fn`` (``O(d²)`` memory).

    Failures are never a NaN factor: where ``H = −∇² log π(mode)`` is not positive definite
    (a saddle, or BFGS stopped short), its eigenvalues are floored, ``H + λI`` with
    ``λ = max(0, −λ_min(H)) + 10⁻³·mean|λ(H)|``, the damping is reported and
    ``info.solver.result`` is ``RESULTS.not_positive_definite``. When ``logdensity_fn`` is not
    finite at the point the optimiser returns (a start outside the support) an eager call
    raises a ``ValueError`` with the reason; under tracing the fit falls back to
    ``N(position, I)`` with ``info.nonfinite`` set.

    A Laplace factor suits near-Gaussian posteriors: on a funnel or a hierarchical model at
    small scale (eight schools) the mode sits in the neck, the factor is tiny in the directions
    that matter, and a sampler preconditioned with it does worse than none (BFGS reports
    success there: the fit is right, the approximation is not).

    Args:
        logdensity_fn: ``log π(x)`` for one point ``(d,)``.
        position: starting point ``(d,)`` of the optimiser.
        max_iterations: BFGS step cap.
        tolerance: BFGS relative and absolute tolerance.

    Returns:
        ``(LaplaceFit(mode, chol), LaplaceInfo(solver, damping, nonfinite))``.

    Example:
        >>> import jax.numpy as jnp
        >>> fit, info = laplace_preconditioner(lambda x: -0.5 * jnp.sum((x - 1.0)**2 / 4.0),
        ...                                    jnp.zeros(2))
        >>> fit.mode.round(4).tolist(), jnp.diag(fit.chol).round(4).tolist()
        ([1.0, 1.0], [2.0, 2.0])
        >>> bool(info.solver.converged), float(info.damping)
        (True, 0.0)
    """
    import optimistix as optx

    check_callable("logdensity_fn", logdensity_fn)
    position = check_array("position", position, ndim=1, finite=True)
    tolerance = check_number("tolerance", tolerance)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    solution = optx.minimise(lambda x, _: -logdensity_fn(x),
                             optx.BFGS(rtol=tolerance, atol=tolerance), position,
                             max_steps=max_iterations, throw=False)
    mode = solution.value
    mode_ok = jnp.all(jnp.isfinite(mode)) & jnp.isfinite(logdensity_fn(mode))
    if is_concrete(mode_ok) and not bool(mode_ok):
        status = RESULTS[from_optimistix(solution).result] or "converged"
        raise ValueError(
            "laplace_preconditioner: logdensity_fn is not finite at the point the optimiser "
            f"returned after {int(solution.stats['num_steps'])} steps ({status}); start it "
            "where logdensity_fn is finite, or make logdensity_fn finite on the support")
    mode = jnp.where(mode_ok, mode, position)
    precision = -jax.hessian(logdensity_fn)(mode)
    chol, damping, hessian_ok = _damped_chol_of_precision(precision)
    if is_concrete(chol) and not bool(hessian_ok):
        raise ValueError("laplace_preconditioner: the Hessian of logdensity_fn at the mode is "
                         "not finite; check logdensity_fn near the mode")
    nonfinite = ~mode_ok | ~hessian_ok
    chol = jnp.where(hessian_ok, chol, jnp.eye(chol.shape[0], dtype=chol.dtype))
    stats = from_optimistix(solution)
    result = select_result(damping > 0, RESULTS.not_positive_definite, stats.result)
    result = select_result(nonfinite, RESULTS.nonfinite, result)
    return LaplaceFit(mode, chol), LaplaceInfo(SolverStats(stats.num_iterations, result),
                                               damping, nonfinite)


def _damped_chol_of_precision(precision):
    """``chol((P + λI)⁻¹)`` by one eigendecomposition of the symmetrised ``P``; ``λ = 0`` when
    ``P`` is positive definite, else ``−λ_min + 10⁻³·mean|λ|``. Returns
    ``(factor, λ, finite)``."""
    precision = 0.5 * (precision + precision.T)
    finite = jnp.all(jnp.isfinite(precision))
    precision = jnp.where(finite, precision, jnp.eye(precision.shape[0], dtype=precision.dtype))
    eigenvalues, vectors = jnp.linalg.eigh(precision)
    floor = 1e-3 * jnp.mean(jnp.abs(eigenvalues)) + jnp.finfo(precision.dtype).tiny
    damping = jnp.where(eigenvalues[0] > 0, jnp.zeros_like(floor), floor - eigenvalues[0])
    cov = (vectors / (eigenvalues + damping)[None, :]) @ vectors.T
    return jnp.linalg.cholesky(0.5 * (cov + cov.T)), damping, finite


def init(position: jax.Array, num_proposals: int = 25, *,
         preconditioner_state: jax.Array | None = None,
         rng_key: jax.Array | None = None) -> ETDState:
    """Initial state: the particles, zero duals, the preconditioner statistic, step 0, no
    adaptation yet.

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
    dtype = position.dtype
    if preconditioner_state is None:
        preconditioner_state = jnp.zeros((0,), dtype)
    return ETDState(
        position,
        jnp.zeros((n,), dtype),
        jnp.zeros((n * num_proposals,), dtype),
        preconditioner_state,
        jnp.zeros((), jnp.int32),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), bool),
    )


def _count_distinct(picks: jax.Array) -> jax.Array:
    ordered = jnp.sort(picks)
    return (1 + jnp.sum(ordered[1:] != ordered[:-1])).astype(jnp.int32)


def _log_density(logdensity_fn, x, batched=False):
    values = (logdensity_fn(x) if batched else jax.vmap(logdensity_fn)(x)).astype(x.dtype)
    return jnp.where(jnp.isnan(values), -jnp.inf, values)


def _flat_functions(logdensity_fn, score_fn, structure, batched):
    """The density and score as functions of flat points (identities on the flat path), with
    ``"autodiff"`` made ``jax.grad`` of the flat density."""
    logdensity_fn = on_flat(logdensity_fn, structure)
    if isinstance(score_fn, str):
        return logdensity_fn, score_callable(score_fn, logdensity_fn, batched=batched)
    return logdensity_fn, on_flat(score_fn, structure, vector=True)


def _scores(score_fn, x, batched=False):
    return score_fn(x) if batched else jax.vmap(score_fn)(x)


def _raw_score(score_fn, x, batched=False):
    """Scores with non-finite rows zeroed, and whether any was non-finite."""
    s = _scores(score_fn, x, batched).astype(x.dtype)
    ok = jnp.all(jnp.isfinite(s), axis=1, keepdims=True)
    return jnp.where(ok, s, jnp.zeros_like(s)), ~jnp.all(ok)


def _mutate(key, u, log_density, drift, num_steps, step_size):
    """``num_steps`` MALA steps (:func:`jaxsample.kernels.langevin.mala_step`) on every particle,
    or random-walk Metropolis ones (a zero drift) when ``drift`` is None.

    ``log_density(z)`` and ``drift(z)`` act on ``(N, d)`` blocks, in the whitened coordinates
    when the sampler is preconditioned (preconditioned MALA); the drift is the clipped score,
    and any drift leaves ``π`` invariant because the Metropolis–Hastings ratio uses it both
    ways. Returns the particles, the mean acceptance and whether a non-finite value was met.
    """
    dtype = u.dtype
    if drift is None:
        fn = lambda z: (log_density(z), jnp.zeros_like(z))
    else:
        fn = lambda z: (log_density(z), drift(z))

    def one(carry, step_key):
        z, logp, b, bad = carry
        move = langevin.mala_step(step_key, z, logp, b, fn, step_size)
        carry = (move.position, move.logdensity, move.drift, bad | jnp.any(move.nonfinite))
        return carry, jnp.mean(move.is_accepted.astype(dtype))

    logp, b = fn(u)
    bad = ~jnp.all(jnp.isfinite(b))
    (u, _, _, bad), accepted = jax.lax.scan(one, (u, logp, b, bad),
                                            jax.random.split(key, num_steps))
    return u, jnp.mean(accepted), bad


def _at(value, step):
    """A hyper-parameter or the entry of its schedule (1-D) at ``step`` (held at the end)."""
    value = jnp.asarray(value)
    if value.ndim == 0:
        return value
    return value[jnp.minimum(step, value.shape[0] - 1)]


class _Whitening(NamedTuple):
    """This step's coordinates ``u = L⁻¹x``: ``whiten(x) = u``, ``colour(u) = x`` and
    ``pull(s) = Lᵀs`` (a score in ``x`` as a score in ``u``)."""

    whiten: Callable
    colour: Callable
    pull: Callable


def _identity(v):
    return v


_IDENTITY = _Whitening(_identity, _identity, _identity)


def _factor_whitening(chol):
    # L⁻¹ as a matmul (kernels.linalg.triangular_inverse): a triangular solve with the particles
    # as right-hand sides made the preconditioned step ~2-4x the unpreconditioned one on CPU
    inverse = linalg.triangular_inverse(chol)
    return _Whitening(lambda v: v @ inverse.T, lambda u: u @ chol.T, lambda s: s @ chol)


def _scale_whitening(factor):
    return _Whitening(lambda v: v / factor[None, :], lambda u: u * factor[None, :],
                      lambda s: s * factor[None, :])


# The preconditioner protocol: ``update(statistic, x, raw_score, params) -> (statistic,
# whitening, bad)``, with ``raw_score`` the particles' scores (None without a score function)
# and ``params`` the traced hyper-parameters. One function per kind; ``None`` is the identity.

def _fixed_update(statistic, x, raw_score, params):
    return statistic, _factor_whitening(jnp.asarray(params["scale"], x.dtype)), jnp.zeros((), bool)


def _ema_unless_collapsed(statistic, fresh, x, params):
    """``ema·statistic + (1 − ema)·fresh``, except that a cloud whose effective rank fell below
    ``collapse_fraction·min(N − 1, d)`` keeps the old statistic (a collapsed cloud would shrink
    the proposals to nothing and lock itself in)."""
    n, d = x.shape
    mix = jnp.asarray(params["ema"], x.dtype)
    spread = linalg.effective_rank(x) >= jnp.asarray(params["collapse_fraction"], x.dtype) * min(
        n - 1, d)
    return jnp.where(spread, mix * statistic + (1 - mix) * fresh, statistic)


def _ensemble_update(statistic, x, raw_score, params):
    """EMA of the Ledoit–Wolf ensemble covariance (:func:`_ema_unless_collapsed`)."""
    statistic = _ema_unless_collapsed(statistic, linalg.ledoit_wolf(x, params["shrinkage"]), x,
                                      params)
    chol, bad = linalg.safe_cholesky(statistic)
    return statistic, _factor_whitening(chol), bad


def _diagonal_update(statistic, x, raw_score, params):
    """RMSProp on the squared scores (with a score), else an EMA of the particles' variances."""
    beta = jnp.asarray(params["decay"], x.dtype)
    if raw_score is not None:
        statistic = beta * statistic + (1 - beta) * jnp.mean(raw_score**2, axis=0)
        factor = jax.lax.rsqrt(statistic + jnp.asarray(1e-8, x.dtype))
    else:
        statistic = beta * statistic + (1 - beta) * jnp.var(x, axis=0)
        factor = jnp.sqrt(jnp.maximum(statistic, jnp.finfo(x.dtype).tiny))
    return statistic, _scale_whitening(factor), jnp.zeros((), bool)


def _fisher_statistic(x, raw_score, shrinkage):
    """The pair ``(C, S)``: the Ledoit–Wolf covariances of the particles and of their scores
    ``(2, d, d)``, each score first clipped to 10× the median score norm: far from the
    posterior a few particles' scores reach 10²⁰ (stochastic volatility from N(0, I)), whose
    squares overflow float32; in the bulk the clip does not bind. Norms are taken of rows
    divided by their largest entry, so the clip itself does not overflow."""
    peak = jnp.max(jnp.abs(raw_score), axis=1, keepdims=True)
    peak = jnp.where(peak > 0, peak, jnp.ones_like(peak))
    norms = peak * jnp.linalg.norm(raw_score / peak, axis=1, keepdims=True)
    cap = 10 * jnp.median(norms) + jnp.finfo(x.dtype).tiny
    score = raw_score * jnp.minimum(1, cap / jnp.maximum(norms, jnp.finfo(x.dtype).tiny))
    return jnp.stack([linalg.ledoit_wolf(x, shrinkage), linalg.ledoit_wolf(score, shrinkage)])


def _fisher_update(statistic, x, raw_score, params):
    """EMAs of the particles' and the scores' covariances (:func:`_ema_unless_collapsed`),
    whitening with their geometric mean (:func:`jaxsample.kernels.linalg.fisher_covariance`):
    the target's covariance on a Gaussian whatever the cloud's spread, so a cloud too narrow or
    too wide is not locked in (the ensemble covariance alone is)."""
    if raw_score is None:
        raise ValueError("preconditioner='fisher' needs a score function")
    statistic = _ema_unless_collapsed(
        statistic, _fisher_statistic(x, raw_score, params["shrinkage"]), x, params)
    chol, bad = linalg.safe_cholesky(linalg.fisher_covariance(statistic[0], statistic[1]))
    return statistic, _factor_whitening(chol), bad


_PRECONDITIONER_UPDATES = {"fixed": _fixed_update, "ensemble": _ensemble_update,
                           "fisher": _fisher_update,
                           "diagonal": _diagonal_update}


@functools.cache
def build_kernel(
    *,
    coupling: str = "balanced",
    update: str = "categorical",
    mutation_steps: int = 2,
    warm_start: bool = False,
    max_iterations: int = 200,
    chunk_size: int | None = None,
    preconditioner: str | None = None,
    cost: str = "euclidean",
    batched: bool = False,
    criterion: str = "marginal",
    collapse_patience: int = 10,
) -> Callable:
    """The ETD transition for a static structure (cached: equal structure, same function).

    Args:
        coupling: ``"balanced"``, ``"unbalanced"`` or ``"gibbs"``.
        update: ``"categorical"`` or ``"barycentric"``.
        mutation_steps: π-invariant MALA / random-walk Metropolis steps after the update.
        warm_start: start Sinkhorn from the state's duals.
        max_iterations: Sinkhorn's iteration cap.
        chunk_size: particle rows per block of every ``N × P`` interaction, or None (dense).
        preconditioner: None, ``"fixed"`` (the kernel's ``scale`` argument), ``"ensemble"``,
            ``"fisher"`` (needs ``score_fn``) or ``"diagonal"``.
        cost: ``"euclidean"`` (``½‖x_i − y_j‖²``) or ``"langevin"`` (``½‖m_i − y_j‖²``, the
            Langevin-residual cost), both in whitened coordinates and median-normalised.
        batched: ``logdensity_fn`` / ``score_fn`` take ``(n, d)`` blocks.
        criterion: Sinkhorn's stopping rule, ``"marginal"`` or ``"dual"``
            (see :func:`jaxsample.kernels.transport.solve_coupling`).
        collapse_patience: memory of the verdict in steps: ``collapsed`` is raised when the
            exponential average of ``degenerate`` with weight ``1/collapse_patience`` exceeds
            1/2.

    Returns:
        ``kernel(key, state, logdensity_fn, score_fn=None, *, epsilon, proposal_step,
        step_fraction, mutation_step_size, rho, score_clip, tolerance, scale, shrinkage,
        ema, decay, min_weight_ess, target_weight_ess, target_acceptance,
        proposal_adaptation_rate, mutation_adaptation_rate, proposal_follows_mutation,
        collapse_fraction, stein_band, coordinate_stein_band, max_score_bias, scaling_band)
        -> (ETDState, ETDInfo)``. The float arguments may be traced;
        ``epsilon`` and ``proposal_step`` may be 1-D schedules indexed by ``state.step``;
        ``score_clip = 0`` means no clipping. Inputs are valid (:func:`etd` checked them).
    """

    def kernel(key: jax.Array, state: ETDState, logdensity_fn: Callable,
               score_fn: Callable | None = None, *, epsilon, proposal_step, step_fraction=1.0,
               mutation_step_size=None, rho=1.0, score_clip=5.0, tolerance=1e-2, scale=None,
               shrinkage=None, ema=0.9, decay=0.9, min_weight_ess=0.0, target_weight_ess=0.5,
               target_acceptance=0.574, proposal_adaptation_rate=0.0,
               mutation_adaptation_rate=0.0, proposal_follows_mutation=0.0,
               collapse_fraction=0.1,
               stein_band=(0.6, 1.6), coordinate_stein_band=(0.3, 3.0), max_score_bias=0.05,
               scaling_band=(0.5, 1.5)) -> tuple[ETDState, ETDInfo]:
        with jax.named_scope("etd_step"):
            x, structure = ravel(state.positions, 1)
            logdensity_fn, score_fn = _flat_functions(logdensity_fn, score_fn, structure,
                                                      batched)
            n, d = x.shape
            dtype = x.dtype
            num_proposals = state.g.shape[0] // n
            cast = lambda v: jnp.asarray(v, dtype)
            eps = cast(_at(epsilon, state.step))
            log_alpha_scale = state.log_step_scale
            if mutation_steps > 0:
                log_alpha_scale = log_alpha_scale + cast(proposal_follows_mutation) * (
                    state.log_mutation_scale)
            alpha = cast(_at(proposal_step, state.step)) * jnp.exp(log_alpha_scale)
            eta, clip = cast(step_fraction), cast(score_clip)
            h_base = (cast(_at(proposal_step, state.step)) if mutation_step_size is None
                      else cast(mutation_step_size))
            h_mutation = h_base * jnp.exp(state.log_mutation_scale)
            key_prop, key_pick, key_mut = jax.random.split(key, 3)
            sigma = jnp.sqrt(2 * alpha)

            with jax.named_scope("preconditioner"):
                raw_score, bad_score = None, jnp.zeros((), bool)
                if score_fn is not None:
                    raw_score, bad_score = _raw_score(score_fn, x, batched)
                if preconditioner is None:
                    statistic, white, bad_pre = (state.preconditioner, _IDENTITY,
                                                 jnp.zeros((), bool))
                else:
                    params = dict(scale=scale, shrinkage=shrinkage, ema=ema, decay=decay,
                                  collapse_fraction=collapse_fraction)
                    statistic, white, bad_pre = _PRECONDITIONER_UPDATES[preconditioner](
                        state.preconditioner, x, raw_score, params)

            def log_density_w(u):
                return _log_density(logdensity_fn, white.colour(u), batched)

            def drift_w(u):
                score = _scores(score_fn, white.colour(u), batched).astype(dtype)
                return linalg.clip_by_norm(white.pull(score), clip)

            with jax.named_scope("proposals"):
                u = white.whiten(x)
                if score_fn is not None:
                    centres = u + alpha * linalg.clip_by_norm(white.pull(raw_score), clip)
                    ratios = stein.linear_ratios(x, raw_score)
                    stein_mean, stein_min, stein_max = (jnp.mean(ratios), jnp.min(ratios),
                                                        jnp.max(ratios))
                    bias = stein.score_bias(raw_score)
                    coordinate_bad = stein.outside_band(
                        ratios, stein.linear_z(x, raw_score), coordinate_stein_band[0],
                        coordinate_stein_band[1], STEIN_LEVEL)
                    scaling, scaling_z = stein.scaling_ratios(x, raw_score)
                    scaling_bad = stein.outside_band(scaling, scaling_z, scaling_band[0],
                                                     scaling_band[1], STEIN_LEVEL)
                    scaling_min = jnp.min(scaling)
                else:
                    centres = u
                    stein_mean = stein_min = stein_max = bias = scaling_min = jnp.full(
                        (), jnp.nan, dtype)
                    scaling_bad = coordinate_bad = jnp.zeros((), bool)
                noise = jax.random.normal(key_prop, (n * num_proposals, d), dtype)
                proposals = jnp.repeat(centres, num_proposals, axis=0) + sigma * noise
                log_target = log_density_w(proposals)

            log_b, num_invalid = transport.proposal_log_weights(
                log_target, proposals, centres, sigma, chunk_size=chunk_size)
            weight_ess = jnp.exp(logspace.log_ess(log_b))
            log_b, temperature = logspace.temper_to_ess(log_b, cast(min_weight_ess) * n)
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
            rank = linalg.effective_rank(u_new)
            if update == "categorical":
                num_distinct = _count_distinct(rows.picks)
            else:
                num_distinct = jnp.asarray(n, jnp.int32)
            if mutation_steps > 0:
                with jax.named_scope("mutation"):
                    drift_fn = None if score_fn is None else drift_w
                    u_new, acceptance, bad_mut = _mutate(key_mut, u_new, log_density_w,
                                                         drift_fn, mutation_steps, h_mutation)
            else:
                acceptance, bad_mut = jnp.ones((), dtype), jnp.zeros((), bool)
            x_new = white.colour(u_new)
            if preconditioner is not None:
                # particles that did not move keep their positions exactly (whitening and
                # colouring back would round them), and a non-finite colouring moves none
                stayed = jnp.all(u_new == u, axis=1, keepdims=True)
                x_new = jnp.where(stayed | ~jnp.all(jnp.isfinite(x_new)), x, x_new)

            with jax.named_scope("adaptation"):
                # the proposal step follows the raw weight ESS towards target·N (the weights
                # stay exact: α is fixed within a step); the mutation step follows the
                # acceptance rate towards its target (Robbins–Monro on the log scale)
                ess_gap = jnp.log(jnp.maximum(weight_ess, 1.0) / n) - jnp.log(
                    cast(target_weight_ess))
                log_step_scale = jnp.clip(
                    state.log_step_scale + cast(proposal_adaptation_rate) * ess_gap,
                                          -_MAX_LOG_SCALE, _MAX_LOG_SCALE)
                log_mutation_scale = state.log_mutation_scale
                if mutation_steps > 0:
                    log_mutation_scale = jnp.clip(
                        log_mutation_scale + cast(mutation_adaptation_rate)
                        * (acceptance - cast(target_acceptance)),
                        -_MAX_LOG_SCALE, _MAX_LOG_SCALE)
                ok_scales = jnp.isfinite(log_step_scale) & jnp.isfinite(log_mutation_scale)
                log_step_scale = jnp.where(ok_scales, log_step_scale, state.log_step_scale)
                log_mutation_scale = jnp.where(ok_scales, log_mutation_scale,
                                               state.log_mutation_scale)

            with jax.named_scope("verdict"):
                threshold = cast(collapse_fraction)
                low, high = cast(stein_band[0]), cast(stein_band[1])
                degenerate = ((num_distinct.astype(dtype) < threshold * n)
                              | (rank < threshold * min(n - 1, d))
                              | (weight_ess < 1.5)
                              | (stein_mean < low) | (stein_mean > high)
                              | coordinate_bad
                              | (bias > cast(max_score_bias))
                              | scaling_bad)
                memory = 1 - 1 / collapse_patience
                rate = memory * state.degenerate_rate + (1 - memory) * degenerate.astype(dtype)
                collapsed = rate > 0.5

            duals_ok = jnp.all(jnp.isfinite(plan.f)) & jnp.all(jnp.isfinite(plan.g))
            f = jnp.where(duals_ok, plan.f, jnp.zeros_like(plan.f))
            g = jnp.where(duals_ok, plan.g, jnp.zeros_like(plan.g))
            statistic_ok = jnp.all(jnp.isfinite(statistic))
            statistic = jnp.where(statistic_ok, statistic, state.preconditioner)
            info = ETDInfo(
                solver=SolverStats.of(plan.num_iterations, converged=plan.converged),
                coupling_ess=jnp.mean(rows.row_ess),
                weight_ess=weight_ess,
                weight_temperature=temperature,
                num_distinct=num_distinct,
                effective_rank=rank,
                stein_ratio=stein_mean,
                stein_ratio_min=stein_min,
                stein_ratio_max=stein_max,
                score_bias=bias,
                scaling_ratio_min=scaling_min,
                scaling_flag=scaling_bad,
                num_invalid=num_invalid,
                cost_scale=scale_c,
                proposal_step=alpha,
                mutation_step_size=h_mutation,
                acceptance_rate=acceptance,
                degenerate=degenerate,
                collapsed=collapsed,
                nonfinite=((num_invalid > 0) | bad_score | bad_mut | ~duals_ok | bad_pre
                           | ~statistic_ok),
            )
            new_state = ETDState(unravel(x_new, structure), f, g, statistic, state.step + 1,
                                 log_step_scale, log_mutation_scale, rate, collapsed)
            return new_state, info

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


def _preconditioner(value):
    """``(kind, scale)`` from the ``preconditioner`` argument."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return check_choice("preconditioner", value, PRECONDITIONERS), None
    if isinstance(value, Precision):
        matrix = check_array("preconditioner", value.matrix, ndim=2, finite=True)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"preconditioner must be a square (d, d) matrix, got {matrix.shape}")
        scale, damping, _ = _damped_chol_of_precision(matrix)
        if is_concrete(damping) and float(damping) > 0:
            raise ValueError("preconditioner: the precision matrix is not positive definite")
    else:
        scale = check_array("preconditioner", value, ndim=2, finite=True)
    if scale.shape[0] != scale.shape[1]:
        raise ValueError(f"preconditioner must be a square (d, d) matrix, got {scale.shape}")
    if is_concrete(scale):
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
    mutation_steps: int = 2,
    mutation_step_size: float | None = None,
    rho: float = 1.0,
    score_clip: float | None = 5.0,
    preconditioner="ensemble",
    shrinkage: float | None = None,
    ema: float = 0.9,
    decay: float = 0.9,
    cost: str = "euclidean",
    min_weight_ess: float | None = None,
    target_weight_ess: float = 0.5,
    target_acceptance: float = 0.574,
    proposal_adaptation_rate: float = 0.0,
    mutation_adaptation_rate: float = 0.5,
    proposal_follows_mutation: bool = True,
    collapse_fraction: float = 0.1,
    stein_band=(0.6, 1.6),
    coordinate_stein_band=(0.3, 3.0),
    max_score_bias: float = 0.05,
    scaling_band=(0.5, 1.5),
    collapse_patience: int = 10,
    batched: bool = False,
    warm_start: bool = False,
    tolerance: float = 1e-2,
    criterion: str = "marginal",
    max_iterations: int = 200,
    chunk_size: int | None = None,
) -> SamplingAlgorithm:
    """Entropic transport descent (ETD) particle sampler.

    See the module docstring for the update rule, the adaptive defaults and how to choose
    ``epsilon``, ``proposal_step`` and ``preconditioner``. Without ``score_fn`` the sampler is
    score-free: it evaluates only ``logdensity_fn`` and never differentiates it. Every float
    argument is a traced value of the step (sweeps and ``jax.vmap`` over it share one
    compilation).

    Args:
        logdensity_fn: ``log π(x)`` up to a constant for one point ``x`` of shape ``(d,)`` or a
            pytree (a dict of parameters, …), returning a scalar (``batched=True``: ``(n, d) ->
            (n,)``). NaN or ±inf values are allowed: such proposals get zero weight.
        score_fn: ``"autodiff"`` (differentiate ``logdensity_fn`` inside the compiled step:
            the cache key is the density alone, so a sweep over any float hyper-parameter
            compiles once; an inline ``jax.grad(logdensity_fn)`` is recognised as the same),
            ``∇ log π(x)`` for one point as your own function, or None for the score-free
            sampler (random-walk proposals, random-walk Metropolis mutation).
        num_proposals: proposals per particle ``M >= 1``; the pool has ``P = N·M`` points.
        epsilon: entropic regularisation ``ε > 0`` relative to the median cost; or a 1-D array,
            a schedule (entry ``t`` at step ``t``, the last one held).
        proposal_step: the initial ``α > 0`` in whitened units: centres move by
            ``α·Σ·score``, proposal std ``√(2α)`` (whitened); or a 1-D schedule. With
            ``proposal_adaptation_rate > 0`` the sampler rescales it every step
            (``info.proposal_step``).
        coupling: ``"balanced"`` (Sinkhorn, both marginals), ``"unbalanced"`` (KL penalty ``ρ``
            on the proposal marginal) or ``"gibbs"`` (semi-relaxed, one pass, no iterations).
        update: ``"categorical"`` (draw a proposal from the row) or ``"barycentric"`` (row mean).
        step_fraction: damping ``η ∈ (0, 1]``: ``x ← (1−η)x + η·target``.
        mutation_steps: π-invariant (preconditioned) MALA / random-walk Metropolis steps after
            each update (default 2; 0 is the paper's plain ETD step).
        mutation_step_size: the initial step ``h`` of the mutation kernel (default:
            ``proposal_step``), adapted towards ``target_acceptance``.
        rho: unbalanced KL weight ``ρ > 0`` (``"unbalanced"`` only).
        score_clip: whitened scores are rescaled to at most this norm; ``None``, ``0`` or
            ``inf``: no clipping (the reference code's convention).
        preconditioner: ``"ensemble"`` (default), ``None`` (identity: the unpreconditioned
            sampler, the paper's), a fixed lower
            Cholesky factor ``L`` of a covariance (e.g. :func:`laplace_preconditioner`'s
            ``chol``) or ``Precision(P)``, ``"ensemble"`` (the particles' Ledoit–Wolf-shrunk
            covariance, an EMA, frozen while the cloud's effective rank is below the collapse
            threshold), ``"fisher"`` (the geometric mean of the particles' covariance and the
            inverse of their scores' covariance, each an EMA, frozen like ``"ensemble"``: the
            target's covariance on a Gaussian however wrong the cloud's spread; needs a score
            and, with ``shrinkage=0``, more particles than dimensions; see "Hard posteriors")
            or ``"diagonal"`` (RMSProp on the squared scores, or the particles'
            variances without a score). Proposals, cost and mutation live in the whitened
            coordinates ``L⁻¹x``; the importance weights are exact for the proposal used
            (``L`` is fixed within a step and ``|det L|`` cancels).
        shrinkage: ``"ensemble"`` and ``"fisher"``: Ledoit–Wolf intensity ``λ ∈ [0, 1]``
            towards ``(tr Σ/d) I``; None estimates it (Ledoit & Wolf 2004). With
            ``"fisher"`` shrinkage spoils the mean on an ill-conditioned target
            (:data:`ETD_HARD` sets 0).
        ema: ``"ensemble"`` and ``"fisher"``: weight ``∈ [0, 1)`` of the previous
            statistic (0: none).
        decay: ``"diagonal"``: RMSProp decay ``β ∈ [0, 1)``.
        cost: ``"euclidean"`` (``½‖x_i − y_j‖²``, Mahalanobis when preconditioned) or
            ``"langevin"`` (``½‖m_i − y_j‖²`` from the Langevin centres: the reference code's
            LRET cost up to its scale, which the median normalisation removes).
        min_weight_ess: the weight guard, a fraction of ``N``: when the importance weights' ESS
            falls below ``min_weight_ess·N`` they are tempered, ``b ∝ b^β`` with the largest
            ``β`` that restores it (``info.weight_temperature``). Tempered weights target
            ``q^{1−β}π^β``, not ``π``: the mutation steps pull the cloud back. None (default):
            0.1 with mutation steps, off (0) without.
        target_weight_ess: the proposal step adapts so the raw weight ESS stays near
            ``target_weight_ess·N`` (it grows while the ESS is above, shrinks below).
        target_acceptance: the mutation step adapts towards this mean acceptance.
        proposal_adaptation_rate: gain ``κ`` of the proposal step's adaptation,
            ``log α ← log α + κ·log(ESS/(target_weight_ess·N))`` (kept within ``10^±3`` of
            ``proposal_step``); 0 (default) keeps ``α`` fixed. Off by default, by measurement:
            the weight ESS is not monotone in ``α`` (for small ``α`` the pool sits on the
            particles and the weights are ``∝ π(x_i)``, degenerate in high dimension), so on
            ``N(0, I₅₀)`` chasing the target drove ``α`` down and the DAMV from 0.99 to 0.47.
        mutation_adaptation_rate: gain ``κ`` of the mutation step's adaptation,
            ``log h ← log h + κ·(acceptance − target_acceptance)`` (within ``10^±3`` of ``h``);
            0 keeps ``h`` fixed.
        proposal_follows_mutation: with mutation steps, the proposal step is rescaled with the
            mutation step, ``α_t = α·h_t/h`` (times the proposal adaptation's own factor): the
            MALA step adapted to its acceptance target measures the target's local scale, and
            the proposals take it. This is what lets one default ``α`` serve posteriors whose
            scales differ by orders of magnitude.
        collapse_fraction: a step is degenerate when it takes fewer than this fraction of ``N``
            distinct proposals, when the cloud's effective rank falls below this fraction of
            ``min(N − 1, d)``, or when one proposal holds the weight (ESS < 1.5).
        stein_band: ``(low, high)``: a step is degenerate when ``info.stein_ratio`` (the
            cloud's spread relative to ``π``'s by Stein's identity; needs ``score_fn``) falls
            outside it: about sd ratios ``√low``–``√high`` on a Gaussian.
        coordinate_stein_band: ``(low, high)`` for the smallest and largest per-coordinate
            Stein ratio (``info.stein_ratio_min``/``max``): wider than ``stein_band`` because
            one coordinate's ratio is noisier (sd about ``√(2/N)`` on a standard Gaussian, 0.14
            for 100 particles, and far more where a coordinate's score mixes stiff directions:
            exact draws of the ill-conditioned Gaussian of the bench reach ratios of −1 and
            3.8). A coordinate counts only when its ratio is outside the band *and* its
            z-score (:func:`jaxsample.kernels.stein.linear_z`) passes the Bonferroni bound at
            level 0.01 over the ``d`` coordinates.
        max_score_bias: a step is degenerate when ``info.score_bias`` (the cloud's mean offset
            as a mean squared number of posterior sds, by ``E_π[∇log π] = 0``; needs
            ``score_fn``) exceeds it.
        scaling_band: ``(low, high)`` for the scale-mixture Stein test (``info.scaling_flag``,
            needs ``score_fn``): a step is degenerate when some coordinate's scaling ratio is
            outside it and significant (Bonferroni, level 0.01 over ``d``).
        collapse_patience: memory of the verdict in steps (``collapsed`` when the exponential
            average of the per-step ``degenerate`` with weight ``1/collapse_patience`` exceeds
            1/2: after 7 degenerate steps in a row for 10).
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
        (``position`` ``(N, d)``, or a pytree whose leaves share the leading ``N``: flattened
        once, and ``state.positions`` comes back in the same structure; finite, floating; an
        eager ``init`` refuses a start where ``logdensity_fn`` is finite at no particle) and
        ``step(key, state) -> (ETDState, ETDInfo)``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
        >>> alg = jaxsample.etd(logdensity, num_proposals=5)
        >>> state = alg.init(2.0 * jax.random.normal(jax.random.key(0), (50, 2)))
        >>> state, info = jaxsample.run(jax.random.key(1), alg, state, num_steps=20)
        >>> state.positions.shape, info.solver.num_iterations.shape, bool(state.collapsed)
        ((50, 2), (20,), False)
    """
    check_callable("logdensity_fn", logdensity_fn)
    score_fn = resolve_score_fn(score_fn, logdensity_fn, default=None)
    num_proposals = check_int("num_proposals", num_proposals, 1)
    mutation_steps = check_int("mutation_steps", mutation_steps, 0)
    kind, scale = _preconditioner(preconditioner)
    if kind == "fisher" and score_fn is None:
        raise ValueError("preconditioner='fisher' needs a score: pass score_fn='autodiff' (or "
                         "your own), or choose preconditioner='ensemble'")
    if min_weight_ess is None:
        min_weight_ess = 0.1 if mutation_steps > 0 else 0.0
    hyper = dict(
        epsilon=_schedule("epsilon", epsilon),
        proposal_step=_schedule("proposal_step", proposal_step),
        step_fraction=check_hyperparameter("step_fraction", step_fraction, maximum=1.0),
        mutation_step_size=check_hyperparameter("mutation_step_size", mutation_step_size,
                                                allow_none=True),
        rho=check_hyperparameter("rho", rho),
        score_clip=_score_clip(score_clip),
        tolerance=check_hyperparameter("tolerance", tolerance),
        min_weight_ess=check_hyperparameter("min_weight_ess", min_weight_ess, positive=False),
        target_weight_ess=check_hyperparameter("target_weight_ess", target_weight_ess),
        target_acceptance=check_hyperparameter("target_acceptance", target_acceptance,
                                               maximum=1.0),
        proposal_adaptation_rate=check_hyperparameter(
            "proposal_adaptation_rate", proposal_adaptation_rate, positive=False),
        mutation_adaptation_rate=check_hyperparameter(
            "mutation_adaptation_rate", mutation_adaptation_rate, positive=False),
        proposal_follows_mutation=np.asarray(float(bool(proposal_follows_mutation))),
        collapse_fraction=check_hyperparameter("collapse_fraction", collapse_fraction,
                                               positive=False, maximum=1.0),
        stein_band=check_band("stein_band", stein_band, around=1.0),
        coordinate_stein_band=check_band("coordinate_stein_band", coordinate_stein_band,
                                         around=1.0),
        max_score_bias=check_hyperparameter("max_score_bias", max_score_bias),
        scaling_band=check_band("scaling_band", scaling_band, around=1.0),
    )
    if kind == "fixed":
        hyper["scale"] = scale
    elif kind in ("ensemble", "fisher"):
        hyper["shrinkage"] = check_hyperparameter("shrinkage", shrinkage, positive=False,
                                                  allow_none=True, maximum=1.0)
        hyper["ema"] = check_hyperparameter("ema", ema, positive=False, maximum=0.999)
    elif kind == "diagonal":
        hyper["decay"] = check_hyperparameter("decay", decay, positive=False, maximum=0.999)
    kernel = build_kernel(
        coupling=check_choice("coupling", coupling, transport.COUPLINGS),
        update=check_choice("update", update, transport.UPDATES),
        mutation_steps=mutation_steps,
        warm_start=bool(warm_start),
        max_iterations=check_int("max_iterations", max_iterations, 1),
        chunk_size=check_chunk_size(chunk_size),
        preconditioner=kind,
        cost=check_choice("cost", cost, COSTS),
        batched=bool(batched),
        criterion=check_choice("criterion", criterion, transport.CRITERIA),
        collapse_patience=check_int("collapse_patience", collapse_patience, 1),
    )
    step = Step(kernel, logdensity_fn=logdensity_fn, score_fn=score_fn, **hyper)

    def init_fn(position, *, rng_key: jax.Array | None = None) -> ETDState:
        position = check_position("position", position, batch_ndim=1)
        flat, structure = ravel(position, 1)
        flat = check_array("position", flat, ndim=2, min_rows=2)
        d = flat.shape[1]
        log_fn, flat_score = _flat_functions(logdensity_fn, score_fn, structure, batched)
        point = jax.ShapeDtypeStruct((2, d) if batched else (d,), flat.dtype)
        check_fn_output("logdensity_fn", log_fn, point, (2,) if batched else ())
        if flat_score is not None:
            check_fn_output("score_fn", flat_score, point, point.shape)
        if kind == "fixed" and scale.shape != (d, d):
            raise ValueError(f"preconditioner must have shape ({d}, {d}), got {scale.shape}")
        check_initial_logdensity("logdensity_fn", logdensity_fn,
                                 _log_density(log_fn, flat, batched), position, batch_ndim=1)
        statistic = None
        if kind == "ensemble":
            statistic = linalg.ledoit_wolf(flat, hyper["shrinkage"])
        elif kind == "fisher":
            shrinkage = hyper["shrinkage"]
            shrinkage_off = (shrinkage is not None and is_concrete(shrinkage)
                             and float(shrinkage) == 0)
            if shrinkage_off and flat.shape[0] <= d:
                raise ValueError(
                    f"position: preconditioner='fisher' with shrinkage=0 needs more particles "
                    f"than dimensions (the covariances of the particles and of their scores are "
                    f"singular otherwise), got N = {flat.shape[0]} for d = {d}; use N >= 2d, or "
                    "shrinkage=None")
            raw, _ = _raw_score(flat_score, flat, batched)
            statistic = _fisher_statistic(flat, raw, hyper["shrinkage"])
        elif kind == "diagonal":
            if flat_score is not None:
                raw, _ = _raw_score(flat_score, flat, batched)
                statistic = jnp.mean(raw**2, axis=0)
            else:
                statistic = jnp.var(flat, axis=0)
        state = init(flat, num_proposals, preconditioner_state=statistic, rng_key=rng_key)
        return state._replace(positions=unravel(state.positions, structure))

    return SamplingAlgorithm(init_fn, step)
