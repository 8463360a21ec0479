"""Baselines of the subset family: greedy maximum coverage, k-center greedy.

:func:`greedy_max_coverage` is the ``(1 − 1/e)``-optimal greedy algorithm (Nemhauser, Wolsey &
Fisher 1978), the unstable reference point of :func:`jaxsample.subset.stable_max_coverage`: it is
deterministic, so its sensitivity to a one-element change of the instance is ``|A(I) Δ A(I′)|``.
:func:`k_center_greedy` (farthest point first) is the coreset peer of
:func:`jaxsample.subset.leverage_select`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample._checks import check_int
from jaxsample.kernels import coverage as coverage_kernel
from jaxsample.kernels.pairwise import sq_norms
from jaxsample.subset.coverage import prepare_incidence

__all__ = ["GreedyInfo", "greedy_max_coverage", "k_center_greedy"]


class GreedyInfo(NamedTuple):
    """What :func:`greedy_max_coverage` reports besides the mask.

    Attributes:
        order: ``(k,)`` int32 set ids in the order chosen.
        gains: ``(k,)`` marginal gain of each pick (non-increasing: submodularity).
        coverage: ``cov(A)`` of the chosen sets (the sum of the gains).
        nonfinite: a NaN/inf in the gains (only from non-finite weights passed under ``jit``).
    """

    order: jax.Array
    gains: jax.Array
    coverage: jax.Array
    nonfinite: jax.Array


@functools.partial(jax.jit, static_argnames=("k",))
def _greedy(incidence, weights, k):
    mask, order, gains = coverage_kernel.greedy_coverage(incidence, weights, k)
    value = coverage_kernel.mask_coverage(incidence, weights, mask)
    nonfinite = ~jax.numpy.all(jax.numpy.isfinite(gains)) | ~jax.numpy.isfinite(value)
    return mask, GreedyInfo(order, gains, value, nonfinite)


def greedy_max_coverage(incidence, k: int, weights=None) -> tuple[jax.Array, GreedyInfo]:
    """Greedy maximum coverage: k times, the set covering the most uncovered weight.

    Ties go to the lowest set id. Each pick is one ``Bᵀu`` pass over the incidence (dense, or the
    padded form of :func:`jaxsample.subset.sparse_incidence`).

    Args:
        incidence: ``(n, m)`` dense bool/0-1 array (elements × sets) or a ``PaddedIncidence``.
        k: number of sets, ``1 <= k <= m``.
        weights: ``(n,)`` element weights ``>= 0`` (default ones).

    Returns:
        ``(mask (m,) bool, GreedyInfo)``.

    Raises:
        ValueError, TypeError: naming the argument (``k > m``, negative weights, non-finite or
            non-0/1 incidence).

    Example:
        >>> import numpy as np
        >>> incidence = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]], bool)
        >>> mask, info = greedy_max_coverage(incidence, 2)
        >>> mask.tolist(), info.order.tolist(), float(info.coverage)
        ([True, False, True], [0, 2], 4.0)
    """
    incidence, weights = prepare_incidence(incidence, weights)
    k = check_int("k", k, 1, coverage_kernel.num_sets(incidence))
    return _greedy(incidence, weights, k)


@functools.partial(jax.jit, static_argnames="k")
def k_center_greedy(x, k: int, first=0):
    """k-center greedy (Gonzalez 1985; the coreset of Sener & Savarese 2018): farthest point next.

    Starts from row ``first``; each pick is the row farthest (Euclidean) from every pick so far,
    one pass over ``x`` per pick (``‖x_i‖² + ‖c‖² − 2 x_i·c``), lowest index among exact ties.

    Example:
        >>> import jax.numpy as jnp
        >>> k_center_greedy(jnp.array([[0.0], [1.0], [5.0], [2.0]]), 3).tolist()
        [0, 2, 3]
    """
    norms = sq_norms(x)

    def body(t, carry):
        nearest, order = carry
        j = jnp.where(t == 0, first, jnp.argmax(nearest)).astype(jnp.int32)
        centre = x[j]
        cross = jnp.matmul(x, centre, precision=jax.lax.Precision.HIGHEST)
        distance = jnp.maximum(norms + norms[j] - 2 * cross, 0)
        return jnp.minimum(nearest, distance).at[j].set(-1), order.at[t].set(j)

    start = jnp.full(x.shape[0], jnp.inf, x.dtype)
    _, order = jax.lax.fori_loop(0, k, body, (start, jnp.zeros((k,), jnp.int32)))
    return order
