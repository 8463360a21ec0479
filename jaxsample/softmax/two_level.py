"""Two-level softmax sampling over large item tables: 2LS, S-2LS and SD-2LS.

Sampling item ``i`` with probability ``p(i) = exp(s_i) / Z``, ``s_i = q·x_i / tau``, costs all N
logits per query. Two-level sampling clusters the items once (:func:`build_index`), then per query
draws a cluster by a cheap cluster logit and an item from the exact softmax inside it
(:func:`sample`). The cluster logit rules (Size- and Dispersion-Corrected Two-Level Softmax
Sampling, SPIGM @ ICML 2026) approximate the exact cluster mass

    log Z_c = log n_c + q·mu_c / tau + log mean_{i in c} exp(s_i - q·mu_c / tau)

by ``q·mu_c / tau`` (``"2ls"``), ``+ log n_c`` (``"s"``) and ``+ q^T Sigma_c q / (2 tau^2)``
(``"sd"``). Every draw comes with its exact proposal log-probability ``log q(i)``, so the bias that
remains is removed by the importance weights ``w(i) = exp(s_i - log q(i))``
(:func:`log_importance_weights`), which are also the corrected logits of sampled-softmax training.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxsample import softmax
    >>> items = jax.random.normal(jax.random.key(0), (1000, 8))
    >>> index = softmax.build_index(items, num_clusters=30, key=jax.random.key(1))
    >>> queries = jax.random.normal(jax.random.key(2), (5, 8))
    >>> ids, log_q = softmax.sample(jax.random.key(3), index, queries, 16, variant="sd")
    >>> ids.shape, log_q.shape
    ((5, 16), (5, 16))
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_chunk_size, check_int
from jaxsample.kernels import softmax as kernel
from jaxsample.kernels.softmax import VARIANTS, ClusterStats

__all__ = [
    "VARIANTS",
    "SoftmaxIndex",
    "build_index",
    "exact_log_probs",
    "log_importance_weights",
    "log_partition",
    "log_prob",
    "proposal_log_probs",
    "sample",
]


class SoftmaxIndex(NamedTuple):
    """A clustered item table (a pytree: pass it through ``jit``, shard its arrays).

    Attributes:
        embeddings: ``(N, d)`` item table.
        cluster_ids: ``(N,)`` int32 cluster of each item, every cluster non-empty.
        stats: :class:`jaxsample.kernels.softmax.ClusterStats` of the K clusters.
    """

    embeddings: jax.Array
    cluster_ids: jax.Array
    stats: ClusterStats

    @property
    def num_items(self) -> int:
        return self.embeddings.shape[0]

    @property
    def num_clusters(self) -> int:
        return self.stats.log_size.shape[0]

    @property
    def dim(self) -> int:
        return self.embeddings.shape[1]


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)




def build_index(
    embeddings,
    *,
    cluster_ids=None,
    num_clusters: int | None = None,
    key=None,
    rank: int = 0,
    max_cluster_size: int | None = None,
    kmeans_iterations: int = 20,
    chunk_size: int | None = None,
) -> SoftmaxIndex:
    """Clusters an item table and precomputes the statistics of every cluster logit rule.

    Without ``cluster_ids`` the items are clustered by
    :func:`jaxsample.kernels.softmax.kmeans` (random seeding, Lloyd iterations, chunked
    assignment); clusters k-means leaves empty are dropped, so the index may hold fewer than
    ``num_clusters`` clusters. ``max_cluster_size`` splits larger clusters into consecutive pieces
    of at most that size: sampling stays exact-in-law (the proposal is still reported exactly) and
    the per-draw cost ``O(m d)`` is bounded. Runs eagerly (cluster sizes set array shapes).

    Args:
        embeddings: ``(N, d)`` float32/float64 item table, finite.
        cluster_ids: optional ``(N,)`` integer cluster of each item in ``[0, num_clusters)``; every
            cluster must have at least one item.
        num_clusters: K. With ``cluster_ids``: defaults to ``max(cluster_ids) + 1``. Without:
            the k-means K, default ``round(sqrt(N))``.
        key: PRNG key for k-means; required when ``cluster_ids`` is None.
        rank: covariance kept for the dispersion term of ``"sd"``: 0 keeps the diagonal
            (``O(K d)`` per query), ``0 < r < d`` a top-r PCA plus isotropic residual
            (``O(K r d)``), ``r = d`` the full covariance.
        max_cluster_size: optional cap m on cluster sizes (larger clusters are split).
        kmeans_iterations: Lloyd iterations of k-means.
        chunk_size: rows per chunk: points per k-means assignment chunk, and clusters per
            chunk when computing covariances (``rank > 0``); None for all at once.

    Returns:
        A :class:`SoftmaxIndex`.

    Raises:
        TypeError, ValueError: naming the argument, on bad shapes, dtypes, non-finite embeddings,
            ids out of range, empty clusters or a missing key.

    Example:
        >>> import jax.numpy as jnp
        >>> index = build_index(jnp.eye(4), cluster_ids=jnp.array([0, 0, 1, 1]))
        >>> index.num_clusters, index.stats.members.shape
        (2, (2, 2))
    """
    if _is_traced(embeddings) or _is_traced(cluster_ids):
        raise TypeError("build_index runs eagerly (cluster sizes set array shapes); call it "
                        "outside jit/vmap and pass the returned index into transformed code")
    if not hasattr(embeddings, "shape") or not hasattr(embeddings, "dtype"):
        raise TypeError(f"embeddings must be an array, got {type(embeddings).__name__}")
    embeddings = jnp.asarray(embeddings)
    if embeddings.ndim != 2 or embeddings.shape[0] < 1 or embeddings.shape[1] < 1:
        raise ValueError(f"embeddings must have shape (N, d) with N, d >= 1, got "
                         f"{embeddings.shape}")
    if not jnp.issubdtype(embeddings.dtype, jnp.floating):
        raise TypeError(f"embeddings must be a float array, got dtype {embeddings.dtype}")
    if not bool(jnp.all(jnp.isfinite(embeddings))):
        raise ValueError("embeddings must be finite, got NaN or inf entries")
    n, d = embeddings.shape
    rank = check_int("rank", rank, 0, d)

    if cluster_ids is None:
        if key is None:
            raise ValueError("key is required to cluster the items by k-means when cluster_ids "
                             "is not given (or pass cluster_ids)")
        k = round(math.sqrt(n)) if num_clusters is None else num_clusters
        k = check_int("num_clusters", k, 1, n)
        iterations = check_int("kmeans_iterations", kmeans_iterations, 1)
        ids = kernel.kmeans(key, embeddings, k, iterations, chunk_size=chunk_size)
        # Drop clusters k-means left empty: relabel the used ids to 0..K'-1.
        used, ids = jnp.unique(ids, return_inverse=True)
        ids = ids.reshape(-1).astype(jnp.int32)
        num_clusters = int(used.shape[0])
    else:
        ids = jnp.asarray(cluster_ids)
        if ids.shape != (n,):
            raise ValueError(f"cluster_ids must have shape (N,) = ({n},) to match embeddings, "
                             f"got {ids.shape}")
        if not jnp.issubdtype(ids.dtype, jnp.integer):
            raise TypeError(f"cluster_ids must be an integer array, got dtype {ids.dtype}")
        low, high = int(jnp.min(ids)), int(jnp.max(ids))
        num_clusters = high + 1 if num_clusters is None else num_clusters
        num_clusters = check_int("num_clusters", num_clusters, 1)
        if low < 0 or high >= num_clusters:
            raise ValueError(f"cluster_ids must lie in [0, num_clusters) = [0, {num_clusters}), "
                             f"got values in [{low}, {high}]")
        ids = ids.astype(jnp.int32)
        sizes = np.bincount(np.asarray(ids), minlength=num_clusters)
        empty = np.flatnonzero(sizes == 0)
        if empty.size:
            raise ValueError(f"every cluster must be non-empty, got {empty.size} empty cluster(s) "
                             f"(ids {empty[:5].tolist()}{' ...' if empty.size > 5 else ''}); "
                             "relabel cluster_ids to 0..K-1 without gaps")

    if max_cluster_size is not None:
        max_cluster_size = check_int("max_cluster_size", max_cluster_size, 1)
        ids, num_clusters = _split_clusters(ids, num_clusters, max_cluster_size)
    largest = int(jnp.max(jnp.zeros(num_clusters, jnp.int32).at[ids].add(1)))
    stats = kernel.cluster_stats(embeddings, ids, num_clusters, largest, rank=rank,
                                 chunk_size=chunk_size)
    return SoftmaxIndex(embeddings, ids, stats)


def _split_clusters(ids, num_clusters, max_size):
    """Splits every cluster into consecutive pieces of at most ``max_size`` members."""
    sizes = jnp.zeros(num_clusters, jnp.int32).at[ids].add(1)
    pieces = -(-sizes // max_size)
    offsets = jnp.cumsum(pieces) - pieces
    order = jnp.argsort(ids, stable=True)
    starts = jnp.cumsum(sizes) - sizes
    ranks = jnp.zeros_like(ids).at[order].set(
        jnp.arange(ids.shape[0], dtype=jnp.int32) - starts[ids[order]])
    return (offsets[ids] + ranks // max_size).astype(jnp.int32), int(jnp.sum(pieces))


def _check_index(index):
    if not isinstance(index, SoftmaxIndex):
        raise TypeError(f"index must be a SoftmaxIndex from build_index, got "
                        f"{type(index).__name__}")


def _check_queries(index, queries):
    """Returns ``(queries as (B, d), was_single)``."""
    if not hasattr(queries, "shape") or not hasattr(queries, "dtype"):
        raise TypeError(f"queries must be an array, got {type(queries).__name__}")
    if queries.ndim not in (1, 2) or queries.shape[-1] != index.dim:
        raise ValueError(f"queries must have shape (d,) or (B, d) with d = {index.dim} (the "
                         f"embedding dimension), got {queries.shape}")
    if queries.dtype != index.embeddings.dtype:
        raise TypeError(f"queries must have the embeddings' dtype {index.embeddings.dtype}, got "
                        f"{queries.dtype}")
    single = queries.ndim == 1
    return (queries[None, :] if single else queries), single


def _check_temperature(temperature, dtype):
    if not _is_traced(temperature):
        value = np.asarray(temperature)
        if value.shape != () or not np.issubdtype(value.dtype, np.number):
            raise TypeError(f"temperature must be a positive scalar, got {temperature!r}")
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"temperature must be finite and > 0, got {float(value)}")
    return jnp.asarray(temperature, dtype)


def _check_variant(variant):
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def _check_items(index, items, queries, single, name="items"):
    """Returns ``items`` as ``(B, S)``."""
    if not hasattr(items, "shape") or not jnp.issubdtype(items.dtype, jnp.integer):
        raise TypeError(f"{name} must be an integer array, got "
                        f"{getattr(items, 'dtype', type(items).__name__)}")
    expected = "(S,) for a single query" if single else f"(B, S) with B = {queries.shape[0]}"
    if items.ndim != (1 if single else 2) or (not single and items.shape[0] != queries.shape[0]):
        raise ValueError(f"{name} must have shape {expected}, got {items.shape}")
    if not _is_traced(items) and items.size:
        low, high = int(jnp.min(items)), int(jnp.max(items))
        if low < 0 or high >= index.num_items:
            raise ValueError(f"{name} must lie in [0, N) = [0, {index.num_items}), got values "
                             f"in [{low}, {high}]")
    return items[None, :] if single else items


def sample(key, index: SoftmaxIndex, queries, num_samples: int, *, variant: str = "sd",
           temperature=1.0, chunk_size: int | None = None):
    """Draws items from the two-level proposal of each query, with their log-probabilities.

    Per query: ``c ~ softmax(l)`` with the cluster logits ``l`` of ``variant``, then ``i`` from the
    exact softmax over the members of ``c``; ``log q(i) = log_softmax(l)_c + s_i - log Z_c``.
    Cost per draw ``O(K (r + 1) d + m d)`` (K clusters, at most m members) instead of ``O(N d)``.
    Draws are independent (with replacement). Jit-compiled once per shape, ``num_samples`` and
    ``variant``; works under ``vmap`` and with a sharded item table.

    Args:
        key: a PRNG key (split across queries).
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)`` in the embeddings' dtype.
        num_samples: S, draws per query (Python int >= 1).
        variant: ``"sd"`` (size + dispersion), ``"s"`` (size) or ``"2ls"`` (centroid only).
        temperature: tau > 0.
        chunk_size: queries per chunk (``lax.map``): the gathered members take
            ``chunk_size * S * m * d`` memory instead of ``B * S * m * d``; None for all at once.
            The draws do not depend on it.

    Returns:
        ``(items, log_q)`` of shapes ``(B, S)`` (int32) and ``(B, S)``; ``(S,)`` for one query.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> index = build_index(jnp.eye(4), cluster_ids=jnp.array([0, 0, 1, 1]))
        >>> items, log_q = sample(jax.random.key(0), index, jnp.ones(4), 3, variant="s")
        >>> items.shape, [round(float(v), 4) for v in jnp.exp(log_q)]
        ((3,), [0.25, 0.25, 0.25])
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    num_samples = check_int("num_samples", num_samples, 1)
    _check_variant(variant)
    tau = _check_temperature(temperature, batch.dtype)
    chunk_size = check_chunk_size(chunk_size)
    items, log_q = _sample(key, index, batch, tau, num_samples, variant, chunk_size)
    return (items[0], log_q[0]) if single else (items, log_q)


