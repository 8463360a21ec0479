"""Two-level softmax sampling over large item tables: 2LS, S-2LS and SD-2LS.

Sampling item ``i`` with probability ``p(i) = exp(s_i) / Z``, ``s_i = q·x_i / tau``, costs all N
logits per query. Two-level sampling clusters the items once (:func:`build_index`, chunked
k-means, or :func:`index_from_clusters` for a given partition), then per query draws a cluster by
a cheap cluster logit and an item from the exact softmax inside it (:func:`sample`). The cluster
logit rules (Size- and Dispersion-Corrected Two-Level Softmax Sampling, SPIGM @ ICML 2026)
approximate the exact cluster mass

    log Z_c = log n_c + q·mu_c / tau + log mean_{i in c} exp(s_i - q·mu_c / tau)

by ``q·mu_c / tau`` (``"2ls"``), ``+ log n_c`` (``"s"``) and ``+ q^T Sigma_c q / (2 tau^2)``
(``"sd"``, with the full within-cluster covariance by default: the paper's SD-2LS). The default,
``"sd_saturated"``, is SD-2LS with its dispersion term ``v / 2`` (``v`` the variance of the
cluster's scores) replaced past ``v = 2 log n_c`` by ``sqrt(2 v log n_c) - log n_c``, the
largest member's share: a finite cluster's log-mean-exp grows at most linearly in ``1 / tau``,
so the Gaussian term over-weights dispersed clusters on peaked logits
(:mod:`jaxsample.kernels.softmax`). Every draw
comes with its exact proposal log-probability ``log q(i)`` (``info.log_q``), so the bias that
remains is removed by the importance weights ``w(i) = exp(s_i - log q(i))``
(:meth:`SoftmaxIndex.log_importance_weights`); ``jaxsample.kernels.softmax.sampled_softmax_logits``
turns draws into the corrected logits of a sampled-softmax loss. ``exclude=`` removes given items
per query (a query's own item, the positives of sampled-softmax training) with ``log q``
renormalised.

A draw streams its cluster in blocks of ``block_size`` rows, so it costs ``O(n_c d)`` for its own
cluster's ``n_c`` members, however uneven the partition (a given partition is used as it is).

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
    check_progress,
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.kernels import kmeans as clustering
from jaxsample.kernels import softmax as kernel
from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.kmeans import INITS
from jaxsample.kernels.softmax import VARIANTS, ClusterStats
from jaxsample.kernels.solver import SolverStats

__all__ = [
    "INITS",
    "VARIANTS",
    "SoftmaxIndexInfo",
    "SoftmaxInfo",
    "SoftmaxIndex",
    "build_index",
    "index_from_clusters",
    "sample",
]

# Most rows a draw reads at a time by default (the block is also capped at the mean cluster
# size): smaller blocks pay the loop's per-step cost, larger ones the unused tail of the last
# block of each cluster.
DEFAULT_BLOCK_SIZE = 256


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
            infinite (also when ``exclude`` removed every item); the draws of that query are then
            meaningless.
    """

    log_q: jax.Array
    nonfinite: jax.Array


