r"""Base and contrast kernels of the MCMC family: MALA and parallel tempering.

Both follow the contract of every iterative sampler (``init`` / ``build_kernel`` / a constructor
returning :class:`~jaxsample.SamplingAlgorithm`, the float step size a traced value), for **one
chain**: ``jax.vmap`` them for many, as :func:`~jaxsample.mcmc.sample_until_stopped` does.

* :func:`mala` — the Metropolis-adjusted Langevin algorithm (Roberts & Tweedie, 1996), the local,
  π-reversible base kernel that :func:`~jaxsample.mcmc.adaptive_stop` wraps and
  :func:`~jaxsample.mcmc.train_stopping` learns over.
* :func:`parallel_tempering` — replica exchange (Swendsen & Wang 1986; Geyer 1991): one MALA move
  per rung of an inverse-temperature ladder, then a swap sweep between neighbours. BlackJAX has no
  parallel tempering; it is the non-local contrast of the multimodal benchmarks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_array, check_callable, check_hyperparameter, is_concrete
from jaxsample.core import SamplingAlgorithm, Step

__all__ = [
    "MALAInfo",
    "MALAState",
    "TemperingInfo",
    "TemperingState",
    "build_mala_kernel",
    "build_tempering_kernel",
    "mala",
    "mala_init",
    "parallel_tempering",
    "tempering_init",
]


class MALAState(NamedTuple):
    """One chain: ``position (d,)``, its ``logdensity`` and ``score`` (the gradient)."""

    position: jax.Array
    logdensity: jax.Array
    score: jax.Array


class MALAInfo(NamedTuple):
    """``acceptance_rate`` of the proposal, ``is_accepted``, ``nonfinite`` (proposal density)."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def _value_and_score(logdensity_fn, x):
    return jax.value_and_grad(logdensity_fn)(x)


def mala_init(position: jax.Array, logdensity_fn: Callable) -> MALAState:
    """The MALA state at ``position (d,)`` (one density and gradient evaluation)."""
    logdensity, score = _value_and_score(logdensity_fn, position)
    return MALAState(position, logdensity.astype(position.dtype), score)


def _mala_move(key, state, logdensity_fn, step_size, beta):
    """One MALA transition targeting ``π^β``: returns the new state and ``(alpha, accept, bad)``.

    Proposal ``x' = x + h β∇log π(x) + √(2h) z``; ``log q(x'|x) = −‖x' − x − hβ∇log π(x)‖²/4h``.
    """
    x = state.position
    h = jnp.asarray(step_size, x.dtype)
    beta = jnp.asarray(beta, x.dtype)
    key_move, key_accept = jax.random.split(key)
    noise = jax.random.normal(key_move, x.shape, x.dtype)
    proposal = x + h * beta * state.score + jnp.sqrt(2 * h) * noise
    logdensity, score = _value_and_score(logdensity_fn, proposal)
    logdensity = logdensity.astype(x.dtype)

    def log_q(to, frm, frm_score):
        diff = to - frm - h * beta * frm_score
        return -jnp.sum(diff * diff) / (4 * h)

    log_ratio = (beta * (logdensity - state.logdensity) + log_q(x, proposal, score)
                 - log_q(proposal, x, state.score))
    bad = ~(jnp.isfinite(log_ratio) & jnp.all(jnp.isfinite(score)))
    log_ratio = jnp.where(bad, -jnp.inf, log_ratio)
    alpha = jnp.exp(jnp.minimum(log_ratio, 0.0))
    accept = jax.random.uniform(key_accept, (), x.dtype) < alpha
    new = MALAState(jnp.where(accept, proposal, x), jnp.where(accept, logdensity, state.logdensity),
                    jnp.where(accept, score, state.score))
    return new, (alpha, accept, bad)


@functools.cache
def build_mala_kernel() -> Callable:
    """The MALA transition ``kernel(key, state, logdensity_fn, *, step_size)`` (no structure).

    Inputs are assumed valid (the constructor checked them). A proposal with a non-finite density
    or gradient is rejected and flagged in ``MALAInfo.nonfinite``; the chain never turns NaN.
    """

    def kernel(key, state: MALAState, logdensity_fn, *, step_size):
        with jax.named_scope("mala"):
            new, (alpha, accept, bad) = _mala_move(key, state, logdensity_fn, step_size, 1.0)
            return new, MALAInfo(alpha, accept, bad)

    return kernel


