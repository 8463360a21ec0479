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
  scores).

``Sigma_c`` (population covariance, 1/n_c) is stored as ``diag(dispersion_diag_c) + F_c^T F_c``
with ``F_c`` of shape ``(r, d)``: ``r = 0`` is the diagonal approximation, ``0 < r < d`` a top-r
PCA with an isotropic residual, ``r = d`` the full covariance. Query time is
``O(K (r + 1) d + S m d)`` for S draws from K clusters of at most m members, against ``O(N d)``
for the exact softmax.

Both stages draw by inverse CDF (:func:`jaxsample.kernels.resampling.categorical`, one uniform per
draw): ``jax.random.categorical`` spends one Gumbel per category, ``S (K + m)`` per query, which was
most of the cost of a many-draw call. The members of a cluster are one contiguous slab of
``ClusterStats.sorted_embeddings`` (the table ordered by cluster), so a draw reads m rows with one
dynamic slice; on CPU a loop of such slices beat XLA's batched gather of the same rows by 8x for
large slabs (``sequential=True``), while accelerators gather all slabs at once.

Inputs are valid: the public entry points (:mod:`jaxsample.softmax.two_level`) checked them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.logspace import segment_logsumexp
from jaxsample.kernels.resampling import categorical

__all__ = [
    "VARIANTS",
    "ClusterStats",
    "cluster_logits",
    "cluster_members",
    "cluster_stats",
    "draw_clusters",
    "draw_members",
    "split_keys",
    "exact_log_partition",
    "exact_log_probs",
    "sampled_softmax_logits",
    "split_clusters",
    "two_level_log_prob",
    "two_level_log_probs_all",
    "two_level_sample",
]

VARIANTS = ("2ls", "s", "sd")


class ClusterStats(NamedTuple):
    """Per-cluster statistics of an item table (a pytree; passes through ``jit``).

    Attributes:
        log_size: ``(K,)`` ``log n_c``; ``-inf`` for an empty cluster (never sampled).
        mean: ``(K, d)`` cluster means ``mu_c`` (zero for an empty cluster).
        dispersion_diag: ``(K, d)`` diagonal part of ``Sigma_c``.
        dispersion_factors: ``(K, r, d)`` low-rank part, ``Sigma_c ~ diag + F_c^T F_c``.
        members: ``(K, m)`` int32 item ids of each cluster, padded with 0.
        mask: ``(K, m)`` bool, False on padding.
        sorted_embeddings: ``(N + m, d)`` the item table ordered by cluster (stable), then m zero
            rows: cluster c occupies rows ``starts[c] .. starts[c] + n_c``, so its m member slots
            are one contiguous slab (``members[c, j]`` is the id of row ``starts[c] + j``).
        starts: ``(K,)`` int32 first row of each cluster in ``sorted_embeddings``.
    """

    log_size: jax.Array
    mean: jax.Array
    dispersion_diag: jax.Array
    dispersion_factors: jax.Array
    members: jax.Array
    mask: jax.Array
    sorted_embeddings: jax.Array
    starts: jax.Array


def _sizes(cluster_ids, num_clusters):
    return jnp.zeros(num_clusters, jnp.int32).at[cluster_ids].add(1)


@functools.partial(jax.jit, static_argnames=("num_clusters", "max_cluster_size"))
def cluster_members(cluster_ids, num_clusters: int, max_cluster_size: int):
    """Padded member table of a clustering.

    A stable argsort by cluster id gives each item its rank inside its cluster (position minus the
    cluster's start offset); items are scattered to ``members[c, rank]``.

    Args:
        cluster_ids: ``(N,)`` integer ids in ``[0, num_clusters)``.
        num_clusters: K, a Python int.
        max_cluster_size: m, a Python int ``>=`` the largest cluster size.

    Returns:
        ``(members, mask)`` of shapes ``(K, m)`` (int32, padded with 0) and ``(K, m)`` (bool).

    Example:
        >>> import jax.numpy as jnp
        >>> members, mask = cluster_members(jnp.array([1, 0, 1]), 2, 2)
        >>> members.tolist(), mask.tolist()
        ([[1, 0], [0, 2]], [[True, False], [True, True]])
    """
    cluster_ids = cluster_ids.astype(jnp.int32)
    sizes = _sizes(cluster_ids, num_clusters)
    starts = jnp.cumsum(sizes) - sizes
    order = jnp.argsort(cluster_ids, stable=True).astype(jnp.int32)
    sorted_ids = cluster_ids[order]
    ranks = jnp.arange(cluster_ids.shape[0], dtype=jnp.int32) - starts[sorted_ids]
    members = jnp.zeros((num_clusters, max_cluster_size), jnp.int32)
    members = members.at[sorted_ids, ranks].set(order, mode="drop")
    mask = jnp.zeros((num_clusters, max_cluster_size), bool)
    mask = mask.at[sorted_ids, ranks].set(True, mode="drop")
    return members, mask


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