class SoftmaxIndex(NamedTuple):
    """A clustered item table (a pytree: pass it through ``jit``, shard its arrays).

    Built by :func:`build_index` (k-means) or :func:`index_from_clusters` (a given partition).
    Besides :func:`sample`, its methods score items under the proposal and the exact softmax:
    :meth:`log_prob`, :meth:`proposal_log_probs`, :meth:`exact_log_probs`, :meth:`log_partition`,
    :meth:`log_importance_weights`.

    Attributes:
        embeddings: ``(N, d)`` item table.
        cluster_ids: ``(N,)`` int32 cluster of each item.
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

    @property
    def rank(self) -> int:
        """r: rows of each cluster's covariance factor (``d`` or the cluster size: exact)."""
        return self.stats.dispersion_factors.shape[1]

    @property
    def block_size(self) -> int:
        """Rows a draw reads at a time."""
        return kernel.block_size(self.stats)

    @property
    def max_cluster_size(self) -> int:
        """The largest cluster (read on the host: call it outside ``jit``)."""
        return int(np.max(np.asarray(self.stats.sizes)))

    @staticmethod
    def recommended_sizes(num_items: int, *, num_samples: int = 1,
                          rank: int = 0) -> tuple[int, int]:
        """The default ``(num_clusters, max_cluster_size)`` of a k-means index.

        A call drawing S items per query costs ``a K (r + 1) d`` for the cluster logits (a matrix
        product shared by the batch of queries; r the covariance rank of ``"sd"``) plus
        ``b S m d`` for the ``m`` members each draw reads, with ``K ~ N / m``; the sum is smallest
        at ``m ~ sqrt((a / b) (r + 1) N / S)``. Member reads are the dearer operation (``b >> a``:
        each draw streams its own cluster, while the logits' matrix product streams the cluster
        statistics once per batch), so the rule is

        - ``num_clusters = round(sqrt(S N / (r + 1)))`` k-means clusters, and
        - ``max_cluster_size = ceil(sqrt((r + 1) N / S) / 2)``: :func:`build_index` cuts larger
          clusters into slabs along their principal axis, which also lowers the dispersion the
          cluster logits must approximate (smaller TV).

        Measured on a 2-core CPU at N = 10^5, d = 64, 64 draws per query, r = 0 (k-means
        K = 2530): caps of 16 / 32 / 64 / 128 took 0.45 / 1.25 / 1.66 / 1.88 ms per query (exact
        inverse CDF: 6.0) with SD-2LS (diagonal) TV 0.029 / 0.025 / 0.023 / 0.022. Both are
        clamped to ``[1, N]``.

        Args:
            num_items: N >= 1.
            num_samples: S >= 1, the draws per query the index is sized for.
            rank: r >= 0, the covariance rank of the dispersion term.

        Returns:
            ``(num_clusters, max_cluster_size)``.

        Example:
            >>> SoftmaxIndex.recommended_sizes(10**6), SoftmaxIndex.recommended_sizes(
            ...     10**6, num_samples=64)
            ((1000, 500), (8000, 63))
        """
        n = check_int("num_items", num_items, 1)
        s = check_int("num_samples", num_samples, 1)
        r = check_int("rank", rank, 0)
        clusters = min(n, max(1, round(math.sqrt(s * n / (r + 1)))))
        cap = min(n, max(1, math.ceil(math.sqrt((r + 1) * n / s) / 2)))
        return clusters, cap

    def log_prob(self, queries, items, *, variant: str = "sd_saturated", temperature=1.0,
                 exclude=None, chunk_size: int | None = None) -> jax.Array:
        """Exact proposal log-probabilities ``log q(i)`` of given items under a variant.

        ``log q(i) = log_softmax(l)_{c(i)} + s_i - log Z_{c(i)}``; equals the ``log_q`` that
        :func:`sample` returns with each draw (with the same ``exclude``; an excluded item gets
        ``-inf``). For a few items per query each item's cluster normaliser comes from one pass
        over its cluster (``O(n_c d)`` work), otherwise all K normalisers come from one pass over
        the N item logits and a segment log-sum-exp (``O(N d)`` work per query; see
        :func:`jaxsample.kernels.softmax.two_level_log_prob`); memory per query is
        ``O(K (r + 1) + N + S)`` beyond the embeddings.

        Args:
            queries: ``(d,)`` or ``(B, d)``.
            items: ``(S,)`` (one query) or ``(B, S)`` integer item ids in ``[0, N)``.
            variant: ``"sd_saturated"`` (default), ``"sd"``, ``"s"`` or ``"2ls"``.
            temperature: tau > 0.
            exclude: items removed from the support, as in :func:`sample`.
            chunk_size: queries per chunk; None for all at once.

        Returns:
            Log-probabilities with the shape of ``items``.

        Example:
            >>> import jax.numpy as jnp
            >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
            >>> lq = index.log_prob(jnp.zeros(4), jnp.arange(4), variant="2ls")
            >>> [round(float(v), 4) for v in jnp.exp(lq)]  # 2LS halves by cluster, not by size
            [0.1667, 0.1667, 0.1667, 0.5]
        """
        batch, single, tau, chunk_size = _common(self, queries, variant, temperature, chunk_size)
        items = _check_items(self, items, batch, single)
        excluded = _check_exclude(self, exclude, batch, single)
        out = _log_prob(self, batch, items, excluded, tau, variant, chunk_size,
                        _sequential(self))
        return out[0] if single else out

    def proposal_log_probs(self, queries, *, variant: str = "sd_saturated", temperature=1.0,
                           exclude=None, chunk_size: int | None = None) -> jax.Array:
        """The whole proposal ``log q(i)`` over all N items, in ``O(N d)`` per query.

        For diagnostics against :meth:`exact_log_probs` (TV, KL); the cluster masses
        ``log Z_c`` come from one segment log-sum-exp over all scores.

        Args:
            queries: ``(d,)`` or ``(B, d)``.
            variant: ``"sd_saturated"`` (default), ``"sd"``, ``"s"`` or ``"2ls"``.
            temperature: tau > 0.
            exclude: items removed from the support, as in :func:`sample` (``-inf`` there).
            chunk_size: queries per chunk; None for all at once.

        Returns:
            ``(B, N)`` log-probabilities, or ``(N,)`` for one query.

        Example:
            >>> import jax.numpy as jnp
            >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
            >>> lq = index.proposal_log_probs(jnp.zeros(4), variant="s")
            >>> [round(float(v), 4) for v in jnp.exp(lq)]  # S-2LS: exact for equal scores
            [0.25, 0.25, 0.25, 0.25]
        """
        batch, single, tau, chunk_size = _common(self, queries, variant, temperature, chunk_size)
        excluded = _check_exclude(self, exclude, batch, single)
        out = _proposal_log_probs(self, batch, excluded, tau, variant, chunk_size)
        return out[0] if single else out

    def exact_log_probs(self, queries, *, temperature=1.0,
                        chunk_size: int | None = None) -> jax.Array:
        """The exact softmax ``log p(i) = s_i - log Z`` over all N items (the reference).

        Args:
            queries: ``(d,)`` or ``(B, d)``.
            temperature: tau > 0.
            chunk_size: queries per chunk (bounds the work in flight); None for all at once.

        Returns:
            ``(B, N)`` log-probabilities, or ``(N,)`` for one query.

        Example:
            >>> import jax.numpy as jnp
            >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
            >>> [round(float(v), 4) for v in jnp.exp(index.exact_log_probs(jnp.ones(4)))]
            [0.25, 0.25, 0.25, 0.25]
        """
        batch, single, tau, chunk_size = _common(self, queries, None, temperature, chunk_size)
        out = kernel.exact_log_probs(self.embeddings, batch, tau, chunk_size=chunk_size)
        return out[0] if single else out

    def log_partition(self, queries, *, temperature=1.0,
                      chunk_size: int | None = None) -> jax.Array:
        """The exact ``log Z = logsumexp_i s_i`` per query.

        Args:
            queries: ``(d,)`` or ``(B, d)``.
            temperature: tau > 0.
            chunk_size: queries per chunk (at most ``chunk_size x N`` logits at once); None for
                all at once.

        Returns:
            ``(B,)``, or a scalar for one query.

        Example:
            >>> import jax.numpy as jnp
            >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
            >>> round(float(index.log_partition(jnp.zeros(4))), 4)  # log 4
            1.3863
        """
        batch, single, tau, chunk_size = _common(self, queries, None, temperature, chunk_size)
        out = kernel.exact_log_partition(self.embeddings, batch, tau, chunk_size=chunk_size)
        return out[0] if single else out

    def log_importance_weights(self, queries, items, log_q, *, temperature=1.0) -> jax.Array:
        """Unnormalised log importance weights ``log w(i) = s_i - log q(i)`` of drawn items.

        ``w(i) = exp(s_i) / q(i) = Z p(i) / q(i)``, so ``E_q[w] = Z`` (the mean of the weights
        is an unbiased estimate of the partition function) and ``softmax(log w)`` over a query's
        draws gives self-normalised estimates ``sum_j softmax(log w)_j f(i_j) -> E_p[f]``.
        Differentiable in ``queries`` and the embeddings. (With ``exclude``, the weights target
        the softmax restricted to the remaining items.)

        Args:
            queries: ``(d,)`` or ``(B, d)``.
            items: ``(S,)`` or ``(B, S)`` drawn item ids; ``log_q``: their proposal
                log-probabilities.
            temperature: tau > 0 (the one used to draw).

        Returns:
            Log-weights with the shape of ``items``.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
            >>> q = jnp.zeros(4)
            >>> items, info = sample(jax.random.key(0), index, q, num_samples=16, variant="2ls")
            >>> log_w = index.log_importance_weights(q, items, info.log_q)
            >>> sorted({round(float(w), 4) for w in jnp.exp(log_w)})  # 1/q: 6 or 2 by cluster
            [2.0, 6.0]
        """
        batch, single, tau, _ = _common(self, queries, None, temperature, None)
        items = _check_items(self, items, batch, single)
        log_q = check_array("log_q", log_q, shape=items.shape[1:] if single else items.shape,
                            dtype=batch.dtype)
        tau = jnp.asarray(tau, batch.dtype)
        scores = jnp.einsum("bsd,bd->bs", self.embeddings[items], batch) / tau
        out = scores - (log_q[None, :] if single else log_q)
        return out[0] if single else out