def mala(logdensity_fn: Callable, *, step_size) -> SamplingAlgorithm:
    r"""MALA for one chain: Langevin proposal plus a Metropolis–Hastings correction.

    .. math::
        x' = x + h\nabla\log\pi(x) + \sqrt{2h}\,z,\qquad
        \alpha = \min\Big(1, \frac{\pi(x')\,q(x\mid x')}{\pi(x)\,q(x'\mid x)}\Big),\quad
        q(x'\mid x) = N(x';\, x + h\nabla\log\pi(x),\, 2hI).

    It leaves π invariant and is π-reversible, as :func:`~jaxsample.mcmc.train_stopping`'s Poisson
    loss needs. One density-and-gradient evaluation per step.

    Args:
        logdensity_fn: ``log π̃(x)`` of one point ``(d,)`` (unnormalised is fine).
        step_size: ``h > 0``, a traced value.

    Returns:
        ``SamplingAlgorithm``; ``init(position (d,))`` -> :class:`MALAState`, ``step`` ->
        ``(MALAState, MALAInfo)``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.mcmc import mala
        >>> alg = mala(lambda x: -0.5 * jnp.sum(x**2), step_size=0.5)
        >>> state, trace = jaxsample.run(jax.random.key(0), alg, alg.init(jnp.zeros(2)), 20)
        >>> state.position.shape, trace.acceptance_rate.shape
        ((2,), (20,))
    """
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    step = Step(build_mala_kernel(), logdensity_fn=logdensity_fn,
                step_size=check_hyperparameter("step_size", step_size))

    def init_fn(position, *, rng_key=None):
        del rng_key
        if is_concrete(position):
            position = check_array("position", position, ndim=1, finite=True)
        return mala_init(position, logdensity_fn)

    return SamplingAlgorithm(init_fn, step)


class TemperingState(NamedTuple):
    """The replicas: ``position (K, d)``, ``logdensity (K,)`` (of π, untempered), ``score (K, d)``.

    Row 0 is the chain at inverse temperature 1 (the target).
    """

    position: jax.Array
    logdensity: jax.Array
    score: jax.Array


class TemperingInfo(NamedTuple):
    """Mean MALA acceptance per rung ``(K,)``, swap acceptance per neighbour pair ``(K - 1,)``."""

    acceptance_rate: jax.Array
    swap_rate: jax.Array
    nonfinite: jax.Array


def tempering_init(position: jax.Array, logdensity_fn: Callable, num_rungs: int) -> TemperingState:
    """All ``num_rungs`` replicas at ``position (d,)``, or one per row of ``position (K, d)``."""
    if position.ndim == 1:
        position = jnp.broadcast_to(position, (num_rungs, position.shape[0]))
    logdensity, score = jax.vmap(functools.partial(_value_and_score, logdensity_fn))(position)
    return TemperingState(position, logdensity.astype(position.dtype), score)