@functools.partial(
    jax.jit, static_argnames=("num_clusters", "max_cluster_size", "rank", "chunk_size")
)
def cluster_stats(
    embeddings,
    cluster_ids,
    num_clusters: int,
    max_cluster_size: int,
    rank: int = 0,
    chunk_size: int | None = None,
) -> ClusterStats:
    """Cluster sizes, means and within-cluster covariance of an item table.

    Means and diagonal variances use ``jax.ops.segment_sum``; the variance is two-pass,
    ``segment_sum((x - mu_{c(i)})^2) / n_c``, to avoid the cancellation of ``E[x^2] - mu^2``.
    For ``rank > 0`` each cluster's covariance ``Sigma_c = X_c^T X_c / n_c`` (centred members) is
    eigendecomposed, ``Sigma_c = sum_k w_k u_k u_k^T``, and replaced by its top-r part plus an
    isotropic residual ``rho_c = (tr Sigma_c - sum_{k<=r} w_k) / (d - r)``:
    ``Sigma_c ~ rho_c I + sum_{k<=r} (w_k - rho_c) u_k u_k^T``, stored as
    ``dispersion_diag = rho_c`` and ``dispersion_factors = sqrt(w_k - rho_c) u_k``. ``rank = d`` is
    the exact covariance. Covariances are built a block of clusters at a time through
    :func:`jaxsample.kernels.chunking.map_rows`: ``max(1, chunk_size // m)`` clusters, so about
    ``chunk_size`` gathered items (``chunk_size * d`` floats) are in flight; all at once if None.

    Args:
        embeddings: ``(N, d)`` float item table.
        cluster_ids: ``(N,)`` integer ids in ``[0, num_clusters)``.
        num_clusters: K, a Python int.
        max_cluster_size: m, a Python int ``>=`` the largest cluster size.
        rank: r in ``[0, d]``, a Python int; 0 keeps the diagonal of ``Sigma_c``.
        chunk_size: items per chunk for ``rank > 0`` (rounded to whole clusters).

    Returns:
        :class:`ClusterStats` in the dtype of ``embeddings``.

    Example:
        >>> import jax.numpy as jnp
        >>> stats = cluster_stats(jnp.array([[0.0], [1.0], [2.0]]), jnp.array([0, 0, 1]), 2, 2)
        >>> stats.mean.tolist(), stats.dispersion_diag.tolist(), stats.members.tolist()
        ([[0.5], [2.0]], [[0.25], [0.0]], [[0, 1], [2, 0]])
    """
    with jax.named_scope("cluster_stats"):
        n, d = embeddings.shape
        dtype = embeddings.dtype
        cluster_ids = cluster_ids.astype(jnp.int32)
        sizes = jax.ops.segment_sum(jnp.ones(n, dtype), cluster_ids, num_segments=num_clusters)
        safe_sizes = jnp.maximum(sizes, jnp.ones((), dtype))[:, None]
        mean = jax.ops.segment_sum(embeddings, cluster_ids, num_segments=num_clusters) / safe_sizes
        log_size = jnp.where(sizes > 0, jnp.log(safe_sizes[:, 0]), -jnp.inf).astype(dtype)
        members, mask = cluster_members(cluster_ids, num_clusters, max_cluster_size)
        counts = _sizes(cluster_ids, num_clusters)
        starts = (jnp.cumsum(counts) - counts).astype(jnp.int32)
        order = jnp.argsort(cluster_ids, stable=True)
        sorted_embeddings = jnp.concatenate(
            [embeddings[order], jnp.zeros((max_cluster_size, d), dtype)])

        if rank == 0:
            centred = embeddings - mean[cluster_ids]
            diag = jax.ops.segment_sum(centred * centred, cluster_ids, num_segments=num_clusters)
            diag = diag / safe_sizes
            factors = jnp.zeros((num_clusters, 0, d), dtype)
        else:

            def low_rank(ids, member_mask, centre, size):
                centred = jnp.where(member_mask[..., None], embeddings[ids] - centre[:, None, :],
                                    0)
                cov = jnp.einsum("cmi,cmj->cij", centred, centred) / size[:, None, None]
                eigvals, eigvecs = jnp.linalg.eigh(cov)  # ascending
                top_vals = jnp.maximum(eigvals[:, d - rank:], 0)
                top_vecs = eigvecs[:, :, d - rank:]
                if rank < d:
                    trace = jnp.trace(cov, axis1=1, axis2=2)
                    resid = jnp.maximum(trace - jnp.sum(top_vals, axis=1), 0) / (d - rank)
                else:
                    resid = jnp.zeros(ids.shape[:1], dtype)
                scales = jnp.sqrt(jnp.maximum(top_vals - resid[:, None], 0))
                diag = jnp.broadcast_to(resid[:, None], (ids.shape[0], d))
                return diag, jnp.swapaxes(top_vecs * scales[:, None, :], 1, 2)

            clusters_per_chunk = None if chunk_size is None else max(
                1, chunk_size // max_cluster_size)
            diag, factors = map_rows(low_rank, members, mask, mean, safe_sizes[:, 0],
                                     chunk_size=clusters_per_chunk)
        return ClusterStats(log_size, mean, diag.astype(dtype), factors.astype(dtype), members,
                            mask, sorted_embeddings, starts)


@functools.partial(jax.jit, static_argnames=("variant",))
def cluster_logits(stats: ClusterStats, query, variant: str, temperature):
    """Cluster logits ``l`` of one query under a rule in :data:`VARIANTS`.

    ``"2ls"``: ``q·mu_c / tau``; ``"s"``: ``+ log n_c``; ``"sd"``: ``+ log n_c +
    q^T Sigma_c q / (2 tau^2)`` with ``q^T Sigma_c q = dispersion_diag_c · q^2 + |F_c q|^2``.
    Empty clusters get ``-inf`` under every rule.

    Args:
        stats: :class:`ClusterStats` with K clusters in dimension d.
        query: ``(d,)`` float query.
        variant: ``"2ls"``, ``"s"`` or ``"sd"`` (static).
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
        if variant in ("s", "sd"):
            logits = logits + stats.log_size
        if variant == "sd":
            projected = stats.dispersion_factors @ query
            quad = stats.dispersion_diag @ (query * query) + jnp.sum(projected * projected,
                                                                     axis=-1)
            logits = logits + 0.5 * quad / (tau * tau)
        return jnp.where(jnp.isneginf(stats.log_size), -jnp.inf, logits)


def _slab_logits(stats: ClusterStats, cluster, query, tau):
    """Exact logits ``s_i`` of one cluster's m member slots (``-inf`` on padding): one
    contiguous ``(m, d)`` slab of ``sorted_embeddings`` times the query."""
    width = stats.members.shape[1]
    rows = jax.lax.dynamic_slice_in_dim(stats.sorted_embeddings, stats.starts[cluster], width)
    return jnp.where(stats.mask[cluster], rows @ query / tau, -jnp.inf)


def _per_draw(fn, stats, clusters, queries, tau, sequential, *extra):
    """``fn(slab_logits, cluster, *extra[b, s])`` for every pair (query b, ``clusters[b, s]``).

    ``sequential``: one ``lax.map`` step per pair, each reading one contiguous slab (on CPU a
    dynamic slice is a memory copy, while a batched gather of the same rows ran 8x slower);
    otherwise all slabs at once (one gather, the fast path on accelerators).
    """
    batch, num = clusters.shape
    owner = jnp.repeat(jnp.arange(batch, dtype=jnp.int32), num)
    flat = (clusters.reshape(-1), owner, *(e.reshape((batch * num,) + e.shape[2:])
                                           for e in extra))

    def one(args):
        cluster, b, *rest = args
        return fn(_slab_logits(stats, cluster, queries[b], tau), cluster, *rest)

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
def draw_members(keys, stats: ClusterStats, clusters, queries, temperature,
                 sequential: bool = True):
    """One item per drawn cluster from the exact softmax over its members, by inverse CDF.

    For query b and cluster ``c = clusters[b, s]``: ``i ~ exp(s_i - log Z_c)`` over the m member
    slots of c, returned with ``s_i - log Z_c`` (``log Z_c`` is the slab's log-sum-exp, so the
    proposal probability costs nothing extra). ``O(m d)`` work per draw; with ``sequential`` the
    working memory is one slab, otherwise ``B S m d`` (see :func:`two_level_sample`).

    Args:
        keys: ``(B, S)`` PRNG keys, one per draw.
        stats: :class:`ClusterStats`.
        clusters: ``(B, S)`` int cluster ids (non-empty clusters).
        queries: ``(B, d)``; ``temperature``: positive scalar tau.
        sequential: loop over draws (CPU) or gather all at once (accelerators), static.

    Returns:
        ``(items, log_item)``: ``(B, S)`` int32 ids and ``(B, S)`` ``s_i - log Z_c``.
    """
    with jax.named_scope("draw_members"):
        tau = jnp.asarray(temperature, queries.dtype)

        def pick(logits, cluster, draw_key):
            j = categorical(draw_key, logits)
            return stats.members[cluster, j], logits[j] - jax.nn.logsumexp(logits)

        return _per_draw(pick, stats, clusters, queries, tau, sequential, keys)


@functools.partial(jax.jit, static_argnames=("num_samples", "sequential"))
def two_level_sample(key, stats: ClusterStats, logits, queries, temperature, num_samples: int,
                     sequential: bool = True):
    """Draws ``num_samples`` items per query: clusters ``c ~ softmax(logits)``, then items.

    Both stages draw by inverse CDF, one uniform per draw
    (:func:`jaxsample.kernels.resampling.categorical`): :func:`draw_clusters`, then
    :func:`draw_members`. The item step is the exact softmax over the members of ``c``; its
    log-sum-exp is ``log Z_c``, so ``log q(i) = log_softmax(logits)_c + s_i - log Z_c`` comes at no
    extra cost. Each draw reads its cluster's m member slots, one contiguous ``(m, d)`` slab of
    ``stats.sorted_embeddings``: ``O(K d)`` per query plus ``O(m d)`` per draw. ``sequential``
    loops over the draws (memory: one slab; the fast path on CPU, where XLA's batched gather of
    the same rows measured 8x slower than slab copies); otherwise all ``B S`` slabs are gathered
    at once (memory ``B S m d``; the fast path on accelerators).

    Args:
        key: a PRNG key.
        stats: :class:`ClusterStats`.
        logits: ``(B, K)`` cluster logits (any rule, e.g. :func:`cluster_logits` per query).
        queries: ``(B, d)``; ``temperature``: positive scalar tau.
        num_samples: S, a Python int (draws are independent, with replacement).
        sequential: see above (static).

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
                                       sequential)
        return items, log_cluster + log_item


