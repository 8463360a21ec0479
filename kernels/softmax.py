"""Two-level softmax kernels: cluster statistics, cluster-logit rules and the two-stage draw.

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
``O(K (r + 1) d + m d)`` per draw for K clusters of at most m members, against ``O(N d)`` for the
exact softmax.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

__all__ = [
    "VARIANTS",
    "ClusterStats",
    "cluster_logits",
    "cluster_members",
    "cluster_stats",
    "exact_log_partition",
    "exact_log_probs",
    "kmeans",
    "two_level_log_probs_all",
    "two_level_log_prob",
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
    """

    log_size: jax.Array
    mean: jax.Array
    dispersion_diag: jax.Array
    dispersion_factors: jax.Array
    members: jax.Array
    mask: jax.Array


@functools.partial(jax.jit, static_argnames=("num_clusters", "num_iters", "chunk_size"))
def kmeans(key, points, num_clusters: int, num_iters: int = 20, chunk_size: int | None = None):
    """Lloyd's k-means with a chunked assignment step; returns the cluster of every point.

    Seeds with ``num_clusters`` distinct random points (Forgy), then alternates
    ``c(i) = argmin_c |x_i - mu_c|^2`` (computed as ``argmin_c |mu_c|^2 - 2 x_i·mu_c``) and
    ``mu_c = mean_{c(i)=c} x_i``; a cluster left empty keeps its previous centre. Hand-written
    because ott-jax's ``k_means`` materialises the dense ``N x K`` cost matrix at every iteration
    (4 GB at N = 10^6, K = 1000 in float32); here ``chunk_size`` points are assigned at a time.

    Args:
        key: PRNG key for the seeding.
        points: ``(N, d)`` float array.
        num_clusters: K <= N, a Python int.
        num_iters: Lloyd iterations, a Python int.
        chunk_size: points per assignment chunk (None: all at once).

    Returns:
        ``(N,)`` int32 cluster ids in ``[0, K)`` (some clusters may be empty).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[0.0], [0.1], [5.0], [5.1]])
        >>> ids = kmeans(jax.random.key(0), x, 2)
        >>> bool(ids[0] == ids[1]) and bool(ids[2] == ids[3]) and bool(ids[0] != ids[2])
        True
    """
    n = points.shape[0]
    centres = points[jax.random.choice(key, n, (num_clusters,), replace=False)]

    def assign(centres):
        sq_norms = jnp.sum(centres * centres, axis=-1)

        def nearest(x):
            return jnp.argmin(sq_norms - 2 * (centres @ x)).astype(jnp.int32)

        return jax.lax.map(nearest, points, batch_size=chunk_size or n)

    def lloyd(_, centres):
        ids = assign(centres)
        sums = jax.ops.segment_sum(points, ids, num_segments=num_clusters)
        counts = jax.ops.segment_sum(jnp.ones(n, points.dtype), ids, num_segments=num_clusters)
        safe = jnp.maximum(counts, jnp.ones((), points.dtype))[:, None]
        return jnp.where(counts[:, None] > 0, sums / safe, centres)

    return assign(jax.lax.fori_loop(0, num_iters, lloyd, centres))


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
    sizes = jnp.zeros(num_clusters, jnp.int32).at[cluster_ids].add(1)
    starts = jnp.cumsum(sizes) - sizes
    order = jnp.argsort(cluster_ids, stable=True).astype(jnp.int32)
    sorted_ids = cluster_ids[order]
    ranks = jnp.arange(cluster_ids.shape[0], dtype=jnp.int32) - starts[sorted_ids]
    members = jnp.zeros((num_clusters, max_cluster_size), jnp.int32)
    members = members.at[sorted_ids, ranks].set(order, mode="drop")
    mask = jnp.zeros((num_clusters, max_cluster_size), bool)
    mask = mask.at[sorted_ids, ranks].set(True, mode="drop")
    return members, mask


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
    the exact covariance. Covariances are built ``chunk_size`` clusters at a time (all at once if
    None), so at most ``chunk_size * m * d`` gathered members and ``chunk_size * d^2`` covariance
    entries exist at once.

    Args:
        embeddings: ``(N, d)`` float item table.
        cluster_ids: ``(N,)`` integer ids in ``[0, num_clusters)``.
        num_clusters: K, a Python int.
        max_cluster_size: m, a Python int ``>=`` the largest cluster size.
        rank: r in ``[0, d]``, a Python int; 0 keeps the diagonal of ``Sigma_c``.
        chunk_size: clusters per chunk for ``rank > 0``.

    Returns:
        :class:`ClusterStats` in the dtype of ``embeddings``.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0]])
        >>> stats = cluster_stats(x, jnp.array([0, 0, 1]), 2, 2)
        >>> stats.mean.tolist(), stats.dispersion_diag.tolist()
        ([[1.0, 0.0], [5.0, 5.0]], [[1.0, 0.0], [0.0, 0.0]])
    """
    n, d = embeddings.shape
    dtype = embeddings.dtype
    cluster_ids = cluster_ids.astype(jnp.int32)
    sizes = jax.ops.segment_sum(jnp.ones(n, dtype), cluster_ids, num_segments=num_clusters)
    safe_sizes = jnp.maximum(sizes, jnp.ones((), dtype))[:, None]
    mean = jax.ops.segment_sum(embeddings, cluster_ids, num_segments=num_clusters) / safe_sizes
    log_size = jnp.where(sizes > 0, jnp.log(safe_sizes[:, 0]), -jnp.inf).astype(dtype)
    members, mask = cluster_members(cluster_ids, num_clusters, max_cluster_size)

    if rank == 0:
        centred = embeddings - mean[cluster_ids]
        diag = jax.ops.segment_sum(centred * centred, cluster_ids, num_segments=num_clusters)
        diag = diag / safe_sizes
        factors = jnp.zeros((num_clusters, 0, d), dtype)
    else:

        def low_rank(args):
            ids, member_mask, centre, size = args
            centred = jnp.where(member_mask[:, None], embeddings[ids] - centre[None, :], 0)
            cov = centred.T @ centred / size
            eigvals, eigvecs = jnp.linalg.eigh(cov)  # ascending
            top_vals = jnp.maximum(eigvals[d - rank :], 0)
            top_vecs = eigvecs[:, d - rank :]
            if rank < d:
                resid = jnp.maximum(jnp.trace(cov) - jnp.sum(top_vals), 0) / (d - rank)
            else:
                resid = jnp.zeros((), dtype)
            scales = jnp.sqrt(jnp.maximum(top_vals - resid, 0))
            return jnp.full((d,), resid, dtype), (top_vecs * scales[None, :]).T

        diag, factors = jax.lax.map(
            low_rank, (members, mask, mean, safe_sizes[:, 0]),
            batch_size=chunk_size or num_clusters,
        )
    return ClusterStats(log_size, mean, diag.astype(dtype), factors.astype(dtype), members, mask)


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
        >>> stats = cluster_stats(jnp.array([[0.0], [2.0], [5.0]]), jnp.array([0, 0, 1]), 2, 2)
        >>> [round(float(v), 3) for v in cluster_logits(stats, jnp.array([1.0]), "s", 1.0)]
        [1.693, 5.0]
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    tau = jnp.asarray(temperature, query.dtype)
    logits = stats.mean @ query / tau
    if variant in ("s", "sd"):
        logits = logits + stats.log_size
    if variant == "sd":
        projected = stats.dispersion_factors @ query
        quad = stats.dispersion_diag @ (query * query) + jnp.sum(projected * projected, axis=-1)
        logits = logits + 0.5 * quad / (tau * tau)
    return jnp.where(jnp.isneginf(stats.log_size), -jnp.inf, logits)


def _member_logits(members, mask, embeddings, query, tau):
    """Exact logits ``s_i`` of the listed members (any leading shape), -inf on padding."""
    scores = jnp.einsum("...md,d->...m", embeddings[members], query) / tau
    return jnp.where(mask, scores, -jnp.inf)


@functools.partial(jax.jit, static_argnames=("num_samples",))
def two_level_sample(key, logits, members, mask, embeddings, query, temperature, num_samples: int):
    """Draws ``num_samples`` items for one query: a cluster ``c ~ softmax(logits)``, then an item.

    The item step is the exact softmax over the members of ``c``; its log-sum-exp is ``log Z_c``, so
    the proposal ``log q(i) = log_softmax(logits)_c + s_i - log Z_c`` comes at no extra cost. Each
    draw gathers its cluster's ``m`` members: ``O(num_samples * m * d)`` plus ``O(K)``.

    Args:
        key: a PRNG key.
        logits: ``(K,)`` cluster logits (any rule, e.g. :func:`cluster_logits`).
        members: ``(K, m)`` int32 member table; ``mask``: ``(K, m)`` bool.
        embeddings: ``(N, d)`` item table.
        query: ``(d,)`` query; ``temperature``: positive scalar tau.
        num_samples: S, a Python int (draws are independent, with replacement).

    Returns:
        ``(items, log_q)``: ``(S,)`` int32 item ids and ``(S,)`` proposal log-probabilities.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0], [2.0]])
        >>> stats = cluster_stats(x, jnp.array([0, 0, 1]), 2, 2)
        >>> logits = cluster_logits(stats, jnp.array([1.0]), "sd", 1.0)
        >>> items, log_q = two_level_sample(jax.random.key(0), logits, stats.members,
        ...                                 stats.mask, x, jnp.array([1.0]), 1.0, 4)
        >>> items.shape, log_q.shape
        ((4,), (4,))
    """
    tau = jnp.asarray(temperature, query.dtype)
    cluster_key, item_key = jax.random.split(key)
    clusters = jax.random.categorical(cluster_key, logits, shape=(num_samples,))
    ids = members[clusters]
    item_logits = _member_logits(ids, mask[clusters], embeddings, query, tau)
    picks = jax.random.categorical(item_key, item_logits, axis=-1)
    picked_logit = jnp.take_along_axis(item_logits, picks[:, None], axis=-1)[:, 0]
    log_q = (
        jax.nn.log_softmax(logits)[clusters] + picked_logit - logsumexp(item_logits, axis=-1)
    )
    return jnp.take_along_axis(ids, picks[:, None], axis=-1)[:, 0], log_q


@jax.jit
def two_level_log_prob(logits, members, mask, cluster_ids, embeddings, query, items, temperature):
    """Proposal log-probabilities ``log q(i)`` of arbitrary items for one query.

    ``log q(i) = log_softmax(logits)_{c(i)} + s_i - log Z_{c(i)}``, where ``log Z_{c(i)}`` is the
    log-sum-exp over the item's own cluster (``O(m d)`` per item).

    Args:
        logits: ``(K,)`` cluster logits; ``members``, ``mask``: ``(K, m)`` member table.
        cluster_ids: ``(N,)`` cluster of each item.
        embeddings: ``(N, d)``; ``query``: ``(d,)``; ``items``: ``(S,)`` int item ids.
        temperature: positive scalar tau.

    Returns:
        ``(S,)`` log-probabilities in the query's dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> x, ids = jnp.array([[0.0], [1.0], [2.0]]), jnp.array([0, 0, 1])
        >>> stats = cluster_stats(x, ids, 2, 2)
        >>> q = jnp.array([1.0])
        >>> logits = cluster_logits(stats, q, "s", 1.0)
        >>> lq = two_level_log_prob(logits, stats.members, stats.mask, ids, x, q,
        ...                         jnp.arange(3), 1.0)
        >>> float(jnp.exp(lq).sum())  # doctest: +ELLIPSIS
        1.0...
    """
    tau = jnp.asarray(temperature, query.dtype)
    clusters = cluster_ids[items]
    item_logits = _member_logits(members[clusters], mask[clusters], embeddings, query, tau)
    scores = embeddings[items] @ query / tau
    return jax.nn.log_softmax(logits)[clusters] + scores - logsumexp(item_logits, axis=-1)


@jax.jit
def two_level_log_probs_all(logits, cluster_ids, embeddings, query, temperature):
    """Proposal log-probabilities of all N items for one query, in ``O(N d)``.

    The full enumeration of :func:`two_level_log_prob` (which costs ``O(m d)`` per item): every
    ``log Z_c`` comes from one segment log-sum-exp over the N scores. For diagnostics (TV, KL to
    the exact softmax) and tests, not for sampling.

    Args:
        logits: ``(K,)`` cluster logits; ``cluster_ids``: ``(N,)``.
        embeddings: ``(N, d)``; ``query``: ``(d,)``; ``temperature``: positive scalar tau.

    Returns:
        ``(N,)`` log-probabilities.

    Example:
        >>> import jax.numpy as jnp
        >>> lq = two_level_log_probs_all(jnp.zeros(2), jnp.array([0, 0, 1]), jnp.zeros((3, 1)),
        ...                              jnp.ones(1), 1.0)
        >>> [round(float(v), 4) for v in jnp.exp(lq)]
        [0.25, 0.25, 0.5]
    """
    tau = jnp.asarray(temperature, query.dtype)
    num_clusters = logits.shape[0]
    scores = embeddings @ query / tau
    peak = jax.ops.segment_max(scores, cluster_ids, num_segments=num_clusters)
    peak = jnp.where(jnp.isfinite(peak), peak, 0)
    mass = jax.ops.segment_sum(jnp.exp(scores - peak[cluster_ids]), cluster_ids,
                               num_segments=num_clusters)
    log_cluster_mass = peak + jnp.log(mass)
    return jax.nn.log_softmax(logits)[cluster_ids] + scores - log_cluster_mass[cluster_ids]


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def exact_log_partition(embeddings, queries, temperature, chunk_size: int | None = None):
    """``log Z = logsumexp_i q·x_i / tau`` for a batch of queries, streaming over items.

    With ``chunk_size`` (items per chunk) a ``lax.scan`` keeps a running log-sum-exp, so no
    ``(B, N)`` logit matrix is ever materialised; None computes it densely.

    Args:
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``temperature``: positive scalar.
        chunk_size: items per chunk, or None.

    Returns:
        ``(B,)`` log partition functions.

    Example:
        >>> import jax.numpy as jnp
        >>> x, q = jnp.zeros((5, 2)), jnp.ones((1, 2))
        >>> round(float(exact_log_partition(x, q, 1.0, chunk_size=2)[0]), 4)  # log 5
        1.6094
    """
    tau = jnp.asarray(temperature, queries.dtype)
    n, d = embeddings.shape
    if chunk_size is None or chunk_size >= n:
        return logsumexp(queries @ embeddings.T / tau, axis=-1)
    num_chunks = -(-n // chunk_size)
    pad = num_chunks * chunk_size - n
    blocks = jnp.pad(embeddings, ((0, pad), (0, 0))).reshape(num_chunks, chunk_size, d)
    valid = (jnp.arange(num_chunks * chunk_size) < n).reshape(num_chunks, chunk_size)

    def body(running, block):
        x, keep = block
        block_lse = logsumexp(jnp.where(keep[None, :], queries @ x.T / tau, -jnp.inf), axis=-1)
        return jnp.logaddexp(running, block_lse), None

    init = jnp.full(queries.shape[:1], -jnp.inf, queries.dtype)
    return jax.lax.scan(body, init, (blocks, valid))[0]


@functools.partial(jax.jit, static_argnames=("chunk_size",))
def exact_log_probs(embeddings, queries, temperature, chunk_size: int | None = None):
    """The exact softmax ``log p(i) = s_i - log Z`` of every item for a batch of queries.

    The ``(B, N)`` result is the output, so it is materialised; ``chunk_size`` (queries per chunk,
    via ``lax.map``) bounds the intermediate work to one chunk of rows at a time.

    Args:
        embeddings: ``(N, d)``; ``queries``: ``(B, d)``; ``temperature``: positive scalar.
        chunk_size: queries per chunk, or None for all at once.

    Returns:
        ``(B, N)`` log-probabilities.

    Example:
        >>> import jax.numpy as jnp
        >>> exact_log_probs(jnp.zeros((4, 2)), jnp.ones((3, 2)), 1.0).shape
        (3, 4)
    """
    tau = jnp.asarray(temperature, queries.dtype)

    def rows(query):
        return jax.nn.log_softmax(embeddings @ query / tau)

    return jax.lax.map(rows, queries, batch_size=chunk_size or queries.shape[0])
