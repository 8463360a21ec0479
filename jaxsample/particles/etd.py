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
   column marginal) or Gibbs (``γ_ij ∝ b_j e^{−C_ij/ε}`` row by row, no iterations). Sinkhorn
   duals are carried in the state and can warm-start the next step
   (``sinkhorn=Sinkhorn(warm_start=True)``).
4. **Update.** ``x_i ← (1−η) x_i + η y_{j_i}`` with ``j_i ~ Cat(γ_i· / Σ_j γ_ij)`` (categorical:
   for the balanced plan the expected number of particles landing on ``y_j`` is ``N b_j``, an
   unbiased resampling of the weighted pool in which the plan decides who goes where) or the row
   barycentre ``Σ_j γ̃_ij y_j`` (deterministic, but shrinks the spread). ``η`` is ``step_fraction``.
5. **Mutation** (``mutation=Mutation(steps=...)``, default 2; 0 is the paper's plain step): MALA
   steps (with a score) or random-walk Metropolis steps (without), each leaving ``π`` invariant;
   they restore diversity after resampling and pull back what the weight guard biased.

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
eight schools, German credit, the Brownian bridge and the banana (sd ratio 0.93–1.05, mean
bias² ≤ 0.014; the table of 2026-12-08), and on radon, stochastic volatility and an
ill-conditioned Gaussian (d = 90–103) it is not, and raises ``collapsed``
(:data:`ETD_HARD` below calibrates it there); on Neal's funnel the cloud stays in the neck,
and the scale-mixture Stein test below raises ``collapsed``. So by default:

- ``Mutation(steps=2)``: π-invariant MALA moves after every update, their step adapted towards
  0.574 acceptance (``Mutation.adaptation_rate``). The proposal step follows it only while the
  weight guard tempers (``ProposalAdaptation(follows_mutation="tempered")``, by ``1 − β``):
  tempered weights target ``q^{1−β}π^β``, wider than ``π`` by the proposals' width, and with
  a fixed step the cloud widened without bound at ``d ≳ 30`` (Brownian bridge sd ratio 250);
  with exact weights following only hurt (two modes in d = 10: the minority mode emptied,
  mode-weight TV 0.30 against a floor of 0.026; the DAMV at d = 50 fell to 0.75).
- ``min_weight_ess=0.1``: weights whose ESS falls below ``0.1·N`` are tempered to it
  (``b ∝ b^β``); tempered weights target ``q^{1−β}π^β``, and the mutation steps pull the cloud
  back to ``π``. Off without mutation steps, where nothing would correct the bias.
- ``preconditioner="ensemble"``: the proposals, cost and mutation run in the coordinates
  whitened by the particles' shrunk covariance (below). On the suite it is what turned the
  collapses at ``d = 21–30`` into calibrated clouds (with the mutation steps but without it,
  500 steps: German credit sd ratio 0.66 and Brownian bridge 0.54, both flagged; with it 1.01
  and 0.94; the paper's plain step collapses both to one particle).
- The proposal step is *not* adapted to a weight-ESS band by default
  (``ProposalAdaptation.rate = 0``): the ESS is not monotone in ``α`` (for small ``α`` the pool
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
- ``Fisher(shrinkage=0)``: Ledoit–Wolf shrinkage pulls both towards isotropy and spoils the
  mean on an ill-conditioned target (sd ratio 0.54 with shrinkage against 0.95 without, d = 100,
  ``N = 256``);
- ``score_clip=50``: the whitened drift is clipped only far from the posterior (a typical
  whitened score has norm ``√d``: 10 at d = 100, 32 at d = 1 000), where an unclipped drift
  threw particles of radon out to where the density overflows (every step non-finite, sd
  ratio 2.9) and the clip at 5 of the defaults would make MALA a random walk;
- ``Mutation(steps=16)``: the transport step's weights are degenerate at ``d ≈ 100`` (weight
  ESS 2–3 of ``N·M``, tempered), so the π-invariant moves carry the sampling; with 8 moves the
  hierarchical scales of radon and stochastic volatility were borderline after 500 steps (sd
  ratio 0.84–0.86, mean bias² 0.04–0.06), with 16 they are not (0.92–0.94, 0.015).

**The verdict.** Every step records evidence that the cloud is not a sample of ``π`` (the
flag ``info.degenerate``; the thresholds are :class:`jaxsample.diagnostics.CollapseCriteria`,
``verdict=``): fewer than ``fraction·N`` distinct proposals taken, the
cloud's effective rank below ``fraction·min(N − 1, d)``, one proposal holding the
weight (ESS < 1.5), and, with a score, three Stein tests that need no reference:
``E_π[(x − c)·∇log π(x)] = −d`` gives ``info.stein_ratio`` (the cloud's spread against ``π``'s,
about the squared sd ratio on a Gaussian; degenerate outside ``stein_band = (0.6, 1.6)`` and
significant at level 0.01, or
one coordinate's ratio outside ``coordinate_stein_band = (0.3, 3)`` and significant at the
Bonferroni level 0.01 over the coordinates) and
``E_π[∇log π] = 0`` gives ``info.score_bias`` (about the mean bias² in posterior sds;
degenerate above 0.05), and the scale-mixture test of
:func:`jaxsample.kernels.stein.scaling_ratios` gives ``info.scaling_flag`` (each coordinate's
Stein term along the field that also dilates the others: it sees a cloud stuck in a funnel's
neck, right in every local spread and wrong along the funnel; degenerate when a coordinate's
ratio is outside ``scaling_band = (0.5, 1.5)`` and significant). ``collapsed`` is raised
when degenerate steps dominate the recent past (an exponential average with memory
``patience = 10`` steps above 1/2); an eager :func:`jaxsample.run` then warns once,
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
weights then pile onto a few proposals and the ensemble collapses. With a preconditioner ``L`` (``Σ
= LLᵀ`` a covariance scale), every step runs in the whitened coordinates ``L⁻¹x``: centres ``m = x +
αΣ∇log π``, proposals ``m + √(2α)Lξ``, the Mahalanobis cost, preconditioned MALA, and ``α`` is then
in whitened units. ``"ensemble"`` whitens with the particles' Ledoit–Wolf covariance averaged over
steps (``Ensemble(ema=0.9)``); the average keeps one degenerate step (weight ESS ≈ 1, every particle
on one proposal, covariance 0) from shrinking the proposals to nothing, and the statistic is frozen
while the cloud's effective rank is below the collapse threshold, so a collapsed cloud cannot lock
it in. A fixed factor from :func:`~jaxsample.particles.laplace_preconditioner` suits a unimodal,
near-Gaussian posterior (BLR after 300 steps, sd ratio / mean error in posterior sds against NUTS:
0.98 / 0.15 on breast cancer, d = 31; 0.99 / 0.06 on German credit, d = 21) and not a funnel or a
hierarchical model at small scale. ``"diagonal"`` suits axis-aligned scales. On multimodal targets
the ensemble covariance is dominated by the distance between modes.
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
    check_callable,
    check_choice,
    check_chunk_size,
    check_fn_output,
    check_hyperparameter,
    check_initial_logdensity,
    check_int,
    check_position,
    is_concrete,
    resolve_score_fn,
    score_callable,
)
from jaxsample._pytree import on_flat, ravel, unravel
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.diagnostics.criteria import CollapseCriteria
from jaxsample.kernels import linalg, logspace, stein, transport
from jaxsample.kernels.solver import SolverStats
from jaxsample.particles import preconditioners
from jaxsample.particles.options import Mutation, ProposalAdaptation, Sinkhorn

__all__ = [
    "ETD_HARD",
    "ETDInfo",
    "ETDState",
    "build_kernel",
    "etd",
    "init",
]

COSTS = ("euclidean", "langevin")

# Every default of the method, defined once: etd(), build_kernel() and its kernel read these
NUM_PROPOSALS = 25
EPSILON = 0.1
PROPOSAL_STEP = 0.5
STEP_FRACTION = 1.0
SCORE_CLIP = 5.0
PRECONDITIONER = "ensemble"
# the option objects are immutable (equinox modules), so one instance serves every call
_DEFAULT_PRECONDITIONER = preconditioners.resolve(PRECONDITIONER)
MUTATION = Mutation()
PROPOSAL_ADAPTATION = ProposalAdaptation()
SINKHORN = Sinkhorn()
VERDICT = CollapseCriteria()

# the documented switch for hard posteriors (d ≈ 100, hierarchical scales): see the module
# docstring, "Hard posteriors"; read-only, so a user cannot change every later caller's preset
ETD_HARD = types.MappingProxyType({"preconditioner": preconditioners.Fisher(shrinkage=0.0),
                                   "score_clip": 50.0, "mutation": Mutation(steps=16)})


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
            the start; it stays 0 when ``ProposalAdaptation.rate = 0``, the default).
        log_mutation_scale: the adapted multiplier ``log(h_t / h)`` of the mutation step (it
            stays 0 when ``Mutation.adaptation_rate = 0``).
        degenerate_rate: exponential average of ``info.degenerate`` with weight
            ``1/verdict.patience`` per step (0 at the start).
        collapsed: ``degenerate_rate > 1/2``: most recent steps looked degenerate, the cloud
            is not a sample of ``π``; :func:`jaxsample.run` warns when a run ends in this
            state.
        evidence: the mass-loss test's running statistic ``(A, B, C, best)``
            (:meth:`~jaxsample.diagnostics.CollapseCriteria.mass_loss`): the discounted sums
            of the precision-weighted ``info.log_evidence``, and the best lower bound so far.
        mass_lost: the evidence fell below its best by more than ``verdict.max_mass_loss``
            of the mass, beyond noise: the cloud lost a mode it covered;
            :func:`jaxsample.run` warns when a run ends in this state.
        weight_temperature: the weight guard's last ``β`` (1 at the start): how far the next
            proposal step follows the mutation step (``ProposalAdaptation``).
    """

    # what an eager jaxsample.run warns about when a run ends with the flag set
    RUN_WARNINGS = (("collapsed", (
        "the final particles are not a sample of the target (too few distinct particles, a "
        "degenerate spread or degenerate importance weights for several steps in a row). Run "
        "jaxsample.diagnostics.diagnose(trace) on the run's trace for the cause and the "
        "remedy.")), ("mass_lost", (
        "the particles no longer cover part of the target's mass they covered earlier (the "
        "evidence estimate info.log_evidence fell and stayed down): a mode was emptied. Run "
        "jaxsample.diagnostics.diagnose(trace) for the size of the loss and the remedies.")))

    positions: jax.Array
    f: jax.Array
    g: jax.Array
    preconditioner: jax.Array
    step: jax.Array
    log_step_scale: jax.Array
    log_mutation_scale: jax.Array
    degenerate_rate: jax.Array
    collapsed: jax.Array
    evidence: jax.Array
    mass_lost: jax.Array
    weight_temperature: jax.Array


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
        log_evidence: the importance estimate of ``log Z = log ∫π`` from this step's pool,
            ``log((1/NM) Σ_j π(y_j)/q(y_j)) + log|det L|`` (:class:`~jaxsample.kernels.
            transport.ProposalWeights`; ``L`` the whitening): it counts the mass of ``π`` the
            pool covers, so it falls by ``log(1/(1 − f))`` when the cloud loses a mode of mass
            ``f`` (``mass_lost``). A by-product: the evidence of a Bayesian model, with the
            weight ESS as its reliability.
        proposal_step: the proposal step ``α_t`` used this step (after adaptation).
        mutation_step_size: the mutation step ``h_t`` used this step (after adaptation).
        acceptance_rate: mean Metropolis acceptance of the mutation steps (1 when there are none).
        degenerate: this step looked degenerate: distinct proposals taken or the cloud's
            effective rank below ``verdict.fraction`` of ``N`` (resp. ``min(N − 1, d)``), the
            raw weight ESS below 1.5 (one proposal holds the mass), ``stein_ratio`` outside
            ``stein_band`` (and significant at level 0.01), a per-coordinate ratio outside
            ``coordinate_stein_band`` (and significant: Bonferroni, level 0.01 over ``d``),
            ``score_bias`` above ``max_score_bias`` or ``scaling_flag``.
        collapsed: the exponential average of ``degenerate`` (weight ``1/verdict.patience``
            per step) is above 1/2: degenerate steps dominate the recent past (the first flag
            comes after 7 degenerate steps in a row with the default patience 10).
        mass_lost: the cloud stopped covering at least ``verdict.max_mass_loss`` of the mass
            it covered earlier (``log_evidence`` fell and stayed down; ``ETDState.mass_lost``).
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
    log_evidence: jax.Array
    proposal_step: jax.Array
    mutation_step_size: jax.Array
    acceptance_rate: jax.Array
    degenerate: jax.Array
    collapsed: jax.Array
    mass_lost: jax.Array
    nonfinite: jax.Array


def init(position: jax.Array, num_proposals: int = NUM_PROPOSALS, *,
         preconditioner=PRECONDITIONER, score_fn: Callable | None = None, batched: bool = False,
         rng_key: jax.Array | None = None) -> ETDState:
    """Initial state: the particles, zero duals, the preconditioner's statistic, step 0, no
    adaptation yet.

    Args:
        position: initial particles ``(N, d)``, floating point (valid: the constructor's ``init``
            checks it).
        num_proposals: proposals per particle ``M`` (sets the size of ``g``).
        preconditioner: as :func:`etd`'s (its statistic at ``position`` starts the state).
        score_fn: ``∇log π`` for one point (or ``(n, d)`` blocks with ``batched``); needed by
            the preconditioners that read scores (``"fisher"``, and ``"diagonal"`` with a score).
        batched: ``score_fn`` takes ``(n, d)`` blocks.
        rng_key: unused (ETD's start is deterministic); accepted for the common signature.

    Returns:
        An :class:`ETDState`.
    """
    del rng_key
    position = jnp.asarray(position)
    n = position.shape[0]
    dtype = position.dtype
    if not isinstance(preconditioner, preconditioners.Preconditioner):
        preconditioner = preconditioners.resolve(preconditioner)
    score = None if score_fn is None else _raw_score(score_fn, position, batched)[0]
    return ETDState(
        position,
        jnp.zeros((n,), dtype),
        jnp.zeros((n * num_proposals,), dtype),
        preconditioner.init(position, score),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), bool),
        jnp.asarray([0.0, 0.0, 0.0, -jnp.inf], dtype),
        jnp.zeros((), bool),
        jnp.ones((), dtype),
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


def _at(value, step):
    """A hyper-parameter or the entry of its schedule (1-D) at ``step`` (held at the end)."""
    value = jnp.asarray(value)
    if value.ndim == 0:
        return value
    return value[jnp.minimum(step, value.shape[0] - 1)]


def _whitened(log_fn, score_fn, white, clip, batched, dtype):
    """The density and the clipped drift as functions of whitened ``(N, d)`` blocks (the drift
    None without a score)."""

    def log_density_w(u):
        return _log_density(log_fn, white.colour(u), batched)

    def drift_w(u):
        s = _scores(score_fn, white.colour(u), batched).astype(dtype)
        return linalg.clip_by_norm(white.pull(s), clip)

    return log_density_w, None if score_fn is None else drift_w


class _Pool(NamedTuple):
    """This step's proposal pool in whitened coordinates."""

    u: jax.Array  # the particles, whitened (N, d)
    centres: jax.Array  # the proposal centres (N, d)
    proposals: jax.Array  # (N·M, d)
    log_target: jax.Array  # log π at the proposals (N·M,)
    sigma: jax.Array  # the proposal sd


class _Judgement(NamedTuple):
    """The Stein part of this step's verdict (NaN and False without a score)."""

    stein_mean: jax.Array
    stein_min: jax.Array
    stein_max: jax.Array
    score_bias: jax.Array
    scaling_min: jax.Array
    mean_bad: jax.Array
    coordinate_bad: jax.Array
    scaling_bad: jax.Array


def _stein_part(x, score, verdict: CollapseCriteria, dtype) -> _Judgement:
    """The cloud's Stein evidence (:func:`jaxsample.kernels.stein.evidence`) and its flags."""
    if score is None:
        nan = jnp.full((), jnp.nan, dtype)
        false = jnp.zeros((), bool)
        return _Judgement(nan, nan, nan, nan, nan, false, false, false)
    ev = stein.evidence(x, score)
    return _Judgement(jnp.mean(ev.linear), jnp.min(ev.linear), jnp.max(ev.linear),
                      ev.score_bias, jnp.min(ev.scaling), *verdict.stein_flags(ev))


def _propose(key, x, score, white, alpha, clip, num_proposals, log_density_w) -> _Pool:
    """Step 1: ``M`` Gaussian proposals per particle around its (Langevin) centre."""
    with jax.named_scope("proposals"):
        n, d = x.shape
        u = white.whiten(x)
        centres = u if score is None else u + alpha * linalg.clip_by_norm(white.pull(score),
                                                                           clip)
        sigma = jnp.sqrt(2 * alpha)
        noise = jax.random.normal(key, (n * num_proposals, d), x.dtype)
        proposals = jnp.repeat(centres, num_proposals, axis=0) + sigma * noise
        return _Pool(u, centres, proposals, log_density_w(proposals), sigma)


def _weigh(pool: _Pool, min_weight_ess, n, chunk_size):
    """Step 2: importance weights against the pool's mixture, tempered to the weight guard.
    Returns ``(log_b, raw weight ESS, temperature, num_invalid, log mean weight)``."""
    log_b, num_invalid, log_mean = transport.proposal_log_weights(
        pool.log_target, pool.proposals, pool.centres, pool.sigma, chunk_size=chunk_size)
    weight_ess = jnp.exp(logspace.log_ess(log_b))
    log_b, temperature = logspace.temper_to_ess(log_b, min_weight_ess * n)
    return log_b, weight_ess, temperature, num_invalid, log_mean


def _couple(key, pool: _Pool, log_b, eps, state, sinkhorn: Sinkhorn, *, coupling, update, cost,
            chunk_size):
    """Step 3: the entropic plan between the particles and the weighted pool, and each
    particle's row draw (or barycentre). Returns ``(plan, rows, cost scale)``."""
    dtype = log_b.dtype
    with jax.named_scope("cost"):
        source = pool.u if cost == "euclidean" else pool.centres
        scale = transport.cost_scale(source, pool.proposals)
        geom = transport.ParticleGeometry(source, pool.proposals, inv_scale=1 / scale,
                                          chunk_size=chunk_size)
    plan = transport.solve_coupling(
        geom, log_b, epsilon=eps, coupling=coupling, rho=jnp.asarray(sinkhorn.rho, dtype),
        init=(state.f, state.g) if sinkhorn.warm_start else None,
        tolerance=jnp.asarray(sinkhorn.tolerance, dtype), max_iterations=sinkhorn.max_iterations,
        criterion=sinkhorn.criterion,
        inner_iterations=5 if sinkhorn.criterion == "marginal" else 1)
    rows = transport.transport_rows(key, geom, plan.g, pool.proposals, epsilon=eps,
                                    update=update)
    return plan, rows, scale


def _move(pool: _Pool, rows, plan, eta, num_invalid, update):
    """Step 4: ``u ← (1 − η)u + η·target``; the particles stay where they were when the plan or
    the move is not finite. Returns ``(u, num_distinct, effective rank)``."""
    u = pool.u
    moved = (1 - eta) * u + eta * rows.targets
    any_valid = num_invalid < pool.proposals.shape[0]
    # NaN duals make every row's logits NaN and the categorical draw returns an arbitrary
    # finite index (so the check on `moved` alone would pass): keep the particles where they
    # were. -inf entries of g are legitimate (zero-weight proposals).
    plan_ok = ~jnp.any(jnp.isnan(plan.g)) & ~jnp.any(jnp.isnan(plan.f))
    u_new = jnp.where(any_valid & plan_ok & jnp.all(jnp.isfinite(moved)), moved, u)
    n = u.shape[0]
    distinct = (_count_distinct(rows.picks) if update == "categorical"
                else jnp.asarray(n, jnp.int32))
    return u_new, distinct, linalg.effective_rank(u_new)


def _colour_back(x, u, u_new, white, whitens):
    """The moved particles in the user's coordinates; with a preconditioner, particles that did
    not move keep their positions exactly (whitening and colouring back would round them), and
    a non-finite colouring moves none."""
    x_new = white.colour(u_new)
    if not whitens:
        return x_new
    stayed = jnp.all(u_new == u, axis=1, keepdims=True)
    return jnp.where(stayed | ~jnp.all(jnp.isfinite(x_new)), x, x_new)


def _adapt(state, weight_ess, acceptance, n, mutation: Mutation,
           adaptation: ProposalAdaptation):
    """Step 6: the proposal step's multiplier follows the raw weight ESS (the weights stay exact:
    ``α`` is fixed within a step), the mutation step's follows the acceptance; a non-finite
    update keeps both."""
    with jax.named_scope("adaptation"):
        log_step_scale = adaptation.adapt(state.log_step_scale, weight_ess, n)
        log_mutation_scale = mutation.adapt(state.log_mutation_scale, acceptance)
        ok = jnp.isfinite(log_step_scale) & jnp.isfinite(log_mutation_scale)
        return (jnp.where(ok, log_step_scale, state.log_step_scale),
                jnp.where(ok, log_mutation_scale, state.log_mutation_scale))


class _Verdicts(NamedTuple):
    """This step's verdicts and the state they carry on."""

    degenerate: jax.Array
    rate: jax.Array
    collapsed: jax.Array
    evidence: jax.Array
    mass_lost: jax.Array


def _judge(verdict: CollapseCriteria, state, judged: _Judgement, num_distinct, rank, weight_ess,
           log_evidence, n, d) -> _Verdicts:
    """Step 7: this step's degenerate flag, the collapse average and the mass-loss test."""
    with jax.named_scope("verdict"):
        degenerate = verdict.degenerate(
            num_distinct=num_distinct, rank=rank, weight_ess=weight_ess,
            mean_bad=judged.mean_bad, score_bias=judged.score_bias,
            coordinate_bad=judged.coordinate_bad, scaling_bad=judged.scaling_bad,
            num_particles=n, dim=d)
        rate, collapsed = verdict.collapse(state.degenerate_rate, degenerate)
        evidence, mass_lost = verdict.mass_loss(state.evidence, log_evidence, weight_ess)
        return _Verdicts(degenerate, rate, collapsed, evidence, mass_lost)


def _finish(state, info, positions, plan, statistic, log_step_scale, log_mutation_scale, rate,
            evidence):
    """Step 8: the new state; non-finite duals restart from zero and a non-finite
    preconditioner statistic keeps the old one, each reported in ``info.nonfinite``."""
    duals_ok = jnp.all(jnp.isfinite(plan.f)) & jnp.all(jnp.isfinite(plan.g))
    statistic_ok = jnp.all(jnp.isfinite(statistic))
    info = info._replace(nonfinite=info.nonfinite | ~duals_ok | ~statistic_ok)
    new_state = ETDState(
        positions,
        jnp.where(duals_ok, plan.f, jnp.zeros_like(plan.f)),
        jnp.where(duals_ok, plan.g, jnp.zeros_like(plan.g)),
        jnp.where(statistic_ok, statistic, state.preconditioner), state.step + 1,
        log_step_scale, log_mutation_scale, rate, info.collapsed, evidence, info.mass_lost,
        jnp.where(jnp.isfinite(info.weight_temperature), info.weight_temperature,
                  state.weight_temperature))
    return new_state, info


def _resolved_weight_ess(min_weight_ess, mutation: Mutation):
    """The weight guard: 0.1 of ``N`` with mutation moves (which pull back the tempering's
    bias), off without, unless given."""
    if min_weight_ess is None:
        return 0.1 if mutation.steps > 0 else 0.0
    return min_weight_ess


@functools.cache
def build_kernel(*, coupling: str = "balanced", update: str = "categorical",
                 cost: str = "euclidean", batched: bool = False,
                 chunk_size: int | None = None) -> Callable:
    """The ETD transition for a static structure (cached: equal structure, same function).

    Its arguments are :func:`etd`'s ``coupling``, ``update``, ``cost``, ``batched`` and
    ``chunk_size``: the structure that shapes the compiled step.

    Returns:
        ``kernel(key, state, logdensity_fn, score_fn=None, **options) -> (ETDState, ETDInfo)``,
        ``options`` :func:`etd`'s floats and option objects with the same defaults (one
        definition), any float traced; inputs valid (:func:`etd` checked them), ``score_clip =
        0``: no clipping.
    """

    def kernel(key: jax.Array, state: ETDState, logdensity_fn: Callable,
               score_fn: Callable | None = None, *, epsilon=EPSILON,
               proposal_step=PROPOSAL_STEP, step_fraction=STEP_FRACTION,
               score_clip=SCORE_CLIP, min_weight_ess=None,
               preconditioner=_DEFAULT_PRECONDITIONER, mutation=MUTATION,
               proposal_adaptation=PROPOSAL_ADAPTATION, sinkhorn=SINKHORN,
               verdict=VERDICT) -> tuple[ETDState, ETDInfo]:
        with jax.named_scope("etd_step"):
            x, structure = ravel(state.positions, 1)
            log_fn, score_fn = _flat_functions(logdensity_fn, score_fn, structure, batched)
            n, d = x.shape
            dtype = x.dtype
            cast = lambda v: jnp.asarray(v, dtype)
            key_prop, key_pick, key_mut = jax.random.split(key, 3)
            base_step = cast(_at(proposal_step, state.step))
            alpha = proposal_adaptation.step_at(base_step, state.log_step_scale,
                                                state.log_mutation_scale,
                                                state.weight_temperature, mutation.steps)
            h = mutation.step_size_at(base_step, state.log_mutation_scale)
            clip = cast(score_clip)
            with jax.named_scope("preconditioner"):
                score, bad_score = (None, jnp.zeros((), bool)) if score_fn is None else (
                    _raw_score(score_fn, x, batched))
                statistic, white, bad_pre = preconditioner.update(
                    state.preconditioner, x, score, verdict.fraction)

            log_density_w, drift_w = _whitened(log_fn, score_fn, white, clip, batched, dtype)
            pool = _propose(key_prop, x, score, white, alpha, clip, state.g.shape[0] // n,
                            log_density_w)
            judged = _stein_part(x, score, verdict, dtype)
            log_b, weight_ess, temperature, num_invalid, log_mean = _weigh(
                pool, cast(_resolved_weight_ess(min_weight_ess, mutation)), n, chunk_size)
            eps = cast(_at(epsilon, state.step))
            plan, rows, scale_c = _couple(key_pick, pool, log_b, eps, state, sinkhorn,
                                          coupling=coupling, update=update, cost=cost,
                                          chunk_size=chunk_size)
            u_new, num_distinct, rank = _move(pool, rows, plan, cast(step_fraction),
                                              num_invalid, update)
            with jax.named_scope("mutation"):
                u_new, acceptance, bad_mut = mutation.run(
                    key_mut, u_new, log_density_w, drift_w, h)
            x_new = _colour_back(x, pool.u, u_new, white, preconditioner.whitens)
            log_step_scale, log_mutation_scale = _adapt(state, weight_ess, acceptance, n,
                                                        mutation, proposal_adaptation)
            log_evidence = log_mean + white.log_det
            verdicts = _judge(verdict, state, judged, num_distinct, rank, weight_ess,
                              log_evidence, n, d)
            nonfinite = (num_invalid > 0) | bad_score | bad_mut | bad_pre
            info = ETDInfo(
                solver=SolverStats.of(plan.num_iterations, converged=plan.converged),
                coupling_ess=jnp.mean(rows.row_ess), weight_ess=weight_ess,
                weight_temperature=temperature, num_distinct=num_distinct,
                effective_rank=rank, stein_ratio=judged.stein_mean,
                stein_ratio_min=judged.stein_min, stein_ratio_max=judged.stein_max,
                score_bias=judged.score_bias, scaling_ratio_min=judged.scaling_min,
                scaling_flag=judged.scaling_bad, num_invalid=num_invalid, cost_scale=scale_c,
                log_evidence=log_evidence,
                proposal_step=alpha, mutation_step_size=h, acceptance_rate=acceptance,
                degenerate=verdicts.degenerate, collapsed=verdicts.collapsed,
                mass_lost=verdicts.mass_lost, nonfinite=nonfinite)
            return _finish(state, info, unravel(x_new, structure), plan, statistic,
                           log_step_scale, log_mutation_scale, verdicts.rate, verdicts.evidence)

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


def _option(name, value, cls):
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__module__.replace('._', '.')}.{cls.__name__}"
                        f"(...), got {type(value).__name__}")
    return value.checked()


