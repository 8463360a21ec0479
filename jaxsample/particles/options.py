"""ETD's option objects: the mutation and its adaptation, the proposal step's adaptation, and the
Sinkhorn settings (diffrax-style small objects: ``etd(..., mutation=Mutation(steps=16))``).

Each is an ``equinox.Module`` whose float options are array leaves of the sampler's step (traced:
sweeps and ``jax.vmap`` over them share one compilation) and whose structural options (step
counts, iteration caps, choices) are static fields. ``checked()`` validates the options and
names the one that is wrong. The defaults here are the only definition of ETD's defaults:
:func:`jaxsample.particles.etd.etd`, its ``build_kernel`` and the kernel read them.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_choice, check_hyperparameter, check_int
from jaxsample.kernels import langevin, transport

__all__ = ["FOLLOWS", "MAX_LOG_SCALE", "Mutation", "ProposalAdaptation", "Sinkhorn"]

# the adapted steps stay within a factor e^±7 ≈ 10^±3 of the given ones: where no proposal step
# can meet the weight-ESS target (high dimension), the proposals keep a scale of their own
# rather than shrinking to nothing
MAX_LOG_SCALE = 7.0


class Mutation(eqx.Module):
    """π-invariant moves after every transport update, and their step's adaptation.

    ``steps`` (preconditioned) MALA steps with a score, random-walk Metropolis without one
    (:func:`jaxsample.kernels.langevin.mala_step`): they restore diversity after resampling and
    pull back what the weight guard biased. Their step ``h_t = h·e^{s_t}`` follows the mean
    acceptance by Robbins–Monro on the log scale, ``s ← s + κ·(acceptance − target)``, within
    ``10^±3`` of ``h``.

    Attributes:
        steps: moves per ETD step (static; 0 is the paper's plain ETD step).
        step_size: the initial ``h`` (None: the proposal step ``α``).
        adaptation_rate: the gain ``κ`` (0 keeps ``h`` fixed).
        target_acceptance: the acceptance the step adapts towards (0.574, MALA's optimum).
    """

    steps: int = eqx.field(static=True, default=2)
    step_size: Any = None
    adaptation_rate: Any = 0.5
    target_acceptance: Any = 0.574

    def checked(self) -> Mutation:
        return Mutation(
            steps=check_int("mutation steps", self.steps, 0),
            step_size=check_hyperparameter("mutation step_size", self.step_size,
                                           allow_none=True),
            adaptation_rate=check_hyperparameter("mutation adaptation_rate",
                                                 self.adaptation_rate, positive=False),
            target_acceptance=check_hyperparameter("target_acceptance", self.target_acceptance,
                                                   maximum=1.0),
        )

    def step_size_at(self, proposal_step: jax.Array, log_scale: jax.Array) -> jax.Array:
        """This step's ``h_t``: the base step (``step_size`` or ``proposal_step``) times the
        adapted multiplier."""
        dtype = log_scale.dtype
        base = proposal_step if self.step_size is None else jnp.asarray(self.step_size, dtype)
        return base * jnp.exp(log_scale)

    def run(self, key, u, log_density, drift, step_size):
        """``steps`` moves on every particle; ``log_density(z)`` and ``drift(z)`` act on
        ``(N, d)`` blocks (whitened when preconditioned), ``drift`` None for random-walk
        Metropolis. Any drift leaves ``π`` invariant because the Metropolis–Hastings ratio uses
        it both ways. Returns ``(particles, mean acceptance, nonfinite)``."""
        dtype = u.dtype
        if self.steps == 0:
            return u, jnp.ones((), dtype), jnp.zeros((), bool)
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
                                                jax.random.split(key, self.steps))
        return u, jnp.mean(accepted), bad

    def adapt(self, log_scale: jax.Array, acceptance: jax.Array) -> jax.Array:
        """The multiplier after this step's acceptance (unchanged without moves)."""
        if self.steps == 0:
            return log_scale
        dtype = log_scale.dtype
        return jnp.clip(log_scale + jnp.asarray(self.adaptation_rate, dtype)
                        * (acceptance - jnp.asarray(self.target_acceptance, dtype)),
                        -MAX_LOG_SCALE, MAX_LOG_SCALE)


FOLLOWS = (True, False, "tempered")
"""``ProposalAdaptation.follows_mutation``'s choices."""


class ProposalAdaptation(eqx.Module):
    """How the proposal step ``α_t`` moves from the given ``proposal_step`` ``α``.

    ``α_t = α·e^{r_t}·(h_t/h)^{φ_t}``: ``r ← r + rate·log(ESS/(target_weight_ess·N))`` chases a
    raw weight ESS, within ``10^±3``; ``h_t`` is the adapted mutation step, and ``φ_t`` says how
    far ``α_t`` follows it: ``1`` (``follows_mutation=True``), ``0`` (``False``) or, by default
    (``"tempered"``), ``1 − β_{t−1}`` with ``β_{t−1}`` the weight guard's last temperature.

    Why only while the guard tempers: tempered weights ``b ∝ (π/q)^β`` target ``q^{1−β}π^β``,
    wider than ``π`` by the proposals' width, so with degenerate weights (``d ≳ 30``) and a
    fixed ``α`` the cloud widened step after step (500 steps, never following: radon sd ratio
    36, the Brownian bridge 250, the ill-conditioned Gaussian 3·10⁸); the MALA step measures
    the local scale and keeps ``q`` local there. With healthy weights (``β = 1``) the weights
    are exact whatever ``α``, and following the MALA step only hurt: it falls as ``d^{-1/3}``
    (on ``N(0, I₅₀)`` it halved ``α`` and the DAMV fell from 0.98 to 0.75), and under ensemble
    whitening it measures the *within*-mode width against a covariance dominated by the
    distance between modes, so on two modes it fell from 0.5 to 0.04, the pool became a spiky
    kernel estimate of the cloud, the weights turned heavy-tailed and the minority mode emptied
    (mode-weight TV 0.30 against a floor of 0.026, ``bench/results_multimodal.md``).

    Attributes:
        rate: the ESS gain (0, the default, keeps ``r = 0``: the weight ESS is not monotone in
            ``α`` — for small ``α`` the pool sits on the particles and the weights are
            ``∝ π(x_i)`` — and on ``N(0, I₅₀)`` chasing the target drove ``α`` down and the
            DAMV from 0.99 to 0.47).
        target_weight_ess: the raw weight ESS aimed at, a fraction of ``N``.
        follows_mutation: ``"tempered"`` (default), ``True`` or ``False`` (static).
    """

    rate: Any = 0.0
    target_weight_ess: Any = 0.5
    follows_mutation: bool | str = eqx.field(static=True, default="tempered")

    def checked(self) -> ProposalAdaptation:
        follows = self.follows_mutation
        if isinstance(follows, np.bool_):
            follows = bool(follows)
        # bool | str: 1 == True would pass the membership test alone
        if not isinstance(follows, bool | str) or follows not in FOLLOWS:
            raise ValueError("follows_mutation must be True, False or 'tempered', got "
                             f"{follows!r}")
        return ProposalAdaptation(
            rate=check_hyperparameter("proposal adaptation rate", self.rate, positive=False),
            target_weight_ess=check_hyperparameter("target_weight_ess", self.target_weight_ess),
            follows_mutation=follows,
        )

    def step_at(self, proposal_step, log_scale, log_mutation_scale, last_temperature,
                mutation_steps: int):
        """This step's ``α_t`` (``last_temperature``: the weight guard's ``β_{t−1}``)."""
        dtype = log_scale.dtype
        if mutation_steps > 0 and self.follows_mutation is not False:
            share = (1 - last_temperature.astype(dtype) if self.follows_mutation == "tempered"
                     else jnp.ones((), dtype))
            log_scale = log_scale + share * log_mutation_scale
        return proposal_step * jnp.exp(log_scale)

    def adapt(self, log_scale, weight_ess, num_particles: int):
        """The ESS multiplier ``r`` after this step's raw weight ESS."""
        dtype = log_scale.dtype
        gap = jnp.log(jnp.maximum(weight_ess, 1.0) / num_particles) - jnp.log(
            jnp.asarray(self.target_weight_ess, dtype))
        return jnp.clip(log_scale + jnp.asarray(self.rate, dtype) * gap,
                        -MAX_LOG_SCALE, MAX_LOG_SCALE)


class Sinkhorn(eqx.Module):
    """The coupling solver's settings (:func:`jaxsample.kernels.transport.solve_coupling`).

    Attributes:
        tolerance: ``criterion="marginal"`` (ott-jax's): the ``L1`` error of the proposal
            marginal, the proposal mass misallocated by the plan, checked every 5 iterations
            (keep ``>= 1e-5`` in float32). ``"dual"`` (the reference code's): ``max |Δf|``
            between two iterations, checked every iteration; the same number means less work.
        max_iterations: the iteration cap (static).
        criterion: ``"marginal"`` or ``"dual"`` (static).
        warm_start: start from the previous step's duals (static). Off by default: the pool is
            redrawn every step, so old duals describe other points, and on the bench targets
            warm starts did not reduce the iterations (``bench/results_etd.md``).
        rho: the KL weight ``ρ > 0`` on the proposal marginal of the unbalanced coupling.
    """

    tolerance: Any = 1e-2
    max_iterations: int = eqx.field(static=True, default=200)
    criterion: str = eqx.field(static=True, default="marginal")
    warm_start: bool = eqx.field(static=True, default=False)
    rho: Any = 1.0

    def checked(self) -> Sinkhorn:
        return Sinkhorn(
            tolerance=check_hyperparameter("tolerance", self.tolerance),
            max_iterations=check_int("max_iterations", self.max_iterations, 1),
            criterion=check_choice("criterion", self.criterion, transport.CRITERIA),
            warm_start=bool(self.warm_start),
            rho=check_hyperparameter("rho", self.rho),
        )
