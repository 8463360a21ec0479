"""Two-level softmax kernels: cluster statistics, cluster-logit rules, the two-stage draw.

The target is the softmax over N items, ``p(i) = exp(s_i) / Z`` with ``s_i = q·x_i / tau``. A
two-level sampler draws a cluster ``c ~ softmax(l)`` and then an item from the exact softmax of the
members of ``c``. With ``Z_c = sum_{i in c} exp(s_i)`` the proposal is

    log q(i) = log_softmax(l)_{c(i)} + s_i - log Z_{c(i)},

which equals ``p`` iff ``l_c = log Z_c + const``. The exact cluster mass decomposes as

    log Z_c = log n_c + q·mu_c / tau + log mean_{i in c} exp(s_i - q·mu_c / tau),

and the three cluster-logit rules keep more of it (Size- and Dispersion-Corrected Two-Level Softmax
Sampling, SPIGM @ ICML 2026):

- ``"2ls"``: ``l_c = q·mu_c / tau`` (centroid score only);
- ``"s"``:   ``l_c = q·mu_c / tau + log n_c`` (size-corrected, no query-time cost);
- ``"sd"``:  ``l_c = q·mu_c / tau + log n_c + q^T Sigma_c q / (2 tau^2)`` (size- and
  dispersion-corrected: the second cumulant of the within-cluster scores, exact for Gaussian
  scores);
- ``"sd_saturated"``: ``"sd"`` with the dispersion term ``D(v) = v / 2`` replaced, past
  ``v = 2 log n_c``, by ``sqrt(2 v log n_c) - log n_c`` (``v = q^T Sigma_c q / tau^2``, the
  variance of the cluster's scores).

**Why saturate.** ``log mean_{i in c} exp(s_i - sbar_c)`` is the cumulant generating function of
the cluster's score deviations at ``1 / tau``: for a cluster of ``n_c`` members it is at most
``max_i (s_i - sbar_c)``, linear in ``1 / tau``, while ``v / 2`` is quadratic. For ``n_c``
Gaussian scores of variance ``v`` the mean exponential follows ``v / 2`` only while
``v < 2 log n_c``; past it the largest member dominates, ``max_i (s_i - sbar_c) ~
sqrt(2 v log n_c)`` and the mean is ``~ exp(sqrt(2 v log n_c)) / n_c`` (the freezing transition
of Derrida's random energy model). The two branches meet with equal value and slope at
``v = 2 log n_c``. So ``"sd"`` over-weights dispersed clusters once the logits are peaked
(small ``tau`` or long queries: a trained model's regime), by ``(sqrt(v / 2) -
sqrt(log n_c))^2`` nats; ``"sd_saturated"`` equals ``"sd"`` wherever ``v <= 2 log n_c`` (flat
logits) and stays bounded by the largest-member term beyond it (measured in
``bench/results_softmax_peaked.md``).

``Sigma_c`` (population covariance, 1/n_c) is stored as ``diag(dispersion_diag_c) + F_c^T F_c``
with ``F_c`` of shape ``(r, d)``: ``r = 0`` is the diagonal approximation, ``0 < r < d`` a top-r
PCA with an isotropic residual, ``r = d`` the full covariance (the paper's SD-2LS).

**Ragged clusters.** The members of a cluster are one contiguous run of
``ClusterStats.sorted_embeddings`` (the table ordered by cluster). The item stage streams that run
in blocks of ``b`` rows (the block size, a static shape): per block one ``(b, d)`` dynamic slice,
its scores, their log-sum-exp, and a one-uniform weighted-reservoir update (the running pick is
replaced by the block's own inverse-CDF pick with probability ``Z_block / Z_so_far``; the same
uniform, rescaled, makes the pick inside the block), so a draw from cluster c costs
``O(ceil(n_c / b) b d)``, not ``O(max_c n_c d)``: uneven partitions cost what their clusters
weigh. The pick is exact: item ``i`` of block ``k`` survives with probability
``(Z_k / Z_{<=k}) (e^{s_i} / Z_k) prod_{j > k} (Z_{<j} / Z_{<=j}) = e^{s_i} / Z_c``.
Query time is ``O(K (r + 1) d)`` for the cluster logits plus ``O(n_c d)`` per draw, against
``O(N d)`` for the exact softmax.

**Exclusion.** Items can be removed per query (``excluded``: ``(B, E)`` item ids sorted
ascending, ``-1`` for padding): inside a cluster the excluded members get no mass, and a cluster
whose members are all excluded gets logit ``-inf``; the other cluster logits are unchanged. The
proposal is then ``log q_E(i) = log_softmax(l_E)_{c(i)} + s_i - log Z^E_{c(i)}`` with
``Z^E_c`` the mass of the cluster's remaining members, exact and normalised over the remaining
items; membership is a binary search in the sorted list (``O(b log E)`` per block) and the
exhausted clusters are counted in ``O(E)``, so exclusion adds no pass over other clusters.

Inputs are valid: the public entry points (:mod:`jaxsample.softmax.two_level`) checked them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.logspace import segment_logsumexp
from jaxsample.kernels.resampling import categorical, cumulative_sum

__all__ = [
    "VARIANTS",
    "ClusterStats",
    "block_size",
    "cluster_logits",
    "cluster_stats",
    "draw_clusters",
    "draw_members",
    "exact_log_partition",
    "exact_log_probs",
    "exhausted_clusters",
    "sampled_softmax_logits",
    "saturated_dispersion",
    "split_clusters",
    "split_keys",
    "two_level_log_prob",
    "two_level_log_probs_all",
    "two_level_sample",
]

VARIANTS = ("2ls", "s", "sd", "sd_saturated")


class ClusterStats(NamedTuple):
    """Per-cluster statistics of an item table (a pytree; passes through ``jit``).

    Attributes:
        log_size: ``(K,)`` ``log n_c``; ``-inf`` for an empty cluster (never sampled).
        mean: ``(K, d)`` cluster means ``mu_c`` (zero for an empty cluster).
        dispersion_diag: ``(K, d)`` diagonal part of ``Sigma_c``.
        dispersion_factors: ``(K, r, d)`` low-rank part, ``Sigma_c ~ diag + F_c^T F_c``.
        sizes: ``(K,)`` int32 ``n_c``.
        starts: ``(K,)`` int32 first row of each cluster in ``sorted_embeddings``.
        sorted_ids: ``(N,)`` int32 item ids ordered by cluster (stable): row ``starts[c] + j`` of
            the sorted table is item ``sorted_ids[starts[c] + j]``.
        item_rows: ``(N,)`` int32, the inverse: item i is row ``item_rows[i]``.
        sorted_embeddings: ``(N + b, d)`` the item table ordered by cluster, then ``b`` zero rows
            (``b`` is the block size of the item stage, :func:`block_size`), so every block of
            ``b`` rows starting inside the table is in bounds.
    """

    log_size: jax.Array
    mean: jax.Array
    dispersion_diag: jax.Array
    dispersion_factors: jax.Array
    sizes: jax.Array
    starts: jax.Array
    sorted_ids: jax.Array
    item_rows: jax.Array
    sorted_embeddings: jax.Array


def block_size(stats: ClusterStats) -> int:
    """The rows ``b`` the item stage reads at a time (static: set by the shapes)."""
    return stats.sorted_embeddings.shape[0] - stats.sorted_ids.shape[0]


def _sizes(cluster_ids, num_clusters):
    return jnp.zeros(num_clusters, jnp.int32).at[cluster_ids].add(1)


@functools.partial(jax.jit, static_argnames=("num_clusters", "max_cluster_size"))
def split_clusters(embeddings, cluster_ids, num_clusters: int, max_cluster_size: int):
    """Cuts every cluster larger than m into balanced slabs along its principal axis.

    A cluster of ``n_c`` members becomes ``p_c = ceil(n_c / m)`` pieces of ``floor(n_c / p_c)`` or
    ``ceil(n_c / p_c) <= m`` members: its members are ordered by their projection on the
    cluster's leading principal axis (8 power iterations on the within-cluster covariance, by
    segment sums: ``O(N d)`` each) and cut into consecutive runs, so each piece has less spread
    along the direction of largest spread than its parent. Any partition keeps the two-level
    proposal exact in law (``log q`` is reported for the pieces); this one also lowers the
    dispersion the cluster-logit rules must approximate. Clusters of at most m members keep one
    piece.

    Args:
        embeddings: ``(N, d)`` float item table.
        cluster_ids: ``(N,)`` integer ids in ``[0, num_clusters)``, every cluster non-empty.
        num_clusters: K, a Python int.
        max_cluster_size: m >= 1, a Python int.

    Returns:
        ``(new_ids, num_pieces)``: ``(N,)`` int32 ids in ``[0, num_pieces)``, pieces of one
        cluster numbered consecutively, and the ``()`` int32 total ``sum_c p_c``.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[3.0], [0.0], [2.0], [1.0], [9.0]])
        >>> ids, total = split_clusters(x, jnp.array([0, 0, 0, 0, 1]), 2, 2)
        >>> int(total), ids[:4].tolist() in ([1, 0, 1, 0], [0, 1, 0, 1])
        (3, True)
    """
    with jax.named_scope("split_clusters"):
        dtype = embeddings.dtype
        cluster_ids = cluster_ids.astype(jnp.int32)
        n = cluster_ids.shape[0]
        sizes = _sizes(cluster_ids, num_clusters)
        pieces = (sizes + max_cluster_size - 1) // max_cluster_size
        safe = jnp.maximum(sizes, 1).astype(dtype)[:, None]
        mean = jax.ops.segment_sum(embeddings, cluster_ids, num_segments=num_clusters) / safe
        centred = embeddings - mean[cluster_ids]
        # power iteration from the coordinate of largest variance
        axis = jax.ops.segment_sum(centred * centred, cluster_ids, num_segments=num_clusters)

        def power(_, axis):
            axis = axis / jnp.maximum(jnp.linalg.norm(axis, axis=1, keepdims=True),
                                      jnp.finfo(dtype).tiny)
            along = jnp.sum(centred * axis[cluster_ids], axis=1)
            return jax.ops.segment_sum(along[:, None] * centred, cluster_ids,
                                       num_segments=num_clusters)

        axis = jax.lax.fori_loop(0, 8, power, axis)
        along = jnp.sum(centred * axis[cluster_ids], axis=1)
        order = jnp.lexsort((along, cluster_ids))
        starts = jnp.cumsum(sizes) - sizes
        ranks = jnp.zeros(n, jnp.int32).at[order].set(
            jnp.arange(n, dtype=jnp.int32) - starts[cluster_ids[order]])
        # balanced pieces: the first (n_c mod p_c) get one extra member
        p, size = pieces[cluster_ids], sizes[cluster_ids]
        base, extra = size // p, size % p
        long_run = extra * (base + 1)
        piece = jnp.where(ranks < long_run, ranks // (base + 1),
                          extra + (ranks - long_run) // jnp.maximum(base, 1))
        offsets = jnp.cumsum(pieces) - pieces
        return (offsets[cluster_ids] + piece).astype(jnp.int32), jnp.sum(pieces)


def _block_table(sizes, starts, block: int, num_blocks: int):
    """``(cluster, first_row, rows)`` of every block of every cluster, padded to ``num_blocks``
    entries (padding blocks have 0 rows): cluster c has ``ceil(n_c / b)`` blocks."""
    per_cluster = (sizes + block - 1) // block
    first_block = jnp.cumsum(per_cluster, dtype=jnp.int32) - per_cluster
    total = jnp.sum(per_cluster, dtype=jnp.int32)
    t = jnp.arange(num_blocks, dtype=jnp.int32)
    found = jnp.searchsorted(first_block + per_cluster, t, side="right").astype(jnp.int32)
    cluster = jnp.clip(found, 0, sizes.shape[0] - 1)
    offset = (t - first_block[cluster]) * block
    rows = jnp.where(t < total, jnp.clip(sizes[cluster] - offset, 0, block), 0)
    return cluster, starts[cluster] + offset, rows


@functools.partial(
    jax.jit, static_argnames=("num_clusters", "block", "rank", "chunk_size")
)
def cluster_stats(
    embeddings,
    cluster_ids,
    num_clusters: int,
    block: int,
    rank: int = 0,
    chunk_size: int | None = None,
) -> ClusterStats:
    """Cluster sizes, means and within-cluster covariance of an item table.

    Means and diagonal variances use ``jax.ops.segment_sum``; the variance is two-pass,
    ``segment_sum((x - mu_{c(i)})^2) / n_c``, to avoid the cancellation of ``E[x^2] - mu^2``.
    For ``rank > 0`` each cluster's covariance ``Sigma_c = X_c^T X_c / n_c`` (centred members) is
    accumulated block by block over the sorted table (``O(N d^2)`` work, ``ceil(n_c / b)``
    ``(b, d)`` blocks per cluster, ``max(1, chunk_size // b)`` blocks per step; ``K d^2`` memory),
    eigendecomposed, ``Sigma_c = sum_k w_k u_k u_k^T``, and replaced by its top-r part plus an
    isotropic residual ``rho_c = (tr Sigma_c - sum_{k<=r} w_k) / (d - r)``:
    ``Sigma_c ~ rho_c I + sum_{k<=r} (w_k - rho_c) u_k u_k^T``, stored as
    ``dispersion_diag = rho_c`` and ``dispersion_factors = sqrt(w_k - rho_c) u_k``. ``rank = d`` is
    the exact covariance.

    Args:
        embeddings: ``(N, d)`` float item table.
        cluster_ids: ``(N,)`` integer ids in ``[0, num_clusters)``.
        num_clusters: K, a Python int.
        block: b >= 1, the item stage's block size (a Python int).
        rank: r in ``[0, d]``, a Python int; 0 keeps the diagonal of ``Sigma_c``.
        chunk_size: rows per covariance step for ``rank > 0`` (rounded to whole blocks); all
            blocks at once if None.

    Returns:
        :class:`ClusterStats` in the dtype of ``embeddings``.

    Example:
        >>> import jax.numpy as jnp
        >>> stats = cluster_stats(jnp.array([[0.0], [1.0], [2.0]]), jnp.array([0, 0, 1]), 2, 2)
        >>> stats.mean.tolist(), stats.dispersion_diag.tolist(), stats.sorted_ids.tolist()
        ([[0.5], [2.0]], [[0.25], [0.0]], [0, 1, 2])
    """
    with jax.named_scope("cluster_stats"):
        n, d = embeddings.shape
        dtype = embeddings.dtype
        cluster_ids = cluster_ids.astype(jnp.int32)
        counts = _sizes(cluster_ids, num_clusters)
        sizes = counts.astype(dtype)
        safe_sizes = jnp.maximum(sizes, jnp.ones((), dtype))[:, None]
        mean = jax.ops.segment_sum(embeddings, cluster_ids, num_segments=num_clusters) / safe_sizes
        log_size = jnp.where(sizes > 0, jnp.log(safe_sizes[:, 0]), -jnp.inf).astype(dtype)
        starts = (jnp.cumsum(counts) - counts).astype(jnp.int32)
        order = jnp.argsort(cluster_ids, stable=True).astype(jnp.int32)
        sorted_embeddings = jnp.concatenate([embeddings[order], jnp.zeros((block, d), dtype)])

        if rank == 0:
            centred = embeddings - mean[cluster_ids]
            diag = jax.ops.segment_sum(centred * centred, cluster_ids, num_segments=num_clusters)
            diag = diag / safe_sizes
            factors = jnp.zeros((num_clusters, 0, d), dtype)
        else:
            num_blocks = -(-n // block) + num_clusters  # sum_c ceil(n_c / b) never exceeds it
            per_step = num_blocks if chunk_size is None else max(1, chunk_size // block)
            num_blocks = -(-num_blocks // per_step) * per_step
            table = _block_table(counts, starts, block, num_blocks)
            offsets = jnp.arange(block, dtype=jnp.int32)

            def gram(cluster, first, rows):
                x = jax.lax.dynamic_slice_in_dim(sorted_embeddings, first, block)
                x = jnp.where((offsets < rows)[:, None], x - mean[cluster][None, :], 0)
                return x.T @ x

            def step(cov, blocks):
                return cov.at[blocks[0]].add(jax.vmap(gram)(*blocks)), None

            grouped = jax.tree.map(lambda a: a.reshape(-1, per_step), table)
            cov, _ = jax.lax.scan(step, jnp.zeros((num_clusters, d, d), dtype), grouped)
            cov = cov / safe_sizes[:, :, None]
            eigvals, eigvecs = jnp.linalg.eigh(cov)  # ascending
            top_vals = jnp.maximum(eigvals[:, d - rank:], 0)
            top_vecs = eigvecs[:, :, d - rank:]
            if rank < d:
                trace = jnp.trace(cov, axis1=1, axis2=2)
                resid = jnp.maximum(trace - jnp.sum(top_vals, axis=1), 0) / (d - rank)
            else:
                resid = jnp.zeros(num_clusters, dtype)
            scales = jnp.sqrt(jnp.maximum(top_vals - resid[:, None], 0))
            diag = jnp.broadcast_to(resid[:, None], (num_clusters, d))
            factors = jnp.swapaxes(top_vecs * scales[:, None, :], 1, 2)
        item_rows = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
        return ClusterStats(log_size, mean, diag.astype(dtype), factors.astype(dtype), counts,
                            starts, order, item_rows, sorted_embeddings)


@functools.partial(jax.jit, static_argnames=("variant",))
def cluster_logits(stats: ClusterStats, query, variant: str, temperature):
    """Cluster logits ``l`` of one query under a rule in :data:`VARIANTS`.

    ``"2ls"``: ``q·mu_c / tau``; ``"s"``: ``+ log n_c``; ``"sd"``: ``+ log n_c + v_c / 2``
    with ``v_c = q^T Sigma_c q / tau^2``, ``q^T Sigma_c q = dispersion_diag_c · q^2 + |F_c q|^2``
    (``O(K (r + 1) d)``); ``"sd_saturated"``: ``+ log n_c + D(v_c)`` with ``D(v) = v / 2`` for
    ``v <= 2 log n_c`` and ``sqrt(2 v log n_c) - log n_c`` beyond (module docstring). Empty
    clusters get ``-inf`` under every rule.

    Args:
        stats: :class:`ClusterStats` with K clusters in dimension d.
        query: ``(d,)`` float query.
        variant: ``"2ls"``, ``"s"``, ``"sd"`` or ``"sd_saturated"`` (static).
        temperature: positive scalar tau.

    Returns:
        ``(K,)`` logits in the query's dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> stats = cluster_stats(jnp.array([[0.0], [1.0], [2.0]]), jnp.array([0, 0, 1]), 2, 2)
        >>> [round(float(v), 3) for v in cluster_logits(stats, jnp.array([1.0]), "s", 1.0)]
        [1.193, 2.0]
    """
    with jax.named_scope("cluster_logits"):
        tau = jnp.asarray(temperature, query.dtype)
        logits = stats.mean @ query / tau
        if variant != "2ls":
            logits = logits + stats.log_size
        if variant in ("sd", "sd_saturated"):
            projected = stats.dispersion_factors @ query
            quad = stats.dispersion_diag @ (query * query) + jnp.sum(projected * projected,
                                                                     axis=-1)
            variance = quad / (tau * tau)
            if variant == "sd":
                logits = logits + 0.5 * variance
            else:
                logits = logits + saturated_dispersion(variance, stats.log_size)
        return jnp.where(jnp.isneginf(stats.log_size), -jnp.inf, logits)


def saturated_dispersion(variance, log_size):
    """``D(v) = v / 2`` for ``v <= 2 L``, ``sqrt(2 v L) - L`` beyond (``L = log n_c``).

    The dispersion term of ``"sd_saturated"`` (module docstring): the Gaussian cumulant
    ``v / 2`` of the within-cluster scores while it holds for ``n_c`` members, the largest
    member's share past the freezing point ``v = 2 L``. Continuous with its first derivative,
    ``<= v / 2`` everywhere, finite with finite gradients (an empty cluster, ``L = -inf``, gets
    0: its logit is masked anyway).

    Example:
        >>> import jax.numpy as jnp
        >>> v = jnp.array([1.0, 2.0 * jnp.log(100.0), 64.0])  # below, at, past 2 log n_c
        >>> [round(float(d), 3) for d in saturated_dispersion(v, jnp.log(jnp.full(3, 100.0)))]
        [0.5, 4.605, 19.674]
    """
    threshold = 2 * jnp.maximum(log_size, 0)
    frozen = variance > threshold
    safe = jnp.where(frozen, variance, threshold)
    tail = jnp.sqrt(jnp.maximum(threshold * safe, jnp.finfo(variance.dtype).tiny)) \
        - threshold / 2
    return jnp.where(frozen, tail, 0.5 * variance)


def exhausted_clusters(stats: ClusterStats, cluster_ids, excluded):
    """``(B, K)`` bool: every member of the cluster is in the query's excluded list.

    ``excluded``: ``(B, E)`` item ids sorted ascending, ``-1`` for padding (repeats allowed);
    ``O(E)`` per query: the distinct excluded items are counted per cluster and compared with
    ``n_c``.
    """
    cluster_ids = jnp.asarray(cluster_ids)

    def one(row):
        distinct = (row >= 0) & jnp.concatenate([jnp.ones((1,), bool), row[1:] != row[:-1]])
        counts = jnp.zeros(stats.sizes.shape, jnp.int32).at[
            cluster_ids[jnp.maximum(row, 0)]].add(distinct.astype(jnp.int32))
        return (counts >= stats.sizes) & (stats.sizes > 0)

    return jax.vmap(one)(excluded)


def _is_excluded(ids, excluded):
    """``ids`` (any shape) found in the sorted 1-d ``excluded`` (binary search)."""
    if excluded.shape[0] == 0:
        return jnp.zeros(ids.shape, bool)
    ids = ids.astype(excluded.dtype)
    where = jnp.clip(jnp.searchsorted(excluded, ids), 0, excluded.shape[0] - 1)
    return excluded[where] == ids


def _excluded_rows(stats: ClusterStats, excluded):
    """``(B, E + b)``: the excluded items' rows in the sorted table, ascending, then ``b``
    entries ``N`` (a row no block treats as valid), for :func:`_stream`'s window."""
    n, block = stats.sorted_ids.shape[0], block_size(stats)
    rows = jnp.where(excluded >= 0, stats.item_rows[jnp.maximum(excluded, 0)], n)
    pad = jnp.full((excluded.shape[0], block), n, jnp.int32)
    return jnp.concatenate([jnp.sort(rows.astype(jnp.int32), axis=1), pad], axis=1)


# Longest block whose in-block CDF is jnp.cumsum: inside the per-draw loop a short row's
# associative scan is cheaper than cumulative_sum's triangular products (19 entries: 0.19 vs
# 0.50 us per row; 64: 0.40 vs 0.51; 128: 0.74 vs 0.56, measured on XLA:CPU).
_SHORT_BLOCK = 64


def _pick(weights, u):
    """``min{j : F_j > u F_b}`` for one block's weights (``F`` their CDF, ``u`` in ``[0, 1)``),
    by a vectorised count (a binary search is a nested loop in every block step); a zero-weight
    entry is never returned, even where ``u F_b`` rounds up to ``F_b``."""
    block = weights.shape[0]
    cdf = jnp.cumsum(weights) if block <= _SHORT_BLOCK else cumulative_sum(weights)
    last = block - 1 - jnp.argmax(weights[::-1] > 0).astype(jnp.int32)
    return jnp.minimum(jnp.sum(cdf <= u * cdf[-1], dtype=jnp.int32), last)


def _stream(stats: ClusterStats, cluster, query, tau, excluded_rows=None, key=None):
    """One pass over cluster ``c``'s rows in blocks of ``b``: ``(log Z^E_c, item, s_item)``.

    ``log Z^E_c`` is the log-sum-exp of the scores of the members whose rows are not in
    ``excluded_rows`` (one row of :func:`_excluded_rows`, or None): per block the excluded rows
    inside it are the window of ``b`` entries from the first one at or after the block's start
    (one vectorised count over the list and a ``b``-entry scatter). With a ``key``
    the pass also draws ``item ~ exp(s_i - log Z^E_c)`` by the one-uniform weighted reservoir of
    the module docstring (one uniform per block, from ``fold_in(key, block)``).
    """
    block = block_size(stats)
    start, size = stats.starts[cluster], stats.sizes[cluster]
    offsets = jnp.arange(block, dtype=jnp.int32)
    dtype = query.dtype
    neg_inf = jnp.asarray(-jnp.inf, dtype)

    def body(k, carry):
        total, row, logit = carry
        first = start + k * block
        rows = jax.lax.dynamic_slice_in_dim(stats.sorted_embeddings, first, block)
        valid = k * block + offsets < size
        if excluded_rows is not None:
            # the first entry at or after the block (a vectorised count: no nested loop)
            lo = jnp.sum(excluded_rows < first, dtype=jnp.int32)
            window = jax.lax.dynamic_slice_in_dim(excluded_rows, lo, block) - first
            hit = jnp.zeros(block, bool).at[jnp.where(window < block, window, block)].set(
                True, mode="drop")
            valid = valid & ~hit
        scores = jnp.where(valid, rows @ query / tau, neg_inf)
        # the log-sum-exp by hand, keeping its exponentials for the pick (one exp per row)
        top = jnp.max(scores)
        empty = jnp.isneginf(top)  # an all-excluded block: never taken, NaN-free
        weights = jnp.exp(scores - jnp.where(empty, 0, top))
        block_mass = top + jnp.log(jnp.sum(weights))
        new_total = jnp.logaddexp(total, block_mass)
        if key is None:
            return new_total, row, logit
        accept = jnp.where(empty, 0, jnp.exp(block_mass - jnp.where(empty, 0, new_total)))
        u = jax.random.uniform(jax.random.fold_in(key, k), (), dtype)
        take = u < accept
        # given u < accept, u / accept is uniform on [0, 1): it makes the pick inside the block
        j = _pick(weights, u / jnp.where(take, accept, 1))
        return (new_total, jnp.where(take, first + j, row),
                jnp.where(take, scores[j], logit))

    num = (size + block - 1) // block
    init = (neg_inf, jnp.asarray(-1, jnp.int32), neg_inf)
    total, row, logit = jax.lax.fori_loop(0, num, body, init)
    # no pick only where nothing has mass (a non-finite query): a valid id, flagged by log q
    last = stats.sorted_ids.shape[0] - 1
    item = stats.sorted_ids[jnp.clip(jnp.where(row >= 0, row, start), 0, last)]
    return total, item, logit


def _per_draw(fn, clusters, queries, excluded, sequential, *extra):
    """``fn(cluster, query, excluded_row, *extra[b, s])`` for every pair (query b,
    ``clusters[b, s]``); ``excluded`` is ``(B, E)`` or None.

    ``sequential``: one ``lax.map`` step per pair, each streaming its own cluster's blocks (on CPU
    a dynamic slice is a memory copy, while a batched gather of the same rows ran 8x slower, and
    each pair stops after its own cluster); otherwise all pairs at once under ``vmap`` (the fast
    path on accelerators; the block loop then runs to the largest drawn cluster).
    """
    batch, num = clusters.shape
    owner = jnp.repeat(jnp.arange(batch, dtype=jnp.int32), num)
    flat = (clusters.reshape(-1), owner, *(e.reshape((batch * num,) + e.shape[2:])
                                           for e in extra))

    def one(args):
        cluster, b, *rest = args
        return fn(cluster, queries[b], None if excluded is None else excluded[b], *rest)

    out = jax.lax.map(one, flat) if sequential else jax.vmap(one)(flat)
    return jax.tree.map(lambda a: a.reshape((batch, num) + a.shape[1:]), out)


def split_keys(key, num_queries: int, num_samples: int):
    """``(cluster_keys (B,), item_keys (B, S))``: the keys :func:`two_level_sample` draws with.

    New-style keys and legacy ``uint32[2]`` keys alike (a legacy batch carries a trailing axis
    of 2, so the ``(B, S)`` batch is split to its shape rather than reshaped).
    """
    cluster_key, item_key = jax.random.split(key)
    return (jax.random.split(cluster_key, num_queries),
            jax.random.split(item_key, (num_queries, num_samples)))


@functools.partial(jax.jit, static_argnames=("num_samples",))
def draw_clusters(keys, logits, num_samples: int):
    """``num_samples`` clusters per row of ``logits`` (``(B, K)``) by inverse CDF, with their
    ``log_softmax(logits)``; ``keys``: ``(B,)``, one per row (the first stage of
    :func:`two_level_sample`, whose example runs it)."""
    clusters = jax.vmap(lambda k, row: categorical(k, row, num_samples))(keys, logits)
    return clusters, jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), clusters, axis=1)


