"""Two-level softmax sampling over large item tables: 2LS, S-2LS and SD-2LS.

Sampling item ``i`` with probability ``p(i) = exp(s_i) / Z``, ``s_i = q·x_i / tau``, costs all N
logits per query. Two-level sampling clusters the items once (:func:`build_index`, chunked
k-means), then per query draws a cluster by a cheap cluster logit and an item from the exact
softmax inside it (:func:`sample`), both by inverse CDF. The cluster logit rules (Size- and
Dispersion-Corrected Two-Level Softmax Sampling, SPIGM @ ICML 2026) approximate the exact cluster
mass

    log Z_c = log n_c + q·mu_c / tau + log mean_{i in c} exp(s_i - q·mu_c / tau)

by ``q·mu_c / tau`` (``"2ls"``), ``+ log n_c`` (``"s"``) and ``+ q^T Sigma_c q / (2 tau^2)``
(``"sd"``). Every draw comes with its exact proposal log-probability ``log q(i)`` (``info.log_q``),
so the bias that remains is removed by the importance weights ``w(i) = exp(s_i - log q(i))``
(:func:`log_importance_weights`); :func:`sampled_softmax_logits` turns draws into the corrected
logits of a sampled-softmax loss.

Sizing (:func:`recommended_sizes`): S draws per query cost ``O(K d)`` for the cluster logits
(one matrix product for the whole batch of queries) plus ``O(S m d)`` for the member slabs of the
drawn clusters (read per draw), with ``K ~ N / m``; the default sizes the index for the draws per
query it will serve.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxsample import softmax
    >>> items = jax.random.normal(jax.random.key(0), (1000, 8))
    >>> index, _ = softmax.build_index(jax.random.key(1), items, num_clusters=30)
    >>> queries = jax.random.normal(jax.random.key(2), (5, 8))
    >>> ids, info = softmax.sample(jax.random.key(3), index, queries, num_samples=16)
    >>> ids.shape, info.log_q.shape, info.nonfinite.tolist()
    ((5, 16), (5, 16), [False, False, False, False, False])
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_chunk_size,
    check_hyperparameter,
    check_int,
    check_key,
    check_number,
    is_concrete,
)
from jaxsample._solver import SolverStats
from jaxsample.kernels import kmeans as clustering
from jaxsample.kernels import softmax as kernel
from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.kmeans import INITS
from jaxsample.kernels.softmax import VARIANTS, ClusterStats

__all__ = [
    "INITS",
    "VARIANTS",
    "SoftmaxIndexInfo",
    "SoftmaxInfo",
    "SoftmaxIndex",
    "build_index",
    "index_from_clusters",
    "exact_log_probs",
    "log_importance_weights",
    "log_partition",
    "log_prob",
    "proposal_log_probs",
    "recommended_sizes",
    "sample",
    "sampled_softmax_logits",
]


class SoftmaxIndexInfo(NamedTuple):
    """How an index was built (arrays only).

    Attributes:
        solver: :class:`~jaxsample.SolverStats` of k-means: iterations run and whether it met its
            tolerance (0 iterations and ``successful`` when ``cluster_ids`` were given).
        objective: ``()`` within-cluster sum of squares ``sum_i |x_i - mu_{c(i)}|^2`` of the
            final clusters (after any split).
        nonfinite: ``()`` bool, a cluster statistic is NaN or infinite.
    """

    solver: SolverStats
    objective: jax.Array
    nonfinite: jax.Array


class SoftmaxInfo(NamedTuple):
    """What :func:`sample` reports with its draws.

    Attributes:
        log_q: ``(B, S)`` exact proposal log-probabilities of the drawn items (``(S,)`` for one
            query).
        nonfinite: ``(B,)`` bool (``()`` for one query): the query or a ``log_q`` is NaN or
            infinite; the draws of that query are then meaningless (valid ids, no law).
    """

    log_q: jax.Array
    nonfinite: jax.Array


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
    def max_cluster_size(self) -> int:
        return self.stats.members.shape[1]

    @property
    def dim(self) -> int:
        return self.embeddings.shape[1]


def recommended_sizes(num_items: int, *, num_samples: int = 1) -> tuple[int, int]:
    """The default ``(num_clusters, max_cluster_size)`` of an index for S draws per query.

    A call drawing S items per query costs ``a K d`` for the cluster logits (a matrix product
    shared by the batch of queries) plus ``b S m d`` for the m member slots each draw reads from
    its cluster, with ``K ~ N / m``; the sum is smallest at ``m ~ sqrt((a / b) N / S)``. Member
    reads are the dearer operation (``b >> a``: each draw reads its own slab, while the logits'
    matrix product streams the cluster statistics once per batch), so the rule is

    - ``num_clusters = round(sqrt(S N))`` k-means clusters (mean size ``sqrt(N / S)``), and
    - ``max_cluster_size = ceil(sqrt(N / S) / 2)``: :func:`build_index` cuts larger clusters into
      slabs along their principal axis, which also lowers the dispersion the cluster logits must
      approximate (smaller TV).

    Measured on a 2-core CPU at N = 10^5, d = 64, 64 draws per query (k-means K = 2530): caps of
    16 / 32 / 64 / 128 took 0.45 / 1.25 / 1.66 / 1.88 ms per query (exact inverse CDF: 6.0) with
    SD-2LS TV 0.029 / 0.025 / 0.023 / 0.022. Both are clamped to ``[1, N]``.

    Args:
        num_items: N >= 1.
        num_samples: S >= 1, the draws per query the index is sized for.

    Returns:
        ``(num_clusters, max_cluster_size)``.

    Example:
        >>> recommended_sizes(10**6), recommended_sizes(10**6, num_samples=64)
        ((1000, 500), (8000, 63))
    """
    n = check_int("num_items", num_items, 1)
    s = check_int("num_samples", num_samples, 1)
    clusters = min(n, max(1, round(math.sqrt(s * n))))
    cap = min(n, max(1, math.ceil(math.sqrt(n / s) / 2)))
    return clusters, cap


def build_index(
    key: jax.Array,
    embeddings,
    *,
    num_clusters: int | None = None,
    num_samples: int = 1,
    max_cluster_size: int | None = None,
    rank: int = 0,
    max_iterations: int = 20,
    tolerance: float = 1e-4,
    init: str = "kmeans++",
    batch_size: int | None = None,
    chunk_size: int | None = 256,
    static_shapes: bool = False,
) -> tuple[SoftmaxIndex, SoftmaxIndexInfo]:
    """Clusters an item table by k-means and precomputes the statistics of every cluster logit rule.

    The items are clustered by :func:`jaxsample.kernels.kmeans.kmeans`
    (k-means++ or random seeding; Lloyd or mini-batch steps; one matrix product per chunk of
    ``chunk_size`` items); clusters k-means leaves empty are dropped. Then every cluster above
    ``max_cluster_size`` is cut into balanced slabs along its principal axis
    (:func:`jaxsample.kernels.softmax.split_clusters`): sampling stays exact in law (the proposal
    is reported exactly) and the per-draw cost ``O(m d)`` is bounded. Runs eagerly (cluster sizes
    set array shapes).

    Args:
        key: PRNG key of k-means' seeding (and mini-batches).
        embeddings: ``(N, d)`` float32/float64 item table, finite.
        num_clusters: the k-means K, default from :func:`recommended_sizes`.
        num_samples: draws per query the index is sized for (sets the defaults of
            ``num_clusters`` and ``max_cluster_size``, :func:`recommended_sizes`).
        max_cluster_size: cap m on cluster sizes (larger clusters are split). Default: the cap
            of :func:`recommended_sizes`. Pass N to keep k-means clusters whole.
        rank: covariance kept for the dispersion term of ``"sd"``: 0 keeps the diagonal
            (``O(K d)`` per query), ``0 < r < d`` a top-r PCA plus isotropic residual
            (``O(K r d)``), ``r = d`` the full covariance.
        max_iterations: k-means iteration cap (Lloyd iterations or mini-batch steps).
        tolerance: k-means stopping tolerance (relative objective decrease; mini-batch: mean
            squared centre shift relative to the data's spread).
        init: k-means seeding, ``"kmeans++"`` or ``"random"``.
        batch_size: points per mini-batch k-means step; None for full-batch Lloyd.
        static_shapes: pad the index to ``num_clusters + ceil(N / max_cluster_size)`` clusters
            (the most a split can produce; the extra clusters are empty and never drawn) of
            ``max_cluster_size`` slots, so that every index built with the same settings has the
            same shapes and shares every compilation (a training loop that rebuilds its index
            every few epochs compiles its sampler once). k-means clusters left empty stay, empty.
        chunk_size: items per chunk: k-means assigns this many items per matrix product, and
            ``rank > 0`` covariances gather about this many members at once; None for all at
            once.

    Returns:
        ``(SoftmaxIndex, SoftmaxIndexInfo)``: the index, and k-means' iterations and convergence.

    Raises:
        TypeError, ValueError: naming the argument, on bad shapes, dtypes, non-finite embeddings
            or a missing key.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> index, info = build_index(jax.random.key(0), jnp.eye(8), num_clusters=2,
        ...                           max_cluster_size=8)      # keep the k-means clusters whole
        >>> index.num_clusters, bool(info.solver.converged)
        (2, True)
    """
    key = check_key("key", key)
    return _build(key, embeddings, None, num_clusters=num_clusters, num_samples=num_samples,
                  max_cluster_size=max_cluster_size, rank=rank, max_iterations=max_iterations,
                  tolerance=tolerance, init=init, batch_size=batch_size, chunk_size=chunk_size,
                  static_shapes=static_shapes)


def index_from_clusters(
    embeddings,
    cluster_ids,
    *,
    num_clusters: int | None = None,
    num_samples: int = 1,
    max_cluster_size: int | None = None,
    rank: int = 0,
    chunk_size: int | None = 256,
    static_shapes: bool = False,
) -> tuple[SoftmaxIndex, SoftmaxIndexInfo]:
    """:func:`build_index` for a given partition of the items (deterministic: no k-means).

    Args:
        embeddings: ``(N, d)`` float32/float64 item table, finite.
        cluster_ids: ``(N,)`` integer cluster of each item in ``[0, num_clusters)``; every
            cluster must have at least one item.
        num_clusters: K, default ``max(cluster_ids) + 1``.
        max_cluster_size: cap m on cluster sizes (larger clusters are split); default N (the
            partition is kept whole).
        num_samples, rank, chunk_size, static_shapes: as in :func:`build_index`.

    Returns:
        ``(SoftmaxIndex, SoftmaxIndexInfo)`` (0 k-means iterations, ``successful``).

    Raises:
        TypeError, ValueError: naming the argument, on bad shapes, dtypes, non-finite embeddings,
            ids out of range or empty clusters.

    Example:
        >>> import jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> index.num_clusters, index.max_cluster_size
        (2, 3)
    """
    if cluster_ids is None:
        raise TypeError("cluster_ids must be an (N,) integer array (build_index clusters the "
                        "items by k-means)")
    return _build(None, embeddings, cluster_ids, num_clusters=num_clusters,
                  num_samples=num_samples, max_cluster_size=max_cluster_size, rank=rank,
                  max_iterations=1, tolerance=0.0, init="kmeans++", batch_size=None,
                  chunk_size=chunk_size, static_shapes=static_shapes)


def _build(key, embeddings, cluster_ids, *, num_clusters, num_samples, max_cluster_size, rank,
           max_iterations, tolerance, init, batch_size, chunk_size, static_shapes):
    if not is_concrete((embeddings, cluster_ids)):
        raise TypeError("build_index runs eagerly (cluster sizes set array shapes); call it "
                        "outside jit/vmap and pass the returned index into transformed code")
    embeddings = check_array("embeddings", embeddings, ndim=2, finite=True, min_rows=1)
    n, d = embeddings.shape
    if d < 1:
        raise ValueError(f"embeddings must have shape (N, d) with d >= 1, got {embeddings.shape}")
    rank = check_int("rank", rank, 0, d)
    num_samples = check_int("num_samples", num_samples, 1)
    chunk_size = check_chunk_size(chunk_size)
    default_k, default_cap = recommended_sizes(n, num_samples=num_samples)
    if max_cluster_size is not None:
        cap = check_int("max_cluster_size", max_cluster_size, 1)
    else:  # k-means clusters are sized for the draws; a given partition is kept as it is
        cap = default_cap if cluster_ids is None else n
    solver = SolverStats.of(0, converged=jnp.ones((), bool))

    if cluster_ids is None:
        k = default_k if num_clusters is None else check_int("num_clusters", num_clusters, 1, n)
        max_iterations = check_int("max_iterations", max_iterations, 1)
        tolerance = check_number("tolerance", tolerance, positive=False)
        init = check_choice("init", init, INITS)
        batch_size = check_int("batch_size", batch_size, 1, allow_none=True)
        result = clustering.kmeans(key, embeddings, k, max_iterations, tolerance, init=init,
                               batch_size=batch_size, chunk_size=chunk_size)
        solver = SolverStats.of(result.num_iterations, converged=result.converged)
        # drop clusters k-means left empty: relabel the used ids to 0..K'-1 (host-side: the
        # bookkeeping sets shapes)
        host = np.asarray(result.assignment)
        if static_shapes:
            num_clusters = k
        else:
            used, host = np.unique(host, return_inverse=True)
            host, num_clusters = host.reshape(-1), int(used.shape[0])
    else:
        ids = check_array("cluster_ids", cluster_ids, shape=(n,), kind="integer")
        host = np.asarray(ids)
        low, high = int(host.min()), int(host.max())
        num_clusters = high + 1 if num_clusters is None else check_int("num_clusters",
                                                                      num_clusters, 1)
        if low < 0 or high >= num_clusters:
            raise ValueError(f"cluster_ids must lie in [0, num_clusters) = [0, {num_clusters}), "
                             f"got values in [{low}, {high}]")
        empty = np.flatnonzero(np.bincount(host, minlength=num_clusters) == 0)
        if empty.size:
            raise ValueError(f"every cluster must be non-empty, got {empty.size} empty cluster(s) "
                             f"(ids {empty[:5].tolist()}{' ...' if empty.size > 5 else ''}); "
                             "relabel cluster_ids to 0..K-1 without gaps")

    ids = jnp.asarray(host.astype(np.int32))
    largest = int(np.bincount(host).max())
    bound = num_clusters + -(-n // cap)
    if largest > cap:
        ids, total = kernel.split_clusters(embeddings, ids, num_clusters, cap)
        num_clusters, largest = int(total), int(np.bincount(np.asarray(ids)).max())
    if static_shapes:
        num_clusters, largest = bound, cap
    stats, objective, nonfinite = _statistics(embeddings, ids, num_clusters, largest, rank,
                                              chunk_size)
    return SoftmaxIndex(embeddings, ids, stats), SoftmaxIndexInfo(solver, objective, nonfinite)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _statistics(embeddings, ids, num_clusters, largest, rank, chunk_size):
    stats = kernel.cluster_stats(embeddings, ids, num_clusters, largest, rank=rank,
                                 chunk_size=chunk_size)
    objective = jnp.sum((embeddings - stats.mean[ids]) ** 2)
    nonfinite = ~(jnp.all(jnp.isfinite(stats.mean)) & jnp.all(jnp.isfinite(stats.dispersion_diag))
                  & jnp.all(jnp.isfinite(stats.dispersion_factors)))
    return stats, objective, nonfinite


def _check_index(index):
    if not isinstance(index, SoftmaxIndex):
        raise TypeError(f"index must be a SoftmaxIndex from build_index, got "
                        f"{type(index).__name__}")


def _check_queries(index, queries):
    """Returns ``(queries as (B, d), was_single)``. Finiteness is reported, not refused."""
    queries = check_array("queries", queries, dtype=index.embeddings.dtype)
    if queries.ndim not in (1, 2) or queries.shape[-1] != index.dim:
        raise ValueError(f"queries must have shape (d,) or (B, d) with d = {index.dim} (the "
                         f"embedding dimension), got {queries.shape}")
    single = queries.ndim == 1
    return (queries[None, :] if single else queries), single


def _check_items(index, items, queries, single, name="items"):
    """Returns ``items`` as ``(B, S)``."""
    items = check_array(name, items, kind="integer")
    expected = "(S,) for a single query" if single else f"(B, S) with B = {queries.shape[0]}"
    if items.ndim != (1 if single else 2) or (not single and items.shape[0] != queries.shape[0]):
        raise ValueError(f"{name} must have shape {expected}, got {items.shape}")
    if is_concrete(items) and items.size:
        low, high = int(jnp.min(items)), int(jnp.max(items))
        if low < 0 or high >= index.num_items:
            raise ValueError(f"{name} must lie in [0, N) = [0, {index.num_items}), got values "
                             f"in [{low}, {high}]")
    return items[None, :] if single else items


def _common(index, queries, variant, temperature, chunk_size):
    _check_index(index)
    batch, single = _check_queries(index, queries)
    if variant is not None:
        check_choice("variant", variant, VARIANTS)
    tau = check_hyperparameter("temperature", temperature)
    return batch, single, tau, check_chunk_size(chunk_size)


def sample(key, index: SoftmaxIndex, queries, *, num_samples: int, variant: str = "sd",
           temperature=1.0, chunk_size: int | None = None) -> tuple[jax.Array, SoftmaxInfo]:
    """Draws items from the two-level proposal of each query, with their log-probabilities.

    Per query: ``c ~ softmax(l)`` with the cluster logits ``l`` of ``variant``, then ``i`` from the
    exact softmax over the members of ``c``, both by inverse CDF (one uniform per draw);
    ``log q(i) = log_softmax(l)_c + s_i - log Z_c``. Cost per query ``O(K (r + 1) d + S m d)`` (K
    clusters of at most m members) instead of ``O(N d)``; each draw reads one contiguous slab of
    its cluster's m member slots (``index.stats.sorted_embeddings``). Draws are independent (with
    replacement). Compiled once per shape, ``num_samples``, ``variant`` and ``chunk_size``;
    ``temperature`` is traced (sweeping or ``vmap``-ing it does not recompile); works under
    ``vmap`` and with a sharded item table.

    Args:
        key: a PRNG key (split across queries).
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)`` in the embeddings' dtype. A non-finite query is not
            refused: it is flagged in ``info.nonfinite``.
        num_samples: S, draws per query (Python int >= 1).
        variant: ``"sd"`` (size + dispersion), ``"s"`` (size) or ``"2ls"`` (centroid only).
        temperature: tau > 0.
        chunk_size: queries per chunk: bounds the cluster logits to ``chunk_size * K`` and,
            where all member slabs are gathered at once (accelerators, or slabs of fewer than
            1024 floats on CPU), the slabs to ``chunk_size * S * m * d`` instead of
            ``B * S * m * d``; on CPU large slabs are read one draw at a time anyway. None for
            all at once. The draws do not depend on it.

    Returns:
        ``(items, info)``: ``(B, S)`` int32 item ids (``(S,)`` for one query) and a
        :class:`SoftmaxInfo` with ``log_q`` of the same shape.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> items, info = sample(jax.random.key(0), index, jnp.zeros(4), num_samples=16,
        ...                      variant="2ls")
        >>> items.shape, sorted({round(float(v), 4) for v in jnp.exp(info.log_q)})
        ((16,), [0.1667, 0.5])
    """
    key = check_key("key", key)
    batch, single, tau, chunk_size = _common(index, queries, variant, temperature, chunk_size)
    num_samples = check_int("num_samples", num_samples, 1)
    items, info = _sample(key, index, batch, tau, num_samples, variant, chunk_size,
                          _sequential(index))
    if single:
        return items[0], SoftmaxInfo(info.log_q[0], info.nonfinite[0])
    return items, info


def _nonfinite(queries, values):
    return ~(jnp.all(jnp.isfinite(queries), axis=-1) & jnp.all(jnp.isfinite(values), axis=-1))


# Below this many floats per member slab, gathering every slab at once beat the per-draw loop
# on CPU (m d = 640: 5.3 vs 19.8 us per draw); above it the loop won (m d = 12 800: 8x).
_SLAB_LOOP_MIN = 1024


def _sequential(index) -> bool:
    """Loop over draws (one contiguous slab each) on CPU for large slabs; gather all slabs at once
    on accelerators and for small slabs (where the loop's per-step overhead dominates)."""
    return jax.default_backend() == "cpu" and index.max_cluster_size * index.dim >= _SLAB_LOOP_MIN


@functools.partial(jax.jit,
                   static_argnames=("num_samples", "variant", "chunk_size", "sequential"))
def _sample(key, index, queries, temperature, num_samples, variant, chunk_size,
            sequential=False):
    tau = jnp.asarray(temperature, queries.dtype)
    stats = index.stats
    cluster_keys, item_keys = kernel.split_keys(key, queries.shape[0], num_samples)

    def clusters_of(keys, block):
        logits = jax.vmap(lambda q: kernel.cluster_logits(stats, q, variant, tau))(block)
        return kernel.draw_clusters(keys, logits, num_samples)

    def members_of(keys, clusters, block):
        return kernel.draw_members(keys, stats, clusters, block, tau, sequential)

    clusters, log_cluster = map_rows(clusters_of, cluster_keys, queries, chunk_size=chunk_size)
    if sequential:  # one slab in flight at a time: nothing to chunk
        items, log_item = members_of(item_keys, clusters, queries)
    else:
        items, log_item = map_rows(members_of, item_keys, clusters, queries,
                                   chunk_size=chunk_size)
    log_q = log_cluster + log_item
    return items, SoftmaxInfo(log_q, _nonfinite(queries, log_q))


def log_prob(index: SoftmaxIndex, queries, items, *, variant: str = "sd", temperature=1.0,
             chunk_size: int | None = None):
    """Exact proposal log-probabilities ``log q(i)`` of given items under a variant.

    ``log q(i) = log_softmax(l)_{c(i)} + s_i - log Z_{c(i)}``; equals the ``log_q`` that
    :func:`sample` returns with each draw. Memory per query is ``O(K (r + 1) + N + S)`` beyond the
    embeddings, whatever S is: for a few items (``S m d <= N``) each item's cluster normaliser
    comes from its cluster's members (``O(S m d)`` work), otherwise all K normalisers come from one
    pass over the N item logits and a segment log-sum-exp (``O(N d)`` work per query; see
    :func:`jaxsample.kernels.softmax.two_level_log_prob`).

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        items: ``(S,)`` (one query) or ``(B, S)`` integer item ids in ``[0, N)``.
        variant: ``"sd"``, ``"s"`` or ``"2ls"``.
        temperature: tau > 0.
        chunk_size: queries per chunk; None for all at once.

    Returns:
        Log-probabilities with the shape of ``items``.

    Example:
        >>> import jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> lq = log_prob(index, jnp.zeros(4), jnp.arange(4), variant="2ls")
        >>> [round(float(v), 4) for v in jnp.exp(lq)]  # 2LS halves by cluster, not by size
        [0.1667, 0.1667, 0.1667, 0.5]
    """
    batch, single, tau, chunk_size = _common(index, queries, variant, temperature, chunk_size)
    items = _check_items(index, items, batch, single)
    out = _log_prob(index, batch, items, tau, variant, chunk_size, _sequential(index))
    return out[0] if single else out


@functools.partial(jax.jit, static_argnames=("variant", "chunk_size", "sequential"))
def _log_prob(index, queries, items, temperature, variant, chunk_size,
              sequential=False):
    tau = jnp.asarray(temperature, queries.dtype)
    stats = index.stats

    def block(block_queries, block_items):
        logits = jax.vmap(lambda q: kernel.cluster_logits(stats, q, variant, tau))(block_queries)
        return kernel.two_level_log_prob(stats, logits, index.cluster_ids, index.embeddings,
                                         block_queries, block_items, tau, sequential)

    return map_rows(block, queries, items, chunk_size=chunk_size)


def proposal_log_probs(index: SoftmaxIndex, queries, *, variant: str = "sd", temperature=1.0,
                       chunk_size: int | None = None):
    """The whole proposal ``log q(i)`` over all N items, in ``O(N d)`` per query.

    For diagnostics against :func:`exact_log_probs` (TV, KL); the cluster masses ``log Z_c`` come
    from one segment log-sum-exp over all scores.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        variant: ``"sd"``, ``"s"`` or ``"2ls"``.
        temperature: tau > 0.
        chunk_size: queries per chunk; None for all at once.

    Returns:
        ``(B, N)`` log-probabilities, or ``(N,)`` for one query.

    Example:
        >>> import jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> lq = proposal_log_probs(index, jnp.zeros(4), variant="s")
        >>> [round(float(v), 4) for v in jnp.exp(lq)]  # S-2LS: exact for equal scores
        [0.25, 0.25, 0.25, 0.25]
    """
    batch, single, tau, chunk_size = _common(index, queries, variant, temperature, chunk_size)
    out = _proposal_log_probs(index, batch, tau, variant, chunk_size)
    return out[0] if single else out


@functools.partial(jax.jit, static_argnames=("variant", "chunk_size"))
def _proposal_log_probs(index, queries, temperature, variant, chunk_size):
    tau = jnp.asarray(temperature, queries.dtype)

    def one(query):
        logits = kernel.cluster_logits(index.stats, query, variant, tau)
        return kernel.two_level_log_probs_all(logits, index.cluster_ids, index.embeddings, query,
                                              tau)

    return map_rows(jax.vmap(one), queries, chunk_size=chunk_size)


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
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> [round(float(v), 4) for v in jnp.exp(exact_log_probs(index, jnp.ones(4)))]
        [0.25, 0.25, 0.25, 0.25]
    """
    batch, single, tau, chunk_size = _common(index, queries, None, temperature, chunk_size)
    out = kernel.exact_log_probs(index.embeddings, batch, tau, chunk_size=chunk_size)
    return out[0] if single else out


def log_partition(index: SoftmaxIndex, queries, *, temperature=1.0,
                  chunk_size: int | None = None):
    """The exact ``log Z = logsumexp_i s_i`` per query.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        temperature: tau > 0.
        chunk_size: queries per chunk (at most ``chunk_size x N`` logits at once); None for
            all at once.

    Returns:
        ``(B,)``, or a scalar for one query.

    Example:
        >>> import jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> round(float(log_partition(index, jnp.zeros(4))), 4)  # log 4
        1.3863
    """
    batch, single, tau, chunk_size = _common(index, queries, None, temperature, chunk_size)
    out = kernel.exact_log_partition(index.embeddings, batch, tau, chunk_size=chunk_size)
    return out[0] if single else out


def log_importance_weights(index: SoftmaxIndex, queries, items, log_q, *, temperature=1.0):
    """Unnormalised log importance weights ``log w(i) = s_i - log q(i)`` of drawn items.

    ``w(i) = exp(s_i) / q(i) = Z p(i) / q(i)``, so ``E_q[w] = Z`` (the mean of the weights is an
    unbiased estimate of the partition function) and ``softmax(log w)`` over a query's draws gives
    self-normalised estimates ``sum_j softmax(log w)_j f(i_j) -> E_p[f]``. Differentiable in
    ``queries`` and the embeddings.

    Args:
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)``.
        items: ``(S,)`` or ``(B, S)`` drawn item ids; ``log_q``: their proposal log-probabilities.
        temperature: tau > 0 (the one used to draw).

    Returns:
        Log-weights with the shape of ``items``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> q = jnp.zeros(4)
        >>> items, info = sample(jax.random.key(0), index, q, num_samples=16, variant="2ls")
        >>> log_w = log_importance_weights(index, q, items, info.log_q)
        >>> sorted({round(float(w), 4) for w in jnp.exp(log_w)})  # 1/q: 6 or 2 by cluster
        [2.0, 6.0]
    """
    batch, single, tau, _ = _common(index, queries, None, temperature, None)
    items = _check_items(index, items, batch, single)
    log_q = check_array("log_q", log_q, shape=items.shape[1:] if single else items.shape,
                        dtype=batch.dtype)
    tau = jnp.asarray(tau, batch.dtype)
    scores = jnp.einsum("bsd,bd->bs", index.embeddings[items], batch) / tau
    out = scores - (log_q[None, :] if single else log_q)
    return out[0] if single else out


def sampled_softmax_logits(target_logits, sampled_logits, sampled_log_q, targets, sampled):
    """Corrected logits for a sampled-softmax loss; the target comes first (label 0).

    With the target's logit ``s_y`` and S items ``j_k`` drawn from a proposal q (from
    :func:`sample`: ``info.log_q``; or uniform negatives, ``log q = -log N``):

        o_0 = s_y,    o_k = s_{j_k} - log(S q(j_k)),    o_k = -inf where j_k = y,

    (Bengio & Senecal 2008; Jean et al. 2015; Blanc & Rendle 2018; sampled copies of the target,
    "accidental hits", are removed as in TensorFlow's ``sampled_softmax_loss``). Then
    ``sum_{k >= 1} exp(o_k)`` is an unbiased estimate of ``Z - exp(s_y)``, so the cross-entropy
    ``-log softmax(o)_0`` tends to the full-softmax loss ``log Z - s_y``, and its gradient to the
    full gradient, as S grows; for a finite S its bias falls as the proposal approaches the
    softmax. ``sampled_log_q`` is treated as a constant (no gradient flows into it). The scores
    ``s`` come from the model being trained (they need not match the index's embeddings, which
    may be stale); ``q`` must be the law the items were drawn from.

    Args:
        target_logits: ``(B,)`` target scores ``s_y``.
        sampled_logits: ``(B, S)`` scores of the drawn items.
        sampled_log_q: ``(B, S)`` their proposal log-probabilities.
        targets: ``(B,)`` integer target ids.
        sampled: ``(B, S)`` integer drawn ids.

    Returns:
        ``(B, 1 + S)`` logits; ``optax.softmax_cross_entropy_with_integer_labels(logits, 0)`` is
        the loss.

    Example:
        >>> import jax.numpy as jnp
        >>> o = sampled_softmax_logits(jnp.array([1.0]), jnp.array([[0.0, 1.0]]),
        ...                            jnp.log(jnp.array([[0.5, 0.5]])), jnp.array([3]),
        ...                            jnp.array([[2, 3]]))
        >>> o.tolist()  # the second draw is the target itself: removed
        [[1.0, 0.0, -inf]]
    """
    sampled_logits = check_array("sampled_logits", sampled_logits, ndim=2)
    batch, num = sampled_logits.shape
    dtype = sampled_logits.dtype
    target_logits = check_array("target_logits", target_logits, shape=(batch,), dtype=dtype)
    sampled_log_q = check_array("sampled_log_q", sampled_log_q, shape=(batch, num), dtype=dtype)
    targets = check_array("targets", targets, shape=(batch,), kind="integer")
    sampled = check_array("sampled", sampled, shape=(batch, num), kind="integer")
    return kernel.sampled_softmax_logits(target_logits, sampled_logits, sampled_log_q, targets,
                                         sampled)