@functools.partial(jax.jit, static_argnames=("num_samples", "variant", "chunk_size"))
def _sample(key, index, queries, tau, num_samples, variant, chunk_size=None):
    stats = index.stats

    def one(args):
        query_key, query = args
        logits = kernel.cluster_logits(stats, query, variant, tau)
        return kernel.two_level_sample(query_key, logits, stats.members, stats.mask,
                                       index.embeddings, query, tau, num_samples)

    keys = jax.random.split(key, queries.shape[0])
    return jax.lax.map(one, (keys, queries), batch_size=chunk_size or queries.shape[0])


def log_prob(index: SoftmaxIndex, queries, items, variant: str = "sd", *, temperature=1.0):
    """Exact proposal log-probabilities ``log q(i)`` of given items under a variant.

    ``log q(i) = log_softmax(l)_{c(i)} + s_i - log Z_{c(i)}``; costs ``O(K (r + 1) d)`` per query
    plus ``O(m d)`` per item. Equals the ``log_q`` that :func:`sample` returns with each draw.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        items: ``(S,)`` (one query) or ``(B, S)`` integer item ids in ``[0, N)``.
        variant: ``"sd"``, ``"s"`` or ``"2ls"``.
        temperature: tau > 0.

    Returns:
        Log-probabilities with the shape of ``items``.

    Example:
        >>> import jax.numpy as jnp
        >>> index = build_index(jnp.eye(3), cluster_ids=jnp.array([0, 0, 1]))
        >>> lq = log_prob(index, jnp.zeros(3), jnp.arange(3), "2ls")
        >>> [round(float(v), 4) for v in jnp.exp(lq)]  # 2LS halves by cluster, not by size
        [0.25, 0.25, 0.5]
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    items = _check_items(index, items, batch, single)
    _check_variant(variant)
    tau = _check_temperature(temperature, batch.dtype)
    out = _log_prob(index, batch, items, tau, variant)
    return out[0] if single else out


@functools.partial(jax.jit, static_argnames=("variant",))
def _log_prob(index, queries, items, tau, variant):
    stats = index.stats

    def one(query, query_items):
        logits = kernel.cluster_logits(stats, query, variant, tau)
        return kernel.two_level_log_prob(logits, stats.members, stats.mask, index.cluster_ids,
                                         index.embeddings, query, query_items, tau)

    return jax.vmap(one)(queries, items)


def proposal_log_probs(index: SoftmaxIndex, queries, variant: str = "sd", *, temperature=1.0):
    """The whole proposal ``log q(i)`` over all N items, in ``O(N d)`` per query.

    For diagnostics against :func:`exact_log_probs` (TV, KL); the cluster masses ``log Z_c`` come
    from one segment log-sum-exp over all scores.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        variant: ``"sd"``, ``"s"`` or ``"2ls"``.
        temperature: tau > 0.

    Returns:
        ``(B, N)`` log-probabilities, or ``(N,)`` for one query.

    Example:
        >>> import jax.numpy as jnp
        >>> index = build_index(jnp.eye(3), cluster_ids=jnp.array([0, 0, 1]))
        >>> [round(float(v), 4) for v in jnp.exp(proposal_log_probs(index, jnp.zeros(3), "s"))]
        [0.3333, 0.3333, 0.3333]
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    _check_variant(variant)
    tau = _check_temperature(temperature, batch.dtype)
    out = _proposal_log_probs(index, batch, tau, variant)
    return out[0] if single else out


