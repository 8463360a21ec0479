r"""Parallel tempering (replica exchange), the non-local contrast of the MCMC family.

Swendsen & Wang (1986); Geyer (1991): one MALA move per rung of an inverse-temperature ladder
(:func:`jaxsample.kernels.langevin.mala_step` on every rung at once, targeting ``π^{β_k}``), then
a swap sweep between neighbours. BlackJAX has no parallel tempering; it is the non-local contrast
of the multimodal benchmarks.

It follows the contract of every iterative sampler (:func:`init`, :func:`build_kernel`, the
constructor :func:`parallel_tempering`; the ladder and the step size are traced values) for one
chain of ``K`` replicas; ``jax.vmap`` it for many. Positions may be pytrees
(:mod:`jaxsample._pytree`): the state then holds ``K`` points in the user's structure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample import _pytree
from jaxsample._checks import (
    AUTODIFF,
    check_array,
    check_callable,
    check_hyperparameter,
    check_initial_logdensity,
    check_position,
    is_concrete,
    resolve_score_fn,
)
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.kernels.langevin import mala_step

__all__ = ["TemperingInfo", "TemperingState", "build_kernel", "init", "parallel_tempering"]

PyTree = Any


class TemperingState(NamedTuple):
    """The replicas: ``position (K, d)`` (or the user's pytree with a leading ``K`` axis),
    ``logdensity (K,)`` (of π, untempered), ``score`` (shaped like ``position``) and ``step``,
    the steps taken (int32; it numbers :func:`jaxsample.run`'s step keys).

    Row 0 is the chain at inverse temperature 1 (the target).
    """

    position: PyTree
    logdensity: jax.Array
    score: PyTree
    step: jax.Array


class TemperingInfo(NamedTuple):
    """Mean MALA acceptance per rung ``(K,)``, swap acceptance per neighbour pair ``(K - 1,)``."""

    acceptance_rate: jax.Array
    swap_rate: jax.Array
    nonfinite: jax.Array


def init(position: PyTree, logdensity_fn: Callable, num_rungs: int,
         score_fn=AUTODIFF) -> TemperingState:
    """All ``num_rungs`` replicas at one point, or one per row of a flat ``position (K, d)``.

    A pytree ``position`` is one point (its leaves without a rung axis), copied to every rung.
    """
    structure = _pytree.structure_of(position)
    if structure is not None or position.ndim == 1:
        position = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (num_rungs,) + leaf.shape),
                                position)
    flat, structure = _pytree.ravel(position, batch_ndim=1)
    fn = jax.vmap(_pytree.value_and_score(logdensity_fn, score_fn, structure))
    logdensity, score = fn(flat)
    return TemperingState(position, logdensity.astype(flat.dtype),
                          _pytree.unravel(score.astype(flat.dtype), structure),
                          jnp.zeros((), jnp.int32))


@functools.cache
def build_kernel() -> Callable:
    """``kernel(key, state, logdensity_fn, score_fn, *, inverse_temperatures, step_size)``.

    One MALA move per rung ``k`` on ``π^{β_k}`` with step ``h/β_k``, then a swap sweep over the
    even or the odd neighbour pairs (a fair coin picks which), each accepted with probability
    ``min(1, exp((β_k − β_{k+1})(log π(x_{k+1}) − log π(x_k))))``. Both moves leave
    ``Π_k π^{β_k}`` invariant. Inputs are assumed valid.
    """

    def kernel(key, state: TemperingState, logdensity_fn, score_fn=AUTODIFF, *,
               inverse_temperatures, step_size):
        with jax.named_scope("parallel_tempering"):
            x, structure = _pytree.ravel(state.position, batch_ndim=1)
            dtype = x.dtype
            betas = jnp.asarray(inverse_temperatures, dtype)
            num_rungs = betas.shape[0]
            key_moves, key_parity, key_swaps = jax.random.split(key, 3)
            fn = jax.vmap(_pytree.value_and_score(logdensity_fn, score_fn, structure))
            move = mala_step(key_moves, x, state.logdensity,
                             _pytree.ravel(state.score, batch_ndim=1)[0], fn,
                             jnp.asarray(step_size, dtype) / betas, inverse_temperature=betas)
            parity = jax.random.bernoulli(key_parity).astype(jnp.int32)
            lower = jnp.arange(num_rungs - 1, dtype=jnp.int32)
            active = (lower % 2) == parity
            log_swap = (betas[:-1] - betas[1:]) * (move.logdensity[1:] - move.logdensity[:-1])
            swap_prob = jnp.exp(jnp.minimum(log_swap, 0.0))
            uniforms = jax.random.uniform(key_swaps, (num_rungs - 1,), dtype)
            swap = active & (uniforms < swap_prob)
            # rung k takes k+1's replica when pair (k, k+1) swaps, and k-1's when (k-1, k) does
            up = jnp.concatenate([swap, jnp.zeros((1,), bool)])
            down = jnp.concatenate([jnp.zeros((1,), bool), swap])
            index = (jnp.arange(num_rungs, dtype=jnp.int32) + up.astype(jnp.int32)
                     - down.astype(jnp.int32))
            new = TemperingState(_pytree.unravel(move.position[index], structure),
                                 move.logdensity[index],
                                 _pytree.unravel(move.drift[index], structure),
                                 state.step + 1)
            rate = jnp.where(active, swap_prob, jnp.nan)
            return new, TemperingInfo(move.acceptance_rate, rate, jnp.any(move.nonfinite))

    return kernel


def parallel_tempering(logdensity_fn: Callable, *, inverse_temperatures, step_size,
                       score_fn=None) -> SamplingAlgorithm:
    r"""Parallel tempering (replica exchange) with MALA moves on every rung, for one chain.

    The extended target is :math:`\prod_k \pi(x_k)^{\beta_k}` with
    ``1 = β_0 > β_1 > … > β_{K−1} > 0``. Each step moves every replica by MALA on its tempered
    target (step ``h/β_k``, so hot rungs take larger steps) and then proposes swaps of
    neighbouring replicas, accepted with probability
    :math:`\min\{1, e^{(\beta_k-\beta_{k+1})(\log\pi(x_{k+1})-\log\pi(x_k))}\}`. Row 0 of the
    state is a π-invariant chain that borrows the hot rungs' barrier crossings. ``K`` density and
    gradient evaluations per step.

    User functions follow the rule of :func:`~jaxsample.mcmc.mala` (``score_fn=None``,
    ``"autodiff"`` or an inline ``jax.grad(logdensity_fn)``: differentiated inside the step; the
    cache key is the density alone).

    Args:
        logdensity_fn: ``log π̃`` of one point (an array ``(d,)`` or a pytree of arrays).
        inverse_temperatures: ``(K,)`` with ``K >= 2``, the first equal to 1, strictly decreasing,
            positive; a traced array (``vmap`` over ladders of equal length works).
        step_size: MALA step at β = 1, a traced value.
        score_fn: ``None`` / ``"autodiff"`` or ``∇log π̃`` of one point.

    Returns:
        ``SamplingAlgorithm``; ``init(position)`` -> :class:`TemperingState`, with ``position``
        one point (an array ``(d,)`` or a pytree, copied to every rung) or a flat ``(K, d)``
        array (one row per rung). An eager ``init`` where ``logdensity_fn`` is not finite on any
        rung raises ``ValueError``.

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
    score_fn = resolve_score_fn(score_fn, logdensity_fn, default=AUTODIFF)
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
    step = Step(build_kernel(), logdensity_fn=logdensity_fn, score_fn=score_fn,
                inverse_temperatures=betas,
                step_size=check_hyperparameter("step_size", step_size))

    def init_fn(position, *, rng_key=None):
        del rng_key
        position = check_position("position", position)
        if _pytree.structure_of(position) is None and (
                position.ndim not in (1, 2)
                or (position.ndim == 2 and position.shape[0] != num_rungs)):
            raise ValueError(f"position must have shape (d,) or ({num_rungs}, d), got "
                             f"{position.shape}")
        state = init(position, logdensity_fn, num_rungs, score_fn)
        check_initial_logdensity("logdensity_fn", logdensity_fn, state.logdensity,
                                 state.position, batch_ndim=1)
        return state

    return SamplingAlgorithm(init_fn, step)