@functools.partial(jax.jit, static_argnames=("sequential",))
def draw_members(keys, stats: ClusterStats, clusters, queries, temperature, excluded=None,
                 sequential: bool = True):
    """One item per drawn cluster from the exact softmax over its (remaining) members.

    For query b and cluster ``c = clusters[b, s]``: ``i ~ exp(s_i - log Z^E_c)`` over the members
    of c not in ``excluded[b]``, returned with ``s_i - log Z^E_c``, in one streaming pass over
    the cluster's blocks (module docstring): ``O(ceil(n_c / b) b d)`` work and one block of
    memory per draw.

    Args:
        keys: ``(B, S)`` PRNG keys, one per draw.
        stats: :class:`ClusterStats`.
        clusters: ``(B, S)`` int cluster ids (clusters with a remaining member).
        queries: ``(B, d)``; ``temperature``: positive scalar tau.
        excluded: ``(B, E)`` item ids sorted ascending, ``-1`` padding; or None.
        sequential: loop over draws (CPU) or run them all at once (accelerators), static.

    Returns:
        ``(items, log_item)``: ``(B, S)`` int32 ids and ``(B, S)`` ``s_i - log Z^E_c``.
    """
    with jax.named_scope("draw_members"):
        tau = jnp.asarray(temperature, queries.dtype)

        def pick(cluster, query, row, key):
            mass, item, logit = _stream(stats, cluster, query, tau, row, key)
            return item.astype(jnp.int32), logit - mass

        rows = None if excluded is None else _excluded_rows(stats, excluded)
        return _per_draw(pick, clusters, queries, rows, sequential, keys)