@functools.partial(jax.jit, static_argnames=("variant",))
def _proposal_log_probs(index, queries, tau, variant):
    def one(query):
        logits = kernel.cluster_logits(index.stats, query, variant, tau)
        return kernel.two_level_log_probs_all(logits, index.cluster_ids, index.embeddings, query,
                                              tau)

    return jax.vmap(one)(queries)


def exact_log_probs(index: SoftmaxIndex, queries, *, temperature=1.0,
                    chunk_size: int | None = None):
    """The exact softmax ``log p(i) = s_i - log Z`` over all N items (the reference).

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        temperature: tau > 0.
        chunk_size: queries per chunk (bounds the work in flight); None for all at once.

    Returns:
        ``(B, N)`` log-probabilities, or ``(N,)`` for one query.

    Example:
        >>> import jax.numpy as jnp
        >>> index = build_index(jnp.eye(3), cluster_ids=jnp.array([0, 0, 1]))
        >>> [round(float(v), 4) for v in jnp.exp(exact_log_probs(index, jnp.zeros(3)))]
        [0.3333, 0.3333, 0.3333]
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    tau = _check_temperature(temperature, batch.dtype)
    chunk_size = check_chunk_size(chunk_size)
    out = kernel.exact_log_probs(index.embeddings, batch, tau, chunk_size=chunk_size)
    return out[0] if single else out


def log_partition(index: SoftmaxIndex, queries, *, temperature=1.0,
                  chunk_size: int | None = None):
    """The exact ``log Z = logsumexp_i s_i`` per query, streaming over ``chunk_size`` items.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        temperature: tau > 0.
        chunk_size: items per chunk (never materialises ``B x N``); None for dense.

    Returns:
        ``(B,)``, or a scalar for one query.

    Example:
        >>> import jax.numpy as jnp
        >>> index = build_index(jnp.eye(3), cluster_ids=jnp.array([0, 0, 1]))
        >>> round(float(log_partition(index, jnp.zeros(3), chunk_size=2)), 4)  # log 3
        1.0986
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    tau = _check_temperature(temperature, batch.dtype)
    chunk_size = check_chunk_size(chunk_size)
    out = kernel.exact_log_partition(index.embeddings, batch, tau, chunk_size=chunk_size)
    return out[0] if single else out


