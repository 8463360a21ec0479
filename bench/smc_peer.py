"""BlackJAX adaptive tempered SMC as a bench peer, with evaluations counted at the density.

The tempered path runs from a Gaussian prior ``p_0 = N(0, s² I)`` (the distribution the start
positions are drawn from) to the target ``π``:

    π_λ(x) ∝ p_0(x)^{1−λ} π(x)^λ = p_0(x) · exp(λ ℓ(x)),   ℓ(x) = log π(x) − log p_0(x),

so BlackJAX's log-likelihood is ``ℓ = logdensity − logprior``. Each stage (BlackJAX's
``adaptive_tempered_smc`` step, Del Moral, Doucet & Jasra 2006; the schedule of Jasra et al.
2011) resamples (systematic), moves every particle by ``num_mcmc_steps`` MCMC steps that leave
``π_{λ_k}`` invariant, and reweights by ``exp((λ_{k+1} − λ_k) ℓ)`` with ``λ_{k+1}`` chosen by
bisection so that the weights' ESS is ``target_ess · N``. Once ``λ = 1`` one more stage runs
(its increment is 0): it resamples by the last weights and moves the particles at ``π``, so the
returned particles are equally weighted and distinct. Stages run in a ``lax.while_loop``
(compiled once per density and static settings) up to ``max_stages``.

Mutation, tuned between stages as BlackJAX's SMC tuning module does it
(``inner_kernel_tuning`` with ``smc.tuning``; written out here because its parameter-update
callback does not see the previous parameters, which the acceptance rule needs):

- ``"mala"``: ``blackjax.mala``, ``x' = x + h ∇log π_λ(x) + √(2h) ξ`` with a Metropolis test.
  BlackJAX's MALA has no mass matrix, so the step is set by acceptance only: one ``h_i`` per
  particle, started at ``s² d^{-1/3}`` (the Roberts–Rosenthal 1998 scaling for the prior) and
  updated after each stage by ``smc.tuning.from_kernel_info.update_scale_from_acceptance_rate``,
  ``h_i ← ½(h_i e^{a_i − a*} + mean_j h_j e^{a_j − a*})``, with ``a_i`` the particle's mean
  acceptance over the stage and ``a* = 0.574`` (MALA's optimal rate).
- ``"hmc"``: ``blackjax.hmc`` with ``num_integration_steps`` leapfrog steps and the inverse mass
  matrix re-estimated at each stage from the particles' variances
  (``smc.tuning.from_particles.inverse_mass_matrix_from_particles``, Buchholz, Chopin & Jacob
  2021 §3.1); per-particle step sizes start at ``d^{-1/4}`` (in the whitened units the mass
  matrix gives) and follow the same acceptance rule with ``a* = 0.65``.

Evaluations are counted where they happen, not from a formula: the density is wrapped so that
every call adds its rows (the vmapped batch size, through ``jax.custom_batching.custom_vmap``) to
a host-side tally (``jax.debug.callback``), and a call under differentiation (BlackJAX's
``value_and_grad``) is also tallied as a gradient. ``density_evals`` counts every evaluation of
``log π`` (those with a gradient included), ``gradient_evals`` those that also gave ``∇log π``.
The tally is one module-level counter, so calls must not run concurrently.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import blackjax
import jax
import jax.numpy as jnp
from blackjax.smc.resampling import systematic
from blackjax.smc.tuning.from_kernel_info import update_scale_from_acceptance_rate
from blackjax.smc.tuning.from_particles import inverse_mass_matrix_from_particles

__all__ = ["adaptive_tempered_smc", "counted", "tallied"]

TARGET_ACCEPTANCE = {"mala": 0.574, "hmc": 0.65}

_TALLY = {"density": 0, "gradient": 0}


def _add(name: str, rows: int) -> None:
    _TALLY[name] += rows


def _tally(name: str, rows: int = 1) -> Callable:
    """Identity on its argument that adds ``rows`` to ``_TALLY[name]`` each time it runs; under
    ``vmap`` it re-enters itself with ``rows`` times the batch size, so nested maps count every
    row."""

    @jax.custom_batching.custom_vmap
    def tally(x):
        jax.debug.callback(functools.partial(_add, name, rows))
        return x

    @tally.def_vmap
    def tally_vmap(axis_size, in_batched, x):
        return _tally(name, rows * axis_size)(x), in_batched[0]

    return tally


def counted(logdensity_fn: Callable) -> Callable:
    """``logdensity_fn`` (one point ``(d,)`` to a scalar) with every evaluation tallied: a plain
    call as a density, a call under ``jvp``/``grad`` as a density and a gradient."""

    @jax.custom_jvp
    def logdensity(x):
        return logdensity_fn(_tally("density")(x))

    @logdensity.defjvp
    def logdensity_jvp(primals, tangents):
        x = _tally("gradient")(primals[0])
        return jax.jvp(logdensity_fn, (x,), tangents)

    return logdensity


def tallied(fn: Callable, *args, **kwargs):
    """``(fn(*args, **kwargs), counts)``: the result (blocked on) and the evaluations of every
    :func:`counted` density it ran, ``counts = {"density_evals", "gradient_evals"}`` (densities
    include those with a gradient)."""
    jax.effects_barrier()
    _TALLY.update(density=0, gradient=0)
    out = jax.block_until_ready(fn(*args, **kwargs))
    jax.effects_barrier()
    return out, {"density_evals": _TALLY["density"] + _TALLY["gradient"],
                 "gradient_evals": _TALLY["gradient"]}


@functools.partial(jax.jit, static_argnames=("logdensity_fn", "kernel", "num_mcmc_steps",
                                             "num_integration_steps", "max_stages"))
def _run(key, logdensity_fn, positions, prior_scale, target_ess, *, kernel, num_mcmc_steps,
         num_integration_steps, max_stages):
    num_particles, dim = positions.shape
    dtype = positions.dtype
    density = counted(logdensity_fn)

    def logprior(x):
        return -0.5 * jnp.sum(jnp.square(x / prior_scale)) - dim * jnp.log(prior_scale)

    def loglikelihood(x):
        return density(x) - logprior(x)

    if kernel == "mala":
        step_fn, init_fn = blackjax.mala.build_kernel(), blackjax.mala.init
        step_size = jnp.full((num_particles,), prior_scale**2 * dim ** (-1 / 3), dtype)
    else:
        step_fn = functools.partial(blackjax.hmc.build_kernel(),
                                    num_integration_steps=num_integration_steps)
        init_fn = blackjax.hmc.init
        step_size = jnp.full((num_particles,), dim ** (-1 / 4), dtype)
    target_acceptance = TARGET_ACCEPTANCE[kernel]

    def parameters(state, step_size):
        if kernel == "mala":
            return {"step_size": step_size}
        return {"step_size": step_size,
                "inverse_mass_matrix": inverse_mass_matrix_from_particles(state.particles)[None]}

    def stage(carry):
        k, state, step_size, _ = carry
        smc = blackjax.adaptive_tempered_smc(
            logprior, loglikelihood, step_fn, init_fn, parameters(state, step_size), systematic,
            target_ess, num_mcmc_steps=num_mcmc_steps)
        new_state, info = smc.step(jax.random.fold_in(key, k), state)
        acceptance = jnp.mean(info.update_info.acceptance_rate, axis=1)
        step_size = update_scale_from_acceptance_rate(step_size, acceptance, target_acceptance)
        return k + 1, new_state, step_size, state.tempering_param

    def not_done(carry):
        k, _, _, started_at = carry
        return (k == 0) | ((started_at < 1.0) & (k < max_stages))

    state = blackjax.adaptive_tempered_smc.init(positions)
    state = state._replace(tempering_param=jnp.zeros((), dtype))
    num_stages, state, _, started_at = jax.lax.while_loop(
        not_done, stage, (jnp.zeros((), jnp.int32), state, step_size, jnp.zeros((), dtype)))
    return state.particles, num_stages, state.tempering_param, started_at


def adaptive_tempered_smc(key, logdensity_fn: Callable, positions, *, prior_scale: float = 1.0,
                          kernel: str = "mala", num_mcmc_steps: int = 10,
                          target_ess: float = 0.5, num_integration_steps: int = 5,
                          max_stages: int = 200):
    """BlackJAX adaptive tempered SMC from ``N(0, prior_scale² I)`` to ``logdensity_fn``.

    Args:
        key: PRNG key.
        logdensity_fn: ``log π`` up to a constant for one point ``(d,)``; hashable (it is a
            static argument of the compiled run).
        positions: ``(N, d)`` start particles, draws from ``N(0, prior_scale² I)``.
        prior_scale: sd ``s`` of the prior the path starts from.
        kernel: ``"mala"`` or ``"hmc"``, the mutation (module docstring: how each is tuned).
        num_mcmc_steps: MCMC steps per particle per stage (BlackJAX's default, 10).
        target_ess: ESS fraction each stage's weights keep (the next ``λ`` solves for it).
        num_integration_steps: leapfrog steps of one HMC step (``kernel="hmc"``).
        max_stages: cap on the stages, the final one at ``λ = 1`` included.

    Returns:
        ``(particles (N, d), info)``, ``info`` a dict: ``density_evals`` (every evaluation of
        ``log π``, with or without a gradient), ``gradient_evals`` (those with ``∇log π``), both
        counted at the density; ``num_stages`` (SMC steps run, the final move at ``λ = 1``
        included); ``final_temperature`` (``λ`` at the end); ``reached_one`` (whether ``λ``
        reached 1 and the final move ran there, so the particles target ``π``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> def logdensity(x):
        ...     return -0.5 * jnp.sum(jnp.square(x - 3.0))
        >>> x0 = jax.random.normal(jax.random.key(0), (50, 2))
        >>> x, info = adaptive_tempered_smc(jax.random.key(1), logdensity, x0)
        >>> x.shape, info["reached_one"], info["gradient_evals"] % 50
        ((50, 2), True, 0)
    """
    if kernel not in TARGET_ACCEPTANCE:
        raise ValueError(f"kernel: expected one of {sorted(TARGET_ACCEPTANCE)}, got {kernel!r}")
    positions = jnp.asarray(positions)
    (particles, num_stages, temperature, started_at), counts = tallied(
        _run, key, logdensity_fn, positions, jnp.asarray(prior_scale, positions.dtype),
        jnp.asarray(target_ess, positions.dtype), kernel=kernel, num_mcmc_steps=num_mcmc_steps,
        num_integration_steps=num_integration_steps, max_stages=max_stages)
    return particles, {
        **counts,
        "num_stages": int(num_stages),
        "final_temperature": float(temperature),
        "reached_one": bool(temperature >= 1.0) and bool(started_at >= 1.0),
    }

