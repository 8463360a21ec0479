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
    is_concrete,
)
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.kernels import transport

__all__ = ["ETDInfo", "ETDState", "build_kernel", "etd", "init"]


class ETDState(NamedTuple):
    """State of an ETD particle system.

    Attributes:
        positions: particles ``(N, d)``.
        f: particle Sinkhorn duals ``(N,)`` from the last step (warm start).
        g: proposal Sinkhorn duals ``(N·M,)`` from the last step (warm start).
    """

    positions: jax.Array
    f: jax.Array
    g: jax.Array


class ETDInfo(NamedTuple):
    """Per-step diagnostics (scalars).

    Attributes:
        num_iterations: Sinkhorn iterations of this step (0 for the Gibbs coupling).
        converged: whether Sinkhorn met its tolerance.
        coupling_ess: mean over particles of ``1/Σ_j γ̃_ij²``: how many proposals a particle
            effectively chooses among.
        weight_ess: ``1/Σ_j b_j²``, the effective size of the weighted proposal pool.
        num_distinct: number of distinct proposals taken (``N`` for barycentric updates); with
            ``step_fraction = 1`` and no mutation steps this is the number of distinct particles.
        num_invalid: proposals whose log-density was NaN or ±inf (given zero weight).
        cost_scale: the median of ``½‖x_i − y_j‖²`` the cost was divided by.
        acceptance_rate: mean Metropolis acceptance of the mutation steps (1 when there are none).
        nonfinite: True if anything non-finite was met this step (a log-density, a score, the
            duals). Invalid proposals get zero weight; if the plan itself is NaN or the move is
            not finite, the particles stay where they were this step, so positions stay finite.
    """

    num_iterations: jax.Array
    converged: jax.Array
    coupling_ess: jax.Array
    weight_ess: jax.Array
    num_distinct: jax.Array
    num_invalid: jax.Array
    cost_scale: jax.Array
    acceptance_rate: jax.Array
    nonfinite: jax.Array


