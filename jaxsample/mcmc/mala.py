r"""MALA, the base kernel of the MCMC family, for one chain.

The Metropolis-adjusted Langevin algorithm (Roberts & Tweedie, 1996): the local, π-reversible
kernel that :func:`~jaxsample.mcmc.adaptive_stop` wraps, :func:`~jaxsample.mcmc.train_stopping`
learns over and :func:`~jaxsample.mcmc.parallel_tempering` runs on every rung. The transition is
:func:`jaxsample.kernels.langevin.mala_step` with the score as drift.

It follows the contract of every iterative sampler: :func:`init`, :func:`build_kernel` (no
structure) and the constructor :func:`mala`, whose step size is a traced value; ``jax.vmap`` it
for many chains. Positions may be pytrees (a dict of parameters): the kernel runs on one flat
vector (:mod:`jaxsample._pytree`) and the state holds the user's structure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsample import _pytree
from jaxsample._checks import (
    AUTODIFF,
    check_callable,
    check_hyperparameter,
    check_initial_logdensity,
    check_position,
    resolve_score_fn,
)
from jaxsample.core import SamplingAlgorithm, Step
from jaxsample.kernels.langevin import mala_step

__all__ = ["MALAInfo", "MALAState", "build_kernel", "init", "mala"]

PyTree = Any


class MALAState(NamedTuple):
    """One chain: ``position`` (an array ``(d,)`` or the user's pytree), its ``logdensity``,
    ``score`` (the gradient, shaped like ``position``) and ``step``, the steps taken (int32; it
    numbers :func:`jaxsample.run`'s step keys, so a continued run equals one long run)."""

    position: PyTree
    logdensity: jax.Array
    score: PyTree
    step: jax.Array


class MALAInfo(NamedTuple):
    """``acceptance_rate`` of the proposal, ``is_accepted``, ``nonfinite`` (proposal density)."""

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    nonfinite: jax.Array


def init(position: PyTree, logdensity_fn: Callable, score_fn=AUTODIFF) -> MALAState:
    """The MALA state at ``position`` (one density and gradient evaluation).

    Args:
        position: one point, an array ``(d,)`` or a pytree of arrays (valid: the constructor's
            ``init`` checks it).
        logdensity_fn: ``log π̃`` of one point in ``position``'s structure.
        score_fn: ``"autodiff"`` or ``∇log π̃`` in ``position``'s structure.
    """
    flat, structure = _pytree.ravel(position)
    logdensity, score = _pytree.value_and_score(logdensity_fn, score_fn, structure)(flat)
    return MALAState(position, logdensity.astype(flat.dtype),
                     _pytree.unravel(score.astype(flat.dtype), structure),
                     jnp.zeros((), jnp.int32))


@functools.cache
def build_kernel() -> Callable:
    """The MALA transition ``kernel(key, state, logdensity_fn, score_fn, *, step_size)``.

    ``score_fn`` is ``"autodiff"`` (differentiated inside the step) or a callable. Inputs are
    assumed valid (the constructor checked them). A proposal with a non-finite density or
    gradient is rejected and flagged in ``MALAInfo.nonfinite``; the chain never turns NaN.
    """

    def kernel(key, state: MALAState, logdensity_fn, score_fn=AUTODIFF, *, step_size):
        with jax.named_scope("mala"):
            x, structure = _pytree.ravel(state.position)
            move = mala_step(key, x, state.logdensity, _pytree.ravel(state.score)[0],
                             _pytree.value_and_score(logdensity_fn, score_fn, structure),
                             step_size)
            new = MALAState(_pytree.unravel(move.position, structure), move.logdensity,
                            _pytree.unravel(move.drift, structure), state.step + 1)
            return new, MALAInfo(move.acceptance_rate, move.is_accepted, move.nonfinite)

    return kernel


def mala(logdensity_fn: Callable, *, step_size, score_fn=None) -> SamplingAlgorithm:
    r"""MALA for one chain: Langevin proposal plus a Metropolis–Hastings correction.

    .. math::
        x' = x + h\nabla\log\pi(x) + \sqrt{2h}\,z,\qquad
        \alpha = \min\Big(1, \frac{\pi(x')\,q(x\mid x')}{\pi(x)\,q(x'\mid x)}\Big),\quad
        q(x'\mid x) = N(x';\, x + h\nabla\log\pi(x),\, 2hI).

    It leaves π invariant and is π-reversible, as :func:`~jaxsample.mcmc.train_stopping`'s Poisson
    loss needs. One density-and-gradient evaluation per step.

    **User functions and compilation** (the rule of every jaxsample method): ``logdensity_fn``
    and ``score_fn`` are part of the compiled step's cache key, float hyper-parameters are not.
    ``score_fn=None`` or ``"autodiff"`` differentiates ``logdensity_fn`` inside the step, so the
    key is the density alone; ``jax.grad(logdensity_fn)`` written inline is recognised as the
    same thing. Any other score function is the user's: build it once to reuse the compilation.

    Args:
        logdensity_fn: ``log π̃(x)`` of one point (unnormalised is fine): an array ``(d,)`` or
            any pytree of floating arrays (e.g. a dict of parameters).
        step_size: ``h > 0``, a traced value.
        score_fn: ``None`` / ``"autodiff"`` (the gradient of ``logdensity_fn``) or
            ``∇log π̃(x)`` returning the structure of ``x``.

    Returns:
        ``SamplingAlgorithm``; ``init(position)`` -> :class:`MALAState` (``position`` an array
        ``(d,)`` or a pytree; the state keeps its structure and leaf dtypes), ``step`` ->
        ``(MALAState, MALAInfo)``. An eager ``init`` where ``logdensity_fn`` is not finite
        raises ``ValueError``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.mcmc import mala
        >>> alg = mala(lambda x: -0.5 * jnp.sum(x**2), step_size=0.5)
        >>> state, trace = jaxsample.run(jax.random.key(0), alg, alg.init(jnp.zeros(2)), 20)
        >>> state.position.shape, trace.acceptance_rate.shape
        ((2,), (20,))

        A pytree position (the state keeps its keys):

        >>> ld = lambda p: -0.5 * (p["mu"] ** 2 + jnp.sum(p["beta"] ** 2))
        >>> alg = mala(ld, step_size=0.5)
        >>> state = alg.init({"mu": jnp.zeros(()), "beta": jnp.zeros(3)})
        >>> state, _ = jaxsample.run(jax.random.key(0), alg, state, 20)
        >>> sorted(state.position), state.position["beta"].shape
        (['beta', 'mu'], (3,))
    """
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    score_fn = resolve_score_fn(score_fn, logdensity_fn, default=AUTODIFF)
    step = Step(build_kernel(), logdensity_fn=logdensity_fn, score_fn=score_fn,
                step_size=check_hyperparameter("step_size", step_size))

    def init_fn(position, *, rng_key=None):
        del rng_key
        position = check_position("position", position)
        if _pytree.structure_of(position) is None and position.ndim != 1:
            raise ValueError(f"position must have 1 dimension(s), got shape {position.shape}")
        state = init(position, logdensity_fn, score_fn)
        check_initial_logdensity("logdensity_fn", logdensity_fn, state.logdensity, position)
        return state

    return SamplingAlgorithm(init_fn, step)