@functools.cache
def build_tempering_kernel() -> Callable:
    """``kernel(key, state, logdensity_fn, *, inverse_temperatures, step_size)``.

    One MALA move per rung ``k`` on ``π^{β_k}`` with step ``h/β_k``, then a swap sweep over the
    even or the odd neighbour pairs (a fair coin picks which), each accepted with probability
    ``min(1, exp((β_k − β_{k+1})(log π(x_{k+1}) − log π(x_k))))``. Both moves leave
    ``Π_k π^{β_k}`` invariant. Inputs are assumed valid.
    """

    def kernel(key, state: TemperingState, logdensity_fn, *, inverse_temperatures, step_size):
        with jax.named_scope("parallel_tempering"):
            dtype = state.position.dtype
            betas = jnp.asarray(inverse_temperatures, dtype)
            num_rungs = betas.shape[0]
            key_moves, key_parity, key_swaps = jax.random.split(key, 3)
            h = jnp.asarray(step_size, dtype) / betas
            rungs, (alpha, _, bad) = jax.vmap(
                lambda k, s, hk, b: _mala_move(k, s, logdensity_fn, hk, b))(
                jax.random.split(key_moves, num_rungs), MALAState(*state), h, betas)
            parity = jax.random.bernoulli(key_parity).astype(jnp.int32)
            lower = jnp.arange(num_rungs - 1)
            active = (lower % 2) == parity
            log_swap = (betas[:-1] - betas[1:]) * (rungs.logdensity[1:] - rungs.logdensity[:-1])
            swap_prob = jnp.exp(jnp.minimum(log_swap, 0.0))
            uniforms = jax.random.uniform(key_swaps, (num_rungs - 1,), dtype)
            swap = active & (uniforms < swap_prob)
            # rung k takes k+1's replica when pair (k, k+1) swaps, and k-1's when (k-1, k) does
            up = jnp.concatenate([swap, jnp.zeros((1,), bool)])
            down = jnp.concatenate([jnp.zeros((1,), bool), swap])
            index = jnp.arange(num_rungs) + up.astype(jnp.int32) - down.astype(jnp.int32)
            new = TemperingState(*(leaf[index] for leaf in rungs))
            rate = jnp.where(active, swap_prob, jnp.nan)
            return new, TemperingInfo(alpha, rate, jnp.any(bad))

    return kernel


def parallel_tempering(logdensity_fn: Callable, *, inverse_temperatures,
                       step_size) -> SamplingAlgorithm:
    r"""Parallel tempering (replica exchange) with MALA moves on every rung, for one chain.

    The extended target is :math:`\prod_k \pi(x_k)^{\beta_k}` with
    ``1 = β_0 > β_1 > … > β_{K−1} > 0``. Each step moves every replica by MALA on its tempered
    target (step ``h/β_k``, so hot rungs take larger steps) and then proposes swaps of
    neighbouring replicas, accepted with probability
    :math:`\min\{1, e^{(\beta_k-\beta_{k+1})(\log\pi(x_{k+1})-\log\pi(x_k))}\}`. Row 0 of the
    state is a π-invariant chain that borrows the hot rungs' barrier crossings. ``K`` density and
    gradient evaluations per step.

    Args:
        logdensity_fn: ``log π̃`` of one point ``(d,)``.
        inverse_temperatures: ``(K,)`` with ``K >= 2``, the first equal to 1, strictly decreasing,
            positive; a traced array (``vmap`` over ladders of equal length works).
        step_size: MALA step at β = 1, a traced value.

    Returns:
        ``SamplingAlgorithm``; ``init(position (d,) or (K, d))`` -> :class:`TemperingState`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.mcmc import parallel_tempering
        >>> alg = parallel_tempering(lambda x: -jnp.sum((x**2 - 1) ** 2) / 0.1,
        ...                          inverse_temperatures=[1.0, 0.3, 0.1], step_size=0.02)
        >>> state, trace = jaxsample.run(jax.random.key(0), alg, alg.init(jnp.ones(1)), 50)
        >>> state.position.shape, trace.swap_rate.shape
        ((3, 1), (50, 2))
    """
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    betas = check_array("inverse_temperatures", inverse_temperatures, ndim=1, kind="numeric",
                        finite=True)
    if is_concrete(betas):
        values = np.asarray(betas, np.float64)
        if values.shape[0] < 2:
            raise ValueError(f"inverse_temperatures needs at least 2 rungs, got {values.shape[0]}")
        if values[0] != 1.0 or np.any(np.diff(values) >= 0) or values[-1] <= 0:
            raise ValueError("inverse_temperatures must start at 1 and decrease strictly to a "
                             f"positive value, got {values}")
        betas = values
    num_rungs = betas.shape[0]
    step = Step(build_tempering_kernel(), logdensity_fn=logdensity_fn,
                inverse_temperatures=betas,
                step_size=check_hyperparameter("step_size", step_size))

    def init_fn(position, *, rng_key=None):
        del rng_key
        if is_concrete(position):
            position = check_array("position", position, finite=True)
            if position.ndim not in (1, 2) or (position.ndim == 2
                                               and position.shape[0] != num_rungs):
                raise ValueError(f"position must have shape (d,) or ({num_rungs}, d), got "
                                 f"{position.shape}")
        return tempering_init(position, logdensity_fn, num_rungs)

    return SamplingAlgorithm(init_fn, step)