def etd(logdensity_fn: Callable, *, score_fn: Callable | str | None = None,
        num_proposals: int = NUM_PROPOSALS, epsilon=EPSILON, proposal_step=PROPOSAL_STEP,
        score_clip: float | None = SCORE_CLIP, coupling: str = "balanced",
        update: str = "categorical", step_fraction: float = STEP_FRACTION,
        cost: str = "euclidean", preconditioner=PRECONDITIONER,
        min_weight_ess: float | None = None, mutation: Mutation = MUTATION,
        proposal_adaptation: ProposalAdaptation = PROPOSAL_ADAPTATION,
        sinkhorn: Sinkhorn = SINKHORN, verdict: CollapseCriteria = VERDICT,
        batched: bool = False, chunk_size: int | None = None) -> SamplingAlgorithm:
    """Entropic transport descent (ETD) particle sampler.

    The module docstring has the update rule, the defaults and how to choose the options.
    Every float, the option objects' too, is traced (sweeps and ``jax.vmap`` compile once).

    Args:
        logdensity_fn: ``log π(x)`` up to a constant for one point ``(d,)`` or a pytree, a
            scalar (``batched``: ``(n, d) -> (n,)``); NaN/±inf proposals get zero weight.
        score_fn: ``"autodiff"`` (differentiated in the step; so is an inline ``jax.grad(
            logdensity_fn)``), your ``∇log π`` for one point, or None: score-free.
        num_proposals: proposals per particle ``M >= 1``; the pool has ``P = N·M`` points.
        epsilon: entropic regularisation ``ε > 0`` relative to the median cost, or a 1-D
            schedule (entry ``t`` at step ``t``, the last one held).
        proposal_step: ``α > 0`` in whitened units (centres move by ``α·Σ·score``, proposal sd
            ``√(2α)``), or a 1-D schedule; ``proposal_adaptation`` may move it.
        score_clip: whitened scores are rescaled to at most this norm (None, 0, inf: none).
        coupling: ``"balanced"`` (Sinkhorn), ``"unbalanced"`` (KL penalty ``sinkhorn.rho`` on
            the proposal marginal) or ``"gibbs"`` (semi-relaxed, no iterations).
        update: ``"categorical"`` (draw a proposal from the row) or ``"barycentric"`` (row mean).
        step_fraction: damping ``η ∈ (0, 1]``: ``x ← (1−η)x + η·target``.
        cost: ``"euclidean"`` (``½‖x_i − y_j‖²``, whitened) or ``"langevin"`` (``½‖m_i −
            y_j‖²`` from the Langevin centres, the reference code's LRET cost).
        preconditioner: a :mod:`~jaxsample.particles.preconditioners` object or a shorthand
            (``"ensemble"``, ``"fisher"`` (needs a score), ``"diagonal"``), None (identity, the
            paper's sampler), a lower Cholesky factor ``L`` of a covariance (the ``chol`` of
            :func:`~jaxsample.particles.laplace_preconditioner`) or ``Precision(P)``.
        min_weight_ess: weights whose ESS falls below ``min_weight_ess·N`` are tempered, ``b
            ∝ b^β``, targeting ``q^{1−β}π^β`` (the mutation pulls back). None: 0.1 with
            mutation, 0 without.
        mutation: the π-invariant moves and their adaptation (:class:`~jaxsample.particles.
            Mutation`; ``Mutation(steps=0)`` is the paper's plain step).
        proposal_adaptation: how ``α`` moves (:class:`~jaxsample.particles.ProposalAdaptation`).
        sinkhorn: the coupling solver's settings (:class:`~jaxsample.particles.Sinkhorn`).
        verdict: the ``collapsed`` and ``mass_lost`` criteria (:class:`~jaxsample.
            diagnostics.CollapseCriteria`).
        batched: ``logdensity_fn`` (and ``score_fn``) take ``(n, d)`` blocks.
        chunk_size: every ``N × P`` interaction in blocks of ``chunk_size`` rows (memory
            ``O(chunk_size·P)``), or None: dense.

    Returns:
        A :class:`~jaxsample.SamplingAlgorithm`: ``init(position, *, rng_key=None)``
        (``position`` ``(N, d)`` or a pytree with leading ``N``, finite; an eager ``init``
        refuses a start where ``logdensity_fn`` is finite nowhere) and ``step(key, state) ->
        (ETDState, ETDInfo)``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> alg = jaxsample.etd(lambda x: -0.5 * jnp.sum(x**2), num_proposals=5)
        >>> state = alg.init(2.0 * jax.random.normal(jax.random.key(0), (50, 2)))
        >>> state, info = jaxsample.run(jax.random.key(1), alg, state, num_steps=20)
        >>> state.positions.shape, info.solver.num_iterations.shape, bool(state.collapsed)
        ((50, 2), (20,), False)
    """
    check_callable("logdensity_fn", logdensity_fn)
    score_fn = resolve_score_fn(score_fn, logdensity_fn, default=None)
    num_proposals = check_int("num_proposals", num_proposals, 1)
    hyper = _checked_options(score_fn, epsilon, proposal_step, step_fraction, score_clip,
                             min_weight_ess, preconditioner, mutation, proposal_adaptation,
                             sinkhorn, verdict)
    kernel = build_kernel(coupling=check_choice("coupling", coupling, transport.COUPLINGS),
                          update=check_choice("update", update, transport.UPDATES),
                          cost=check_choice("cost", cost, COSTS), batched=bool(batched),
                          chunk_size=check_chunk_size(chunk_size))

    def init_fn(position, *, rng_key: jax.Array | None = None) -> ETDState:
        return _checked_init(position, logdensity_fn, score_fn, num_proposals,
                             hyper["preconditioner"], batched, rng_key)

    return SamplingAlgorithm(init_fn, Step(kernel, logdensity_fn=logdensity_fn,
                                           score_fn=score_fn, **hyper))