def build_index(
    key: jax.Array,
    embeddings,
    *,
    num_clusters: int | None = None,
    num_samples: int = 1,
    max_cluster_size: int | None = None,
    rank: int | None = None,
    block_size: int | None = None,
    max_iterations: int = 50,
    tolerance: float = 1e-3,
    init: str = "kmeans++",
    batch_size: int | None = None,
    chunk_size: int | None = 256,
    static_shapes: bool = False,
    progress=None,
) -> tuple[SoftmaxIndex, SoftmaxIndexInfo]:
    """Clusters an item table by k-means and precomputes the statistics of every cluster logit rule.

    The items are clustered by :func:`jaxsample.kernels.kmeans.kmeans`
    (k-means++ or random seeding; Lloyd or mini-batch steps; one matrix product per chunk of
    ``chunk_size`` items); clusters k-means leaves empty are dropped. Then every cluster above
    ``max_cluster_size`` is cut into balanced slabs along its principal axis
    (:func:`jaxsample.kernels.softmax.split_clusters`): sampling stays exact in law (the proposal
    is reported exactly) and the dispersion the cluster logits approximate shrinks. Runs eagerly
    (cluster sizes set array shapes).

    ``rank`` sets the covariance behind the dispersion term of ``"sd"``,
    ``q^T Sigma_c q / (2 tau^2)``:

    - ``None`` (default): the full covariance, the paper's SD-2LS, exact second cumulant of the
      within-cluster scores. Stored as a factor of ``r = min(d, largest cluster)`` rows (a
      cluster of ``n_c`` members has rank ``< n_c``): ``K r d`` memory, ``O(K r d)`` per query,
      ``O(N d^2 + K d^3)`` to build. Worth it when clusters are much larger than d (the cost of
      the cluster logits, ``K r d``, stays well below the exact ``N d``).
    - ``0 < r < d``: the top-r principal directions plus an isotropic residual (``O(K r d)``).
    - ``0``: the diagonal only (``O(K d)``): it drops the off-diagonal covariance, so it is not
      the variance of the scores; at N = 10^6, d = 100, K = 1024, tau = 0.1 it had 4-8x the KL of
      the full covariance.

    Args:
        key: PRNG key of k-means' seeding (and mini-batches).
        embeddings: ``(N, d)`` float32/float64 item table, finite.
        num_clusters: the k-means K, default from :meth:`SoftmaxIndex.recommended_sizes` (for
            ``rank=0``; pass its ``rank=`` sizes for the cost optimum of a given rank).
        num_samples: draws per query the index is sized for (sets the defaults of
            ``num_clusters`` and ``max_cluster_size``).
        max_cluster_size: cap m on cluster sizes (larger clusters are split). Default: the cap
            of :meth:`SoftmaxIndex.recommended_sizes`. Pass N to keep k-means clusters whole (a
            draw costs its own cluster's size either way).
        rank: covariance kept for ``"sd"`` (above); None for the full covariance.
        block_size: rows a draw reads at a time (default: the mean cluster size, at least 8,
            at most 256 and the largest cluster); a draw from a cluster of ``n_c`` members reads
            ``ceil(n_c / b) b`` rows.
        max_iterations: k-means iteration cap (Lloyd iterations or mini-batch steps).
        tolerance: k-means stopping tolerance (relative objective decrease; mini-batch: mean
            squared centre shift relative to the data's spread). The defaults (50, 1e-3)
            converged in 13-19 Lloyd iterations on synthetic clustered tables (N = 10^4-10^5,
            d = 16-64, K = sqrt(N)); 1e-4 took 24-36, past the former cap of 20. An index is
            exact in law whatever the partition: k-means only sets how close the proposal is.
            ``info.solver`` is ``successful`` only when the tolerance was met; an eager call
            that ran out of iterations warns once (the index is still valid).
        init: k-means seeding, ``"kmeans++"`` or ``"random"``.
        batch_size: points per mini-batch k-means step; None for full-batch Lloyd.
        chunk_size: items per chunk: k-means assigns this many items per matrix product, and
            ``rank > 0`` covariances accumulate about this many rows per step; None for all at
            once.
        static_shapes: pad the index to ``num_clusters + ceil(N / max_cluster_size)`` clusters
            (the most a split can produce; the extra clusters are empty and never drawn), with the
            block size and the covariance rank fixed by the settings, so that every index built
            with the same settings has the same shapes and shares every compilation (a training
            loop that rebuilds its index every few epochs compiles its sampler once).
        progress: a progress meter (e.g. :class:`jaxsample.TextProgress`) reporting k-means'
            iterations, or None.

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
    index, info = _build(key, embeddings, None, num_clusters=num_clusters,
                         num_samples=num_samples, max_cluster_size=max_cluster_size, rank=rank,
                         block_size=block_size, max_iterations=max_iterations,
                         tolerance=tolerance, init=init, batch_size=batch_size,
                         chunk_size=chunk_size, static_shapes=static_shapes, progress=progress)
    warn_if_unsuccessful(info.solver, "build_index's k-means")
    return index, info


def index_from_clusters(
    embeddings,
    cluster_ids,
    *,
    num_clusters: int | None = None,
    num_samples: int = 1,
    max_cluster_size: int | None = None,
    rank: int | None = None,
    block_size: int | None = None,
    chunk_size: int | None = 256,
    static_shapes: bool = False,
) -> tuple[SoftmaxIndex, SoftmaxIndexInfo]:
    """:func:`build_index` for a given partition of the items (deterministic: no k-means).

    The partition is kept as it is by default, however uneven: a draw streams its own cluster in
    blocks (``O(n_c d)``), so large clusters cost only the draws that land in them.

    Args:
        embeddings: ``(N, d)`` float32/float64 item table, finite.
        cluster_ids: ``(N,)`` integer cluster of each item in ``[0, num_clusters)``; every
            cluster must have at least one item.
        num_clusters: K, default ``max(cluster_ids) + 1``.
        max_cluster_size: cap m on cluster sizes (larger clusters are split; this changes the
            cluster logits, so the proposal is no longer the one of the given partition);
            default N (the partition is kept whole).
        num_samples, rank, block_size, chunk_size, static_shapes: as in :func:`build_index`.

    Returns:
        ``(SoftmaxIndex, SoftmaxIndexInfo)`` (0 k-means iterations, ``successful``).

    Raises:
        TypeError, ValueError: naming the argument, on bad shapes, dtypes, non-finite embeddings,
            ids out of range or empty clusters.

    Example:
        >>> import jax.numpy as jnp
        >>> index, _ = index_from_clusters(jnp.eye(4), jnp.array([0, 0, 0, 1]))
        >>> index.num_clusters, index.max_cluster_size, index.rank
        (2, 3, 3)
    """
    if cluster_ids is None:
        raise TypeError("cluster_ids must be an (N,) integer array (build_index clusters the "
                        "items by k-means)")
    return _build(None, embeddings, cluster_ids, num_clusters=num_clusters,
                  num_samples=num_samples, max_cluster_size=max_cluster_size, rank=rank,
                  block_size=block_size, max_iterations=1, tolerance=0.0, init="kmeans++",
                  batch_size=None, chunk_size=chunk_size, static_shapes=static_shapes,
                  progress=None)


def _build(key, embeddings, cluster_ids, *, num_clusters, num_samples, max_cluster_size, rank,
           block_size, max_iterations, tolerance, init, batch_size, chunk_size, static_shapes,
           progress):
    if not is_concrete((embeddings, cluster_ids)):
        raise TypeError("build_index runs eagerly (cluster sizes set array shapes); call it "
                        "outside jit/vmap and pass the returned index into transformed code")
    embeddings = check_array("embeddings", embeddings, ndim=2, finite=True, min_rows=1)
    n, d = embeddings.shape
    if d < 1:
        raise ValueError(f"embeddings must have shape (N, d) with d >= 1, got {embeddings.shape}")
    rank = check_int("rank", rank, 0, d, allow_none=True)
    block_size = check_int("block_size", block_size, 1, allow_none=True)
    num_samples = check_int("num_samples", num_samples, 1)
    chunk_size = check_chunk_size(chunk_size)
    progress = check_progress(progress)
    # sized as for the diagonal whatever the rank: larger clusters would make the full
    # covariance's logits cheaper but every rule's cluster masses coarser (higher TV)
    default_k, default_cap = SoftmaxIndex.recommended_sizes(n, num_samples=num_samples)
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
                                   batch_size=batch_size, chunk_size=chunk_size,
                                   progress=progress)
        solver = result.solver
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
    if block_size is None:  # about the mean cluster: a draw reads < n_c + mean rows
        block_size = min(DEFAULT_BLOCK_SIZE, largest, max(8, -(-n // num_clusters)))
    block = block_size
    rank = min(d, largest) if rank is None else rank
    stats, objective, nonfinite = _statistics(embeddings, ids, num_clusters, block, rank,
                                              chunk_size)
    return SoftmaxIndex(embeddings, ids, stats), SoftmaxIndexInfo(solver, objective, nonfinite)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _statistics(embeddings, ids, num_clusters, block, rank, chunk_size):
    stats = kernel.cluster_stats(embeddings, ids, num_clusters, block, rank=rank,
                                 chunk_size=chunk_size)
    objective = jnp.sum((embeddings - stats.mean[ids]) ** 2)
    nonfinite = ~(jnp.all(jnp.isfinite(stats.mean)) & jnp.all(jnp.isfinite(stats.dispersion_diag))
                  & jnp.all(jnp.isfinite(stats.dispersion_factors)))
    return stats, objective, nonfinite


def _check_index(index):
    if not isinstance(index, SoftmaxIndex):
        raise TypeError(f"index must be a SoftmaxIndex from build_index, got "
                        f"{type(index).__name__}")


def _check_queries(index, queries, *, add_axis: bool = True):
    """Returns ``(queries, was_single)``, queries as ``(B, d)`` (or as given when ``add_axis`` is
    False: the caller's compiled function adds the axis). Finiteness is reported, not refused."""
    queries = check_array("queries", queries, dtype=index.embeddings.dtype)
    if queries.ndim not in (1, 2) or queries.shape[-1] != index.dim:
        raise ValueError(f"queries must have shape (d,) or (B, d) with d = {index.dim} (the "
                         f"embedding dimension), got {queries.shape}")
    single = queries.ndim == 1
    return (queries[None, :] if single and add_axis else queries), single


def _check_items(index, items, queries, single, name="items", low_bound=0):
    """Returns ``items`` as ``(B, S)``."""
    items = check_array(name, items, kind="integer")
    expected = "(S,) for a single query" if single else f"(B, S) with B = {queries.shape[0]}"
    if name == "exclude":
        expected = expected.replace("S", "E")
    if items.ndim != (1 if single else 2) or (not single and items.shape[0] != queries.shape[0]):
        raise ValueError(f"{name} must have shape {expected}, got {items.shape}")
    if is_concrete(items) and items.size:
        low, high = int(jnp.min(items)), int(jnp.max(items))
        if low < low_bound or high >= index.num_items:
            raise ValueError(f"{name} must lie in [{low_bound}, N) = [{low_bound}, "
                             f"{index.num_items}), got values in [{low}, {high}]")
    return items[None, :] if single else items


def _check_exclude(index, exclude, queries, single):
    """``None`` or ``(B, E)`` int32 item ids sorted ascending per query (``-1``: padding)."""
    if exclude is None:
        return None
    exclude = _check_items(index, exclude, queries, single, "exclude", low_bound=-1)
    return jnp.sort(exclude.astype(jnp.int32), axis=1)


def _common(index, queries, variant, temperature, chunk_size, *, add_axis=True):
    _check_index(index)
    batch, single = _check_queries(index, queries, add_axis=add_axis)
    if variant is not None:
        check_choice("variant", variant, VARIANTS)
    tau = check_hyperparameter("temperature", temperature)
    return batch, single, tau, check_chunk_size(chunk_size)


def sample(key, index: SoftmaxIndex, queries, *, num_samples: int, variant: str = "sd_saturated",
           temperature=1.0, exclude=None,
           chunk_size: int | None = None) -> tuple[jax.Array, SoftmaxInfo]:
    """Draws items from the two-level proposal of each query, with their log-probabilities.

    Per query: ``c ~ softmax(l)`` with the cluster logits ``l`` of ``variant`` (inverse CDF, one
    uniform per draw), then ``i`` from the exact softmax over the members of ``c``, in one pass
    over the cluster's blocks of ``index.block_size`` rows (a one-uniform-per-block weighted
    reservoir, :mod:`jaxsample.kernels.softmax`); ``log q(i) = log_softmax(l)_c + s_i - log Z_c``.
    Cost per query ``O(K (r + 1) d)`` for the cluster logits plus ``O(n_c d)`` per draw from a
    cluster of ``n_c`` members, instead of ``O(N d)``. Draws are independent (with
    replacement). Compiled once per shape, ``num_samples``, ``variant`` and ``chunk_size``;
    ``temperature`` is traced (sweeping or ``vmap``-ing it does not recompile); works under
    ``vmap`` and with a sharded item table.

    ``exclude`` removes items from each query's support: inside a cluster the excluded members
    get no mass, a cluster whose members are all excluded gets logit ``-inf``, the other cluster
    logits are unchanged, and ``log q`` is the exact, normalised law over the remaining items,

        log q_E(i) = log_softmax(l_E)_{c(i)} + s_i - log sum_{j in c(i), j not in E} e^{s_j}.

    It costs a binary search per block row and ``O(E)`` per query; with singleton clusters (or
    exact cluster logits) it is the softmax restricted to the remaining items.

    Args:
        key: a PRNG key (split across queries).
        index: a :class:`SoftmaxIndex`.
        queries: ``(d,)`` or ``(B, d)`` in the embeddings' dtype. A non-finite query is not
            refused: it is flagged in ``info.nonfinite``.
        num_samples: S, draws per query (Python int >= 1).
        variant: ``"sd_saturated"`` (default: size + dispersion, the dispersion term
            saturated past ``v = 2 log n_c``), ``"sd"`` (size + the paper's Gaussian
            dispersion term ``v / 2``), ``"s"`` (size) or ``"2ls"`` (centroid only). Measured
            (bench/results_softmax_peaked.md): ``"sd_saturated"`` equals ``"sd"`` on flat
            logits and has the lowest TV or within 0.001 of it at every temperature; ``"sd"``
            is the worst rule on peaked logits (MovieLens, entropy 0.6 nats: TV 0.73 against
            0.40-0.41).
        temperature: tau > 0.
        exclude: ``(E,)`` (one query) or ``(B, E)`` integer item ids to leave out, ``-1`` for
            padding (ragged lists), repeats allowed; None for none. A query with every item
            excluded is flagged in ``info.nonfinite``.
        chunk_size: queries per chunk: bounds the cluster logits to ``chunk_size * K`` (and,
            where all draws run at once, their blocks); None for all at once. The draws do not
            depend on it.

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
        >>> items, info = sample(jax.random.key(0), index, jnp.zeros(4), num_samples=16,
        ...                      variant="2ls", exclude=jnp.array([3, 0]))
        >>> sorted(set(items.tolist())), sorted({round(float(v), 4) for v in jnp.exp(info.log_q)})
        ([1, 2], [0.5])
    """
    key = check_key("key", key)
    # one dispatch per call: a single query gets its batch axis inside the compiled function
    # (three eager slices cost more than the draw itself at small N)
    queries, single, tau, chunk_size = _common(index, queries, variant, temperature, chunk_size,
                                               add_axis=False)
    num_samples = check_int("num_samples", num_samples, 1)
    excluded = _check_exclude(index, exclude, queries, single)
    return _sample(key, index, queries, excluded, tau, num_samples, variant, chunk_size,
                   _sequential(index), single)


def _nonfinite(queries, values):
    return ~(jnp.all(jnp.isfinite(queries), axis=-1) & jnp.all(jnp.isfinite(values), axis=-1))


# Below this many floats per block, running every draw at once beat the per-draw loop on CPU
# (640 floats: 5.3 vs 19.8 us per draw); above it the loop won (12 800 floats: 8x).
_SLAB_LOOP_MIN = 1024


def _sequential(index) -> bool:
    """Loop over draws (each streams its own cluster) on CPU for large blocks; run all draws at
    once on accelerators and for small blocks (where the loop's per-step overhead dominates)."""
    return jax.default_backend() == "cpu" and index.block_size * index.dim >= _SLAB_LOOP_MIN


def _logits(index, queries, excluded, variant, tau):
    """``(B, K)`` cluster logits, exhausted clusters at ``-inf`` when items are excluded."""
    logits = jax.vmap(lambda q: kernel.cluster_logits(index.stats, q, variant, tau))(queries)
    if excluded is None:
        return logits
    exhausted = kernel.exhausted_clusters(index.stats, index.cluster_ids, excluded)
    return jnp.where(exhausted, -jnp.inf, logits)


@functools.partial(jax.jit, static_argnames=("num_samples", "variant", "chunk_size",
                                             "sequential", "single"))
def _sample(key, index, queries, excluded, temperature, num_samples, variant, chunk_size,
            sequential=False, single=False):
    if single:
        items, info = _sample(key, index, queries[None, :], excluded, temperature, num_samples,
                              variant, chunk_size, sequential)
        return items[0], SoftmaxInfo(info.log_q[0], info.nonfinite[0])
    tau = jnp.asarray(temperature, queries.dtype)
    cluster_keys, item_keys = kernel.split_keys(key, queries.shape[0], num_samples)

    def clusters_of(keys, block, rows):
        logits = _logits(index, block, rows, variant, tau)
        return kernel.draw_clusters(keys, logits, num_samples)

    def members_of(keys, clusters, block, rows):
        return kernel.draw_members(keys, index.stats, clusters, block, tau, rows, sequential)

    clusters, log_cluster = map_rows(clusters_of, cluster_keys, queries, excluded,
                                     chunk_size=chunk_size)
    if sequential:  # one block in flight at a time: nothing to chunk
        items, log_item = members_of(item_keys, clusters, queries, excluded)
    else:
        items, log_item = map_rows(members_of, item_keys, clusters, queries, excluded,
                                   chunk_size=chunk_size)
    log_q = log_cluster + log_item
    return items, SoftmaxInfo(log_q, _nonfinite(queries, log_q))


@functools.partial(jax.jit, static_argnames=("variant", "chunk_size", "sequential"))
def _log_prob(index, queries, items, excluded, temperature, variant, chunk_size,
              sequential=False):
    tau = jnp.asarray(temperature, queries.dtype)

    def block(block_queries, block_items, rows):
        logits = _logits(index, block_queries, rows, variant, tau)
        return kernel.two_level_log_prob(index.stats, logits, index.cluster_ids, index.embeddings,
                                         block_queries, block_items, tau, rows, sequential)

    return map_rows(block, queries, items, excluded, chunk_size=chunk_size)


@functools.partial(jax.jit, static_argnames=("variant", "chunk_size"))
def _proposal_log_probs(index, queries, excluded, temperature, variant, chunk_size):
    tau = jnp.asarray(temperature, queries.dtype)

    def block(rows_queries, rows):
        logits = _logits(index, rows_queries, rows, variant, tau)
        one = lambda logit, q, row: kernel.two_level_log_probs_all(  # noqa: E731
            logit, index.cluster_ids, index.embeddings, q, tau, row)
        if rows is None:
            return jax.vmap(lambda logit, q: one(logit, q, None))(logits, rows_queries)
        return jax.vmap(one)(logits, rows_queries, rows)

    return map_rows(block, queries, excluded, chunk_size=chunk_size)