@functools.partial(jax.jit, static_argnames=("num_samples", "sequential"))
def two_level_sample(key, stats: ClusterStats, logits, queries, temperature, num_samples: int,
                     excluded=None, sequential: bool = True):
    """Draws ``num_samples`` items per query: clusters ``c ~ softmax(logits)``, then items.

    :func:`draw_clusters` (inverse CDF, one uniform per draw), then :func:`draw_members` (one
    streaming pass over the drawn cluster, one uniform per block). The item step is the exact
    softmax over the (remaining) members of ``c``; its log-sum-exp is ``log Z^E_c``, so
    ``log q(i) = log_softmax(logits)_c + s_i - log Z^E_c`` comes at no extra cost. With
    ``excluded``, pass the logits with the exhausted clusters at ``-inf``
    (:func:`exhausted_clusters`).

    Args:
        key: a PRNG key.
        stats: :class:`ClusterStats`.
        logits: ``(B, K)`` cluster logits (any rule, e.g. :func:`cluster_logits` per query).
        queries: ``(B, d)``; ``temperature``: positive scalar tau.
        num_samples: S, a Python int (draws are independent, with replacement).
        excluded: ``(B, E)`` sorted item ids to leave out (``-1`` padding), or None.
        sequential: see :func:`draw_members` (static).

    Returns:
        ``(items, log_q)``: ``(B, S)`` int32 item ids and their proposal log-probabilities.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0], [2.0]])
        >>> stats = cluster_stats(x, jnp.array([0, 0, 1]), 2, 2)
        >>> logits = cluster_logits(stats, jnp.array([1.0]), "s", 1.0)
        >>> items, log_q = two_level_sample(jax.random.key(0), stats, logits[None], x[1:2],
        ...                                 1.0, 4)
        >>> items.shape, log_q.shape
        ((1, 4), (1, 4))
    """
    with jax.named_scope("two_level_sample"):
        cluster_keys, item_keys = split_keys(key, logits.shape[0], num_samples)
        clusters, log_cluster = draw_clusters(cluster_keys, logits, num_samples)
        items, log_item = draw_members(item_keys, stats, clusters, queries, temperature,
                                       excluded, sequential)
        return items, log_cluster + log_item


