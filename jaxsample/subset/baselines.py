"""Baselines of the subset family: greedy maximum coverage.

:func:`greedy_max_coverage` is the ``(1 − 1/e)``-optimal greedy algorithm (Nemhauser, Wolsey &
Fisher 1978), the unstable reference point of :func:`jaxsample.subset.stable_max_coverage`: it is
deterministic, so its sensitivity to a one-element change of the instance is ``|A(I) Δ A(I′)|``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax

from jaxsample._checks import check_int
from jaxsample.kernels import coverage as coverage_kernel
from jaxsample.subset.coverage import prepare_incidence

__all__ = ["GreedyInfo", "greedy_max_coverage"]


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