def log_importance_weights(index: SoftmaxIndex, queries, items, log_q, *, temperature=1.0):
    """Unnormalised log importance weights ``log w(i) = s_i - log q(i)`` of drawn items.

    ``w(i) = exp(s_i) / q(i) = Z p(i) / q(i)``, so ``E_q[w] = Z`` (the mean of the weights is an
    unbiased estimate of the partition function) and ``softmax(log w)`` over a query's draws gives
    self-normalised estimates ``sum_j softmax(log w)_j f(i_j) -> E_p[f]``. ``log w`` is also the
    corrected logit ``s_i - log q(i)`` of sampled-softmax training (Bengio & Senecal 2008; Jean et
    al. 2015); it is differentiable in ``queries`` and the embeddings.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        items: ``(S,)`` or ``(B, S)`` drawn item ids; ``log_q``: their proposal log-probabilities.
        temperature: tau > 0 (the one used to draw).

    Returns:
        Log-weights with the shape of ``items``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> index = build_index(jnp.eye(3), cluster_ids=jnp.array([0, 0, 1]))
        >>> q = jnp.zeros(3)
        >>> items, log_q = sample(jax.random.key(0), index, q, 4, variant="2ls")
        >>> log_w = log_importance_weights(index, q, items, log_q)
        >>> sorted(set(round(float(w), 4) for w in jnp.exp(log_w)))  # 1/q: 4 or 2 by cluster
        [2.0, 4.0]
    """
    _check_index(index)
    batch, single = _check_queries(index, queries)
    items = _check_items(index, items, batch, single)
    log_q = jnp.asarray(log_q)
    expected = items.shape[1:] if single else items.shape
    if log_q.shape != expected or log_q.dtype != batch.dtype:
        raise ValueError(f"log_q must have the items' shape {expected} and dtype {batch.dtype}, "
                         f"got {log_q.shape} {log_q.dtype}")
    tau = _check_temperature(temperature, batch.dtype)
    scores = jnp.einsum("bsd,bd->bs", index.embeddings[items], batch) / tau
    out = scores - (log_q[None, :] if single else log_q)
    return out[0] if single else out