@functools.partial(jax.jit, static_argnames=("sequential",))
def two_level_log_prob(stats: ClusterStats, logits, cluster_ids, embeddings, queries, items,
                       temperature, excluded=None, sequential: bool = True):
    """Proposal log-probabilities ``log q(i)`` of arbitrary items for a batch of queries.

    ``log q(i) = log_softmax(logits)_{c(i)} + s_i - log Z^E_{c(i)}`` (``-inf`` for an excluded
    item). The cluster normalisers come one of two ways, picked from the shapes (S requested
    items per query, N items, K clusters, block b):

    - ``S (N / K + b) <= N``: one streaming pass over each requested item's cluster,
      ``O(n_c d)`` work and one block of memory per item; the cheap path for a few items per
      query (a sampled-softmax target);
    - otherwise: from all N scores at once, ``s = X q / tau`` (one matrix product) and one
      segment log-sum-exp (:func:`jaxsample.kernels.logspace.segment_logsumexp`), ``O(N d)``
      work and ``O(N + K + S)`` memory per query, however many items are asked for.

    Args:
        stats: :class:`ClusterStats`; ``logits``: ``(B, K)`` cluster logits (exhausted clusters
            at ``-inf`` when ``excluded`` is given).
        cluster_ids: ``(N,)`` cluster of each item.
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``items``: ``(B, S)`` int item ids.
        temperature: positive scalar tau.
        excluded: ``(B, E)`` sorted item ids left out (``-1`` padding), or None.
        sequential: loop over (query, item) pairs on the streaming path (static).

    Returns:
        ``(B, S)`` log-probabilities in the queries' dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> x, ids = jnp.array([[0.0], [1.0], [2.0]]), jnp.array([0, 0, 1])
        >>> stats = cluster_stats(x, ids, 2, 2)
        >>> q = jnp.array([1.0])
        >>> logits = cluster_logits(stats, q, "s", 1.0)
        >>> lq = two_level_log_prob(stats, logits[None], ids, x, q[None], jnp.arange(3)[None], 1.0)
        >>> round(float(jnp.exp(lq).sum()), 5)
        1.0
    """
    with jax.named_scope("two_level_log_prob"):
        tau = jnp.asarray(temperature, queries.dtype)
        n, num_clusters = embeddings.shape[0], logits.shape[1]
        clusters = cluster_ids[items]
        log_cluster = jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), clusters, axis=1)
        scores = jnp.einsum("bsd,bd->bs", embeddings[items], queries) / tau
        if excluded is not None:
            scores = jnp.where(jax.vmap(_is_excluded)(items, excluded), -jnp.inf, scores)
        if items.shape[1] * (n / num_clusters + block_size(stats)) <= n:
            rows = None if excluded is None else _excluded_rows(stats, excluded)
            log_mass = _per_draw(lambda c, q, row: _stream(stats, c, q, tau, row)[0], clusters,
                                 queries, rows, sequential)
            return _log_q(log_cluster, scores, log_mass)

        def one(query, query_clusters, row):
            all_scores = embeddings @ query / tau
            if row is not None:
                all_scores = jnp.where(_is_excluded(jnp.arange(n), row), -jnp.inf, all_scores)
            log_mass = segment_logsumexp(all_scores, cluster_ids, num_clusters)
            return log_mass[query_clusters]

        masses = jax.vmap(one)(queries, clusters, excluded) if excluded is not None else \
            jax.vmap(lambda q, c: one(q, c, None))(queries, clusters)
        return _log_q(log_cluster, scores, masses)