def init(position: jax.Array, num_proposals: int = 25, *, rng_key: jax.Array | None = None
         ) -> ETDState:
    """Initial state: the particles and zero duals (deterministic; ``rng_key`` is unused).

    Args:
        position: initial particles ``(N, d)``, floating point (valid: the constructor's ``init``
            checks it).
        num_proposals: proposals per particle ``M`` (sets the size of ``g``).
        rng_key: unused (ETD's start is deterministic); accepted for the common signature.

    Returns:
        An :class:`ETDState`.
    """
    del rng_key
    position = jnp.asarray(position)
    n = position.shape[0]
    return ETDState(
        position,
        jnp.zeros((n,), position.dtype),
        jnp.zeros((n * num_proposals,), position.dtype),
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


def _log_density(logdensity_fn, x):
    values = jax.vmap(logdensity_fn)(x).astype(x.dtype)
    return jnp.where(jnp.isnan(values), -jnp.inf, values)


def _drift(score_fn, x, score_clip):
    """Clipped score with non-finite rows zeroed, and whether any was non-finite."""
    s = jax.vmap(score_fn)(x).astype(x.dtype)
    ok = jnp.all(jnp.isfinite(s), axis=1, keepdims=True)
    return _clip_by_norm(jnp.where(ok, s, jnp.zeros_like(s)), score_clip), ~jnp.all(ok)


def _mutate(key, x, logdensity_fn, score_fn, num_steps, step_size, score_clip):
    """``num_steps`` MALA (score) or random-walk Metropolis (score-free) steps on every particle."""
    dtype = x.dtype
    h = step_size
    with_score = score_fn is not None

    def parts(z):
        logp = _log_density(logdensity_fn, z)
        if with_score:
            s, bad = _drift(score_fn, z, score_clip)
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


@functools.cache
def build_kernel(
    *,
    coupling: str = "balanced",
    update: str = "categorical",
    mutation_steps: int = 0,
    warm_start: bool = False,
    max_iterations: int = 200,
    chunk_size: int | None = None,
) -> Callable:
    """The ETD transition for a static structure (cached: equal structure, same function).

    Args:
        coupling: ``"balanced"``, ``"unbalanced"`` or ``"gibbs"``.
        update: ``"categorical"`` or ``"barycentric"``.
        mutation_steps: π-invariant MALA / random-walk Metropolis steps after the update.
        warm_start: start Sinkhorn from the state's duals.
        max_iterations: Sinkhorn's iteration cap.
        chunk_size: particle rows per block of every ``N × P`` interaction, or None (dense).

    Returns:
        ``kernel(key, state, logdensity_fn, score_fn=None, *, epsilon, proposal_step,
        step_fraction, mutation_step_size, rho, score_clip, tolerance) -> (ETDState, ETDInfo)``.
        The float arguments may be traced; ``score_clip = 0`` means no clipping. Inputs are valid
        (the constructor :func:`etd` checked them).
    """

    def kernel(key: jax.Array, state: ETDState, logdensity_fn: Callable,
               score_fn: Callable | None = None, *, epsilon, proposal_step, step_fraction=1.0,
               mutation_step_size=None, rho=1.0, score_clip=5.0, tolerance=1e-2
               ) -> tuple[ETDState, ETDInfo]:
        with jax.named_scope("etd_step"):
            x = state.positions
            n, d = x.shape
            dtype = x.dtype
            num_proposals = state.g.shape[0] // n
            cast = lambda v: jnp.asarray(v, dtype)
            alpha, eta, clip = cast(proposal_step), cast(step_fraction), cast(score_clip)
            h_mutation = alpha if mutation_step_size is None else cast(mutation_step_size)
            key_prop, key_pick, key_mut = jax.random.split(key, 3)
            sigma = jnp.sqrt(2 * alpha)

            with jax.named_scope("proposals"):
                if score_fn is not None:
                    s, bad_score = _drift(score_fn, x, clip)
                    centres = x + alpha * s
                else:
                    centres, bad_score = x, jnp.zeros((), bool)
                noise = jax.random.normal(key_prop, (n * num_proposals, d), dtype)
                proposals = jnp.repeat(centres, num_proposals, axis=0) + sigma * noise
                log_target = _log_density(logdensity_fn, proposals)

            log_b, num_invalid = transport.proposal_log_weights(
                log_target, proposals, centres, sigma, chunk_size=chunk_size)
            with jax.named_scope("cost"):
                scale = transport.cost_scale(x, proposals)
                geom = transport.ParticleGeometry(x, proposals, inv_scale=1 / scale,
                                                  chunk_size=chunk_size)
            plan = transport.solve_coupling(
                geom, log_b, epsilon=cast(epsilon), coupling=coupling, rho=cast(rho),
                init=(state.f, state.g) if warm_start else None, tolerance=cast(tolerance),
                max_iterations=max_iterations)
            rows = transport.transport_rows(key_pick, geom, plan.g, proposals,
                                            epsilon=cast(epsilon), update=update)

            moved = (1 - eta) * x + eta * rows.targets
            any_valid = num_invalid < proposals.shape[0]
            # NaN duals make every row's logits NaN and the categorical draw returns an arbitrary
            # finite index (so the check on `moved` alone would pass): keep the particles where
            # they were. -inf entries of g are legitimate (zero-weight proposals).
            plan_ok = ~jnp.any(jnp.isnan(plan.g)) & ~jnp.any(jnp.isnan(plan.f))
            x_new = jnp.where(any_valid & plan_ok & jnp.all(jnp.isfinite(moved)), moved, x)
            if mutation_steps > 0:
                with jax.named_scope("mutation"):
                    x_new, acceptance, bad_mut = _mutate(key_mut, x_new, logdensity_fn, score_fn,
                                                         mutation_steps, h_mutation, clip)
            else:
                acceptance, bad_mut = jnp.ones((), dtype), jnp.zeros((), bool)

            duals_ok = jnp.all(jnp.isfinite(plan.f)) & jnp.all(jnp.isfinite(plan.g))
            f = jnp.where(duals_ok, plan.f, jnp.zeros_like(plan.f))
            g = jnp.where(duals_ok, plan.g, jnp.zeros_like(plan.g))
            if update == "categorical":
                num_distinct = _count_distinct(rows.picks)
            else:
                num_distinct = jnp.asarray(n, jnp.int32)
            info = ETDInfo(
                num_iterations=plan.num_iterations,
                converged=plan.converged,
                coupling_ess=jnp.mean(rows.row_ess),
                weight_ess=jnp.exp(-jax.nn.logsumexp(2 * log_b)),
                num_distinct=num_distinct,
                num_invalid=num_invalid,
                cost_scale=scale,
                acceptance_rate=acceptance,
                nonfinite=(num_invalid > 0) | bad_score | bad_mut | ~duals_ok,
            )
            return ETDState(x_new, f, g), info

    return kernel


def _score_clip(value):
    """``None``, ``0`` and ``inf`` all mean no clipping (stored as 0, the kernel's convention)."""
    if value is None:
        value = 0.0
    elif (is_concrete(value) and isinstance(value, float | np.floating | np.ndarray | jax.Array)
          and np.shape(value) == () and float(value) == math.inf):
        value = 0.0
    return check_hyperparameter("score_clip", value, positive=False)


def etd(
    logdensity_fn: Callable,
    *,
    score_fn: Callable | None = None,
    num_proposals: int = 25,
    epsilon: float = 0.1,
    proposal_step: float = 0.5,
    coupling: str = "balanced",
    update: str = "categorical",
    step_fraction: float = 1.0,
    mutation_steps: int = 0,
    mutation_step_size: float | None = None,
    rho: float = 1.0,
    score_clip: float | None = 5.0,
    warm_start: bool = False,
    tolerance: float = 1e-2,
    max_iterations: int = 200,
    chunk_size: int | None = None,
) -> SamplingAlgorithm:
    """Entropic transport descent (ETD) particle sampler.

    See the module docstring for the update rule and how to choose ``epsilon`` and
    ``proposal_step``. Without ``score_fn`` the sampler is score-free: it evaluates only
    ``logdensity_fn`` and never differentiates it. Every float argument is a traced value of the
    step (sweeps and ``jax.vmap`` over it share one compilation).

    Args:
        logdensity_fn: ``log π(x)`` up to a constant for one point ``x`` of shape ``(d,)``,
            returning a scalar. NaN or ±inf values are allowed: such proposals get zero weight.
        score_fn: ``∇ log π(x)`` for one point (e.g. ``jax.grad(logdensity_fn)``), or None for
            the score-free sampler (random-walk proposals, random-walk Metropolis mutation).
        num_proposals: proposals per particle ``M >= 1``; the pool has ``P = N·M`` points.
        epsilon: entropic regularisation ``ε > 0`` relative to the median cost.
        proposal_step: ``α > 0``: centres move by ``α·score``, proposal std is ``√(2α)``.
        coupling: ``"balanced"`` (Sinkhorn, both marginals), ``"unbalanced"`` (KL penalty ``ρ``
            on the proposal marginal) or ``"gibbs"`` (semi-relaxed, one pass, no iterations).
        update: ``"categorical"`` (draw a proposal from the row) or ``"barycentric"`` (row mean).
        step_fraction: damping ``η ∈ (0, 1]``: ``x ← (1−η)x + η·target``.
        mutation_steps: π-invariant MALA / random-walk Metropolis steps after each update.
        mutation_step_size: step ``h`` of the mutation kernel (default: ``proposal_step``).
        rho: unbalanced KL weight ``ρ > 0`` (``"unbalanced"`` only).
        score_clip: scores are rescaled to at most this norm; ``None``, ``0`` or ``inf``: no
            clipping.
        warm_start: start Sinkhorn from the previous step's duals. Off by default: the proposal
            pool is redrawn every step, so the old duals describe other points, and on the bench
            targets warm starts did not reduce the iterations (see ``bench/results_etd.md``).
        tolerance: Sinkhorn's tolerance on the ``L1`` error of the proposal marginal, i.e. the
            proposal mass misallocated by the plan, checked every 5 iterations (keep
            ``>= 1e-5`` in float32).
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
        >>> alg = jaxsample.etd(logdensity, num_proposals=5)
        >>> state = alg.init(2.0 * jax.random.normal(jax.random.key(0), (50, 2)))
        >>> state, info = jaxsample.run(jax.random.key(1), alg, state, num_steps=20)
        >>> state.positions.shape, info.converged.shape
        ((50, 2), (20,))
    """
    check_callable("logdensity_fn", logdensity_fn)
    check_callable("score_fn", score_fn, allow_none=True)
    num_proposals = check_int("num_proposals", num_proposals, 1)
    hyper = dict(
        epsilon=check_hyperparameter("epsilon", epsilon),
        proposal_step=check_hyperparameter("proposal_step", proposal_step),
        step_fraction=check_hyperparameter("step_fraction", step_fraction, maximum=1.0),
        mutation_step_size=check_hyperparameter("mutation_step_size", mutation_step_size,
                                                allow_none=True),
        rho=check_hyperparameter("rho", rho),
        score_clip=_score_clip(score_clip),
        tolerance=check_hyperparameter("tolerance", tolerance),
    )
    kernel = build_kernel(
        coupling=check_choice("coupling", coupling, transport.COUPLINGS),
        update=check_choice("update", update, transport.UPDATES),
        mutation_steps=check_int("mutation_steps", mutation_steps, 0),
        warm_start=bool(warm_start),
        max_iterations=check_int("max_iterations", max_iterations, 1),
        chunk_size=check_chunk_size(chunk_size),
    )
    step = Step(kernel, logdensity_fn=logdensity_fn, score_fn=score_fn, **hyper)

    def init_fn(position: jax.Array, *, rng_key: jax.Array | None = None) -> ETDState:
        position = check_array("position", position, ndim=2, finite=True, min_rows=2)
        d = position.shape[1]
        if d < 1:
            raise ValueError(f"position needs dim >= 1, got shape {position.shape}")
        point = jax.ShapeDtypeStruct((d,), position.dtype)
        out = jax.eval_shape(logdensity_fn, point)
        if getattr(out, "shape", None) != ():
            raise ValueError(
                "logdensity_fn must map one point of shape (d,) to a scalar; for input shape "
                f"({d},) it returned shape {getattr(out, 'shape', type(out).__name__)}"
            )
        if score_fn is not None:
            out = jax.eval_shape(score_fn, point)
            if getattr(out, "shape", None) != (d,):
                raise ValueError(
                    f"score_fn must map a point of shape ({d},) to shape ({d},), got "
                    f"{getattr(out, 'shape', type(out).__name__)}"
                )
        return init(position, num_proposals, rng_key=rng_key)

    return SamplingAlgorithm(init_fn, step)