@functools.partial(jax.jit, static_argnames=("sequential",))
def two_level_log_prob(stats: ClusterStats, logits, cluster_ids, embeddings, queries, items,
                       temperature, sequential: bool = True):
    """Proposal log-probabilities ``log q(i)`` of arbitrary items for a batch of queries.

    ``log q(i) = log_softmax(logits)_{c(i)} + s_i - log Z_{c(i)}``. The cluster normalisers
    ``log Z_c`` come one of two ways, picked from the shapes (S requested items per query, N
    items, m member slots, d dimensions):

    - ``S m d <= N``: from the slab of each requested item's cluster, ``O(S m d)`` work per query
      (one slab of memory when ``sequential``); the cheap path for a few items per query (a
      sampled-softmax target);
    - otherwise: from all N scores at once, ``s = X q / tau`` (one matrix product) and one
      segment log-sum-exp (:func:`jaxsample.kernels.logspace.segment_logsumexp`), ``O(N d)``
      work and ``O(N + K + S)`` memory per query, however many items are asked for.

    Args:
        stats: :class:`ClusterStats`; ``logits``: ``(B, K)`` cluster logits.
        cluster_ids: ``(N,)`` cluster of each item.
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``items``: ``(B, S)`` int item ids.
        temperature: positive scalar tau.
        sequential: loop over (query, item) pairs on the slab path (static; see
            :func:`two_level_sample`).

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
        (n, d), width = embeddings.shape, stats.members.shape[1]
        clusters = cluster_ids[items]
        log_cluster = jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), clusters, axis=1)
        if items.shape[1] * width * d <= n:
            scores = jnp.einsum("bsd,bd->bs", embeddings[items], queries) / tau
            log_mass = _per_draw(lambda logits, _: jax.nn.logsumexp(logits), stats, clusters,
                                 queries, tau, sequential)
            return log_cluster + scores - log_mass

        def one(query, query_items, query_clusters):
            scores = embeddings @ query / tau
            log_mass = segment_logsumexp(scores, cluster_ids, logits.shape[1])
            return scores[query_items] - log_mass[query_clusters]

        return log_cluster + jax.vmap(one)(queries, items, clusters)


@jax.jit
def two_level_log_probs_all(logits, cluster_ids, embeddings, query, temperature):
    """Proposal log-probabilities of all N items for one query, in ``O(N d)``.

    Every ``log Z_c`` comes from one segment log-sum-exp over the N scores. For diagnostics (TV,
    KL to the exact softmax) and tests, not for sampling.

    Args:
        logits: ``(K,)`` cluster logits; ``cluster_ids``: ``(N,)``.
        embeddings: ``(N, d)``; ``query``: ``(d,)``; ``temperature``: positive scalar tau.

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
        log_mass = segment_logsumexp(scores, cluster_ids, logits.shape[0])
        return jax.nn.log_softmax(logits)[cluster_ids] + scores - log_mass[cluster_ids]


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