def _log_q(log_cluster, scores, log_mass):
    """``log_cluster + scores - log_mass``, ``-inf`` (not NaN) for an excluded item."""
    return jnp.where(jnp.isneginf(scores), -jnp.inf, log_cluster + scores - log_mass)


@jax.jit
def two_level_log_probs_all(logits, cluster_ids, embeddings, query, temperature, excluded=None):
    """Proposal log-probabilities of all N items for one query, in ``O(N d)``.

    Every ``log Z^E_c`` comes from one segment log-sum-exp over the N scores (excluded items at
    ``-inf``: ``(E,)`` sorted ids, ``-1`` padding, or None). For diagnostics (TV, KL to the exact
    softmax) and tests, not for sampling.

    Args:
        logits: ``(K,)`` cluster logits; ``cluster_ids``: ``(N,)``.
        embeddings: ``(N, d)``; ``query``: ``(d,)``; ``temperature``: positive scalar tau.
        excluded: ``(E,)`` or None.

    Returns:
        ``(N,)`` log-probabilities.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0], [2.0]])
        >>> lq = two_level_log_probs_all(jnp.zeros(2), jnp.array([0, 0, 1]), x, jnp.ones(1), 1.0)
        >>> [round(float(v), 4) for v in jnp.exp(lq)]  # clusters 1/2 each, exact inside
        [0.1345, 0.3655, 0.5]
    """
    with jax.named_scope("two_level_log_probs_all"):
        tau = jnp.asarray(temperature, query.dtype)
        scores = embeddings @ query / tau
        if excluded is not None:
            scores = jnp.where(_is_excluded(jnp.arange(scores.shape[0]), excluded), -jnp.inf,
                               scores)
        log_mass = segment_logsumexp(scores, cluster_ids, logits.shape[0])
        return _log_q(jax.nn.log_softmax(logits)[cluster_ids], scores, log_mass[cluster_ids])


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def exact_log_partition(embeddings, queries, temperature, chunk_size: int | None = None):
    """``log Z = logsumexp_i q·x_i / tau`` for a batch of queries.

    ``chunk_size`` queries at a time (:func:`jaxsample.kernels.chunking.map_rows`): at most
    ``chunk_size x N`` logits exist at once; None computes the ``(B, N)`` logits densely.

    Args:
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``temperature``: positive scalar.
        chunk_size: queries per chunk, or None.

    Returns:
        ``(B,)`` log partition functions.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0], [2.0]])
        >>> [round(float(v), 4) for v in exact_log_partition(x, jnp.ones((1, 1)), 1.0)]
        [2.4076]
    """
    with jax.named_scope("exact_log_partition"):
        tau = jnp.asarray(temperature, queries.dtype)
        return map_rows(lambda q: jax.nn.logsumexp(q @ embeddings.T / tau, axis=-1), queries,
                        chunk_size=chunk_size)


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def exact_log_probs(embeddings, queries, temperature, chunk_size: int | None = None):
    """The exact softmax ``log p(i) = s_i - log Z`` of every item for a batch of queries.

    The ``(B, N)`` result is the output, so it is materialised; ``chunk_size`` (queries per chunk,
    :func:`jaxsample.kernels.chunking.map_rows`) bounds the intermediate work to one block.

    Args:
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``temperature``: positive scalar.
        chunk_size: queries per chunk, or None for all at once.

    Returns:
        ``(B, N)`` log-probabilities.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0], [2.0]])
        >>> [round(float(v), 4) for v in jnp.exp(exact_log_probs(x, jnp.ones((1, 1)), 1.0)[0])]
        [0.09, 0.2447, 0.6652]
    """
    with jax.named_scope("exact_log_probs"):
        tau = jnp.asarray(temperature, queries.dtype)
        return map_rows(lambda q: jax.nn.log_softmax(q @ embeddings.T / tau, axis=-1), queries,
                        chunk_size=chunk_size)


