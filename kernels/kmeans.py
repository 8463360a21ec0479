"""General k-means: chunked Lloyd iterations, k-means++ seeding, mini-batches.

``kmeans(key, points, K)`` partitions ``N`` points into ``K`` clusters without ever forming the
``N x K`` distance matrix: assignments (:func:`assign`) go through
:func:`jaxsample.kernels.pairwise.nearest` one chunk of points at a time
(:func:`jaxsample.kernels.chunking.map_rows`). The two-level softmax clusters its item table with
it; nothing in it is specific to that use.

Inputs are valid: the public entry points checked them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.pairwise import nearest, sq_distances, sq_norms
from jaxsample.kernels.resampling import categorical
from jaxsample.kernels.solver import SolverStats

__all__ = ["INITS", "KMeansOutput", "assign", "kmeans"]

INITS = ("kmeans++", "random")


class KMeansOutput(NamedTuple):
    """Result of :func:`kmeans` (arrays only).

    Attributes:
        centres: ``(K, d)`` the means of the returned partition (an empty cluster keeps its last
            centre).
        assignment: ``(N,)`` int32 cluster of every point, in ``[0, K)``.
        objective: ``()`` ``sum_i |x_i - centre|^2`` of the last assignment step (to the centres
            it was assigned to).
        solver: :class:`~jaxsample.kernels.solver.SolverStats`: Lloyd iterations (or
            mini-batch steps) run; ``RESULTS.successful`` only when the stopping rule of
            :func:`kmeans` held at one of them (the last allowed one included),
            ``RESULTS.max_iterations_reached`` when the cap stopped the loop first.
    """

    centres: jax.Array
    assignment: jax.Array
    objective: jax.Array
    solver: SolverStats


def assign(points, centres, origin, chunk_size: int | None = None):
    """``(argmin_c |x_i - mu_c|^2, min_c |x_i - mu_c|^2)`` for every point, one matmul per chunk.

    Distances are centred on ``origin`` (the data mean, for accuracy in float32) and computed by
    :func:`jaxsample.kernels.pairwise.nearest`, ``chunk_size`` points at a time (``None``: all).
    """
    centre_norms = sq_norms(centres - origin[None, :])
    return map_rows(lambda rows: nearest(rows, centres, centre=origin, y_sq_norms=centre_norms),
                    points, chunk_size=chunk_size)


def _seed(key, points, num_clusters, init, origin):
    """Initial centres: Forgy (``"random"``) or k-means++ D² seeding on a random subset."""
    n, d = points.shape
    subset_key, first_key, loop_key = jax.random.split(key, 3)
    if init == "random":
        return points[jax.random.choice(subset_key, n, (num_clusters,), replace=False)]
    size = min(n, 8 * num_clusters)
    subset = points if size == n else points[
        jax.random.choice(subset_key, n, (size,), replace=False)]
    first = subset[jax.random.randint(first_key, (), 0, size)]
    centres = jnp.zeros((num_clusters, d), points.dtype).at[0].set(first)
    dist = sq_distances(subset, first[None, :], centre=origin)[:, 0]

    def pick(j, carry):
        centres, dist = carry
        # D² sampling; a subset with every point on a centre already falls back to uniform
        log_w = jnp.where(jnp.sum(dist) > 0, jnp.log(dist), jnp.zeros_like(dist))
        centre = subset[categorical(jax.random.fold_in(loop_key, j), log_w)]
        dist = jnp.minimum(dist, sq_distances(subset, centre[None, :], centre=origin)[:, 0])
        return centres.at[j].set(centre), dist

    return jax.lax.fori_loop(1, num_clusters, pick, (centres, dist))[0]


def kmeans(key, points, num_clusters: int, max_iterations=20, tolerance=1e-4, *,
           init: str = "kmeans++", batch_size: int | None = None,
           chunk_size: int | None = None, progress=None) -> KMeansOutput:
    """k-means with chunked assignments: one matrix product per chunk of points.

    Seeding: ``"kmeans++"`` (D² sampling, Arthur & Vassilvitskii 2007, on a uniform random subset
    of ``min(N, 8K)`` points so that seeding costs ``O(8 K^2 d)``, not ``O(N K d)``) or
    ``"random"`` (K distinct points, Forgy). Then either

    - Lloyd (``batch_size=None``): ``c(i) = argmin_c |x_i - mu_c|^2`` for all points, then
      ``mu_c = mean_{c(i) = c} x_i``; the objective ``J_t = sum_i min_c |x_i - mu_c|^2`` is
      non-increasing; stops when ``J_{t-1} - J_t <= tolerance * J_t`` (converged) or after
      ``max_iterations``; or
    - mini-batch (Sculley 2010): each step assigns ``batch_size`` uniformly drawn points and moves
      each centre to the running mean of every point ever assigned to it; stops when the mean
      squared centre shift is ``<= tolerance`` times the data's mean squared distance to its mean,
      or after ``max_iterations`` steps; a final full (chunked) assignment gives the partition.

    Assignments go through :func:`jaxsample.kernels.pairwise.nearest` (one matrix product and two
    row reductions, centred on the data mean; seeding uses ``sq_distances``) and
    :func:`jaxsample.kernels.chunking.map_rows` (``chunk_size`` points at a time, so the
    ``N x K`` distance matrix never exists). Hand-written because ott-jax's ``k_means``
    materialises the dense ``N x K`` cost matrix at every iteration (16 GB at N = 10^6, K = 4096
    in float32). Inputs are valid (checked by the caller).

    Args:
        key: PRNG key (seeding and mini-batches).
        points: ``(N, d)`` float array.
        num_clusters: K <= N, a Python int.
        max_iterations: iteration cap (a traced int: changing it does not recompile).
        tolerance: stopping tolerance (traced float).
        init: ``"kmeans++"`` or ``"random"``.
        batch_size: points per mini-batch step; None for full-batch Lloyd.
        chunk_size: points per assignment chunk; None for all at once.
        progress: a progress meter (``report(step, num_steps)``, :mod:`jaxsample.progress`)
            called from inside the compiled loop after every iteration, or None (nothing
            added). With a meter, ``max_iterations`` must be a Python int (it is the meter's
            ``num_steps``); a run that converges early stops short of it.

    Returns:
        :class:`KMeansOutput`.

    Example:
        >>> import jax
        >>> x = jax.random.normal(jax.random.key(0), (1000, 8))
        >>> out = kmeans(jax.random.key(1), x, 30, chunk_size=256)
        >>> out.centres.shape, out.assignment.shape, int(out.solver.num_iterations) <= 20
        ((30, 8), (1000,), True)
    """
    num_steps = None if progress is None else int(max_iterations)
    return _kmeans(key, points, num_clusters, max_iterations, tolerance, init=init,
                   batch_size=batch_size, chunk_size=chunk_size, progress=progress,
                   num_steps=num_steps)


@functools.partial(jax.jit, static_argnames=("num_clusters", "init", "batch_size", "chunk_size",
                                             "progress", "num_steps"))
def _kmeans(key, points, num_clusters, max_iterations, tolerance, *, init, batch_size,
            chunk_size, progress, num_steps):
    def report(it):
        if progress is not None:
            progress.report(it, num_steps)

    with jax.named_scope("kmeans"):
        n, d = points.shape
        dtype = points.dtype
        origin = jnp.mean(points, axis=0)
        seed_key, batch_key = jax.random.split(key)
        centres = _seed(seed_key, points, num_clusters, init, origin)
        tol = jnp.asarray(tolerance, dtype)
        cap = jnp.asarray(max_iterations, jnp.int32)

        def sums_and_counts(x, ids):
            sums = jax.ops.segment_sum(x, ids, num_segments=num_clusters)
            counts = jax.ops.segment_sum(jnp.ones(x.shape[0], dtype), ids,
                                         num_segments=num_clusters)
            return sums, counts

        if batch_size is None:
            def lloyd(state):
                it, centres, _, objective, _ = state
                ids, dist = assign(points, centres, origin, chunk_size)
                new_objective = jnp.sum(dist)
                converged = objective - new_objective <= tol * new_objective
                sums, counts = sums_and_counts(points, ids)
                safe = jnp.maximum(counts, jnp.ones((), dtype))[:, None]
                centres = jnp.where(counts[:, None] > 0, sums / safe, centres)
                report(it + 1)
                return it + 1, centres, ids, new_objective, converged

            state = (jnp.zeros((), jnp.int32), centres, jnp.zeros(n, jnp.int32),
                     jnp.asarray(jnp.inf, dtype), jnp.zeros((), bool))
            it, centres, ids, objective, converged = jax.lax.while_loop(
                lambda s: (s[0] < cap) & ~s[4], lloyd, state)
            return KMeansOutput(centres, ids, objective, SolverStats.of(it, converged=converged))

        spread = jnp.mean(sq_norms(points - origin[None, :]))

        def minibatch(state):
            it, centres, counts, _ = state
            rows = jax.random.randint(jax.random.fold_in(batch_key, it), (batch_size,), 0, n)
            x = points[rows]
            ids, _ = assign(x, centres, origin, chunk_size)
            sums, batch_counts = sums_and_counts(x, ids)
            counts = counts + batch_counts
            safe = jnp.maximum(counts, jnp.ones((), dtype))[:, None]
            new = centres + (sums - batch_counts[:, None] * centres) / safe
            shift = jnp.mean(sq_norms(new - centres))
            report(it + 1)
            return it + 1, new, counts, shift <= tol * spread

        state = (jnp.zeros((), jnp.int32), centres, jnp.zeros(num_clusters, dtype),
                 jnp.zeros((), bool))
        it, centres, _, converged = jax.lax.while_loop(
            lambda s: (s[0] < cap) & ~s[3], minibatch, state)
        ids, dist = assign(points, centres, origin, chunk_size)
        return KMeansOutput(centres, ids, jnp.sum(dist), SolverStats.of(it, converged=converged))