def _checked_options(score_fn, epsilon, proposal_step, step_fraction, score_clip,
                     min_weight_ess, preconditioner, mutation, proposal_adaptation, sinkhorn,
                     verdict) -> dict:
    """:func:`etd`'s traced options, validated (each error names its argument)."""
    pre = preconditioners.resolve(preconditioner)
    if pre.needs_score and score_fn is None:
        raise ValueError("preconditioner='fisher' needs a score: pass score_fn='autodiff' (or "
                         "your own), or choose preconditioner='ensemble'")
    return dict(
        epsilon=_schedule("epsilon", epsilon),
        proposal_step=_schedule("proposal_step", proposal_step),
        step_fraction=check_hyperparameter("step_fraction", step_fraction, maximum=1.0),
        score_clip=_score_clip(score_clip),
        min_weight_ess=check_hyperparameter("min_weight_ess", min_weight_ess, positive=False,
                                            allow_none=True),
        preconditioner=pre,
        mutation=_option("mutation", mutation, Mutation),
        proposal_adaptation=_option("proposal_adaptation", proposal_adaptation,
                                    ProposalAdaptation),
        sinkhorn=_option("sinkhorn", sinkhorn, Sinkhorn),
        verdict=_option("verdict", verdict, CollapseCriteria),
    )