def sampled_softmax_logits(target_logits, sampled_logits, sampled_log_q, targets, sampled):
    """Corrected logits of a sampled-softmax loss, target first (its label is 0).

    For a target ``y`` and S negatives ``j_1..j_S`` drawn i.i.d. from a proposal q (any
    sampler that reports ``log q``), the logits are (Bengio & Senecal 2008; Jean et al. 2015;
    Blanc & Rendle 2018; "accidental hits" removed as in TensorFlow's ``sampled_softmax_loss``)

        o_0 = s_y,    o_k = s_{j_k} - log(S q(j_k))  (-inf where j_k = y),

    so ``sum_k exp(o_k)`` for ``k >= 1`` is an unbiased estimate of ``Z - exp(s_y)`` and the
    softmax cross-entropy of ``o`` at label 0 estimates ``-s_y + log Z`` consistently: its
    gradient tends to the full softmax gradient as S grows. ``log q`` carries no gradient.

    Args:
        target_logits: ``(...,)`` ``s_y``.
        sampled_logits: ``(..., S)`` ``s_j`` of the drawn items.
        sampled_log_q: ``(..., S)`` their proposal log-probabilities.
        targets: ``(...,)`` int target ids; ``sampled``: ``(..., S)`` int drawn ids.

    Returns:
        ``(..., 1 + S)`` logits in the dtype of ``sampled_logits``.

    Example:
        >>> import jax.numpy as jnp
        >>> o = sampled_softmax_logits(jnp.array(1.0), jnp.array([0.0, 1.0]),
        ...                            jnp.log(jnp.array([0.5, 0.5])), jnp.array(3),
        ...                            jnp.array([2, 3]))
        >>> o.tolist()
        [1.0, 0.0, -inf]
    """
    num_samples = sampled_logits.shape[-1]
    correction = jax.lax.stop_gradient(sampled_log_q) + jnp.log(
        jnp.asarray(num_samples, sampled_logits.dtype))
    hits = sampled == targets[..., None].astype(sampled.dtype)
    corrected = jnp.where(hits, -jnp.inf, sampled_logits - correction)
    return jnp.concatenate([target_logits[..., None].astype(corrected.dtype), corrected], axis=-1)