def _checked_init(position, logdensity_fn, score_fn, num_proposals, pre, batched,
                  rng_key) -> ETDState:
    """:func:`etd`'s ``init``: the start checked (shape, the functions' outputs, the
    preconditioner's needs, a finite density somewhere), flattened, and :func:`init`."""
    position = check_position("position", position, batch_ndim=1)
    if jax.tree.structure(position).num_nodes == 1:  # a bare array: the flat path
        check_array("position", position, ndim=2, layout="(num_particles, dim)")
    flat, structure = ravel(position, 1)
    flat = check_array("position", flat, ndim=2, min_rows=2)
    d = flat.shape[1]
    log_fn, flat_score = _flat_functions(logdensity_fn, score_fn, structure, batched)
    point = jax.ShapeDtypeStruct((2, d) if batched else (d,), flat.dtype)
    check_fn_output("logdensity_fn", log_fn, point, (2,) if batched else ())
    if flat_score is not None:
        check_fn_output("score_fn", flat_score, point, point.shape)
    pre.check_start(flat.shape[0], d)
    check_initial_logdensity("logdensity_fn", logdensity_fn,
                             _log_density(log_fn, flat, batched), position, batch_ndim=1)
    state = init(flat, num_proposals, preconditioner=pre, score_fn=flat_score,
                 batched=batched, rng_key=rng_key)
    return state._replace(positions=unravel(state.positions, structure))
