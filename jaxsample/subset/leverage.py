"""Lev: diverse subsets by greedy ridge-leverage (determinantal-volume) selection; Vendi.

Given embeddings ``X`` (``n`` rows of dimension ``d``), a budget ``k`` and a ridge ``λ > 0``, Lev
(Leverage Score Sampling for pretraining-data selection, NeurIPS 2026) picks rows that maximally
expand the determinantal volume

.. math::
    f(S) = \\log\\det(λ I_d + X_S^T X_S) = d \\log λ + \\log\\det(I_k + X_S X_S^T / λ).

Adding row ``i`` gains ``log(1 + s_i)`` with ``s_i = x_i^T (λI + X_S^T X_S)^{-1} x_i`` its ridge
leverage score against the current selection, so greedy picks ``argmax s_i``; after each pick all
``n`` scores are updated by one Sherman–Morrison step (one pass over ``X``, ``O(nd + d²)``, no
recomputation: :mod:`jaxsample.kernels.leverage`), and ``f`` telescopes into the per-pick gains.
``g(S) = f(S) − d log λ`` is monotone submodular (it is ``log det`` of the principal submatrix
``L_S`` of ``L = I_n + XXᵀ/λ``), so greedy is within ``1 − 1/e`` of the best ``k``-subset
(Nemhauser, Wolsey & Fisher 1978). As ``λ → 0`` (``k <= rank X``) greedy becomes greedy volume
maximisation, i.e. the pivot order of column-pivoted QR of ``Xᵀ`` (the greedy DPP-MAP of Chen,
Zhang & Zhou 2018, https://arxiv.org/abs/1709.05135).

* :func:`leverage_select` — greedy (or adaptive leverage sampling) on one device;
* :func:`leverage_select_sharded` — per-shard greedy under ``shard_map``, then greedy over the
  union of the shards' picks (the GreeDi scheme), for data that does not fit one device;
* :func:`vendi_score` — the Vendi diversity of a set (Friedman & Dieng 2023,
  https://arxiv.org/abs/2210.02410).

Each function's docstring has a short example; ``examples/lev_selection.py`` compares Lev with
random and k-center selection.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

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
from jaxsample.kernels import leverage as kernel
from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.pairwise import sq_norms

__all__ = [
    "LeverageInfo",
    "ShardedLeverageInfo",
    "leverage_sample",
    "leverage_select",
    "leverage_select_sharded",
    "VendiInfo",
    "vendi_score",
]

_HIGHEST = jax.lax.Precision.HIGHEST


class LeverageInfo(NamedTuple):
    """What :func:`leverage_select` reports besides the indices.

    Attributes:
        log_det: scalar, the telescoped ``f(S) = d log λ + Σ_t gains_t = log det(λI + X_SᵀX_S)``
            of the selected rows (as used: normalised when ``normalize=True``).
        gains: ``(k,)`` per-pick gains ``log(1 + s_{j_t})`` in pick order (non-increasing for
            greedy without ``quality``: submodularity).
        nonfinite: bool scalar, True if a score, gain or the log-det is NaN/inf (only possible
            for non-finite embeddings passed under ``jit``, where they cannot be checked): the
            selection is then not trustworthy.
    """

    log_det: jax.Array
    gains: jax.Array
    nonfinite: jax.Array


class ShardedLeverageInfo(NamedTuple):
    """What :func:`leverage_select_sharded` reports besides the indices.

    Attributes:
        log_det: scalar ``f`` of the returned selection.
        gains: ``(k,)`` its per-pick gains.
        nonfinite: bool scalar, as in :class:`LeverageInfo` (any shard or the final round).
        shard_log_det: ``(P,)`` ``f`` of each shard's first ``min(k, per_shard_k)`` greedy picks.
        from_union: bool scalar, True when the returned selection is the final greedy over the
            union (False: a shard's own selection scored higher and is returned).
    """

    log_det: jax.Array
    gains: jax.Array
    nonfinite: jax.Array
    shard_log_det: jax.Array
    from_union: jax.Array


class VendiInfo(NamedTuple):
    """What :func:`vendi_score` reports besides the score.

    Attributes:
        nonfinite: bool scalar, the score is NaN/inf (a non-finite kernel value from a callable
            ``kernel``, or embeddings that could not be checked under ``jit``).
    """

    nonfinite: jax.Array


def _row_scale(x, normalize, chunk_size):
    if not normalize:
        return None
    norms = map_rows(sq_norms, x, chunk_size=chunk_size)
    # zero rows stay zero (score 0: picked only once every other row is spanned)
    return jnp.where(norms > 0, jax.lax.rsqrt(jnp.where(norms > 0, norms, 1)), 0)


def _select(x, ridge, key, quality, *, k, mode, normalize, tie_rtol, chunk_size, progress=None):
    """The selection loop: ``k`` picks, each one pass over ``x`` (unchecked inputs)."""
    dtype = x.dtype
    ridge = jnp.asarray(ridge, dtype)
    row_scale = _row_scale(x, normalize, chunk_size)
    state = kernel.init_state(x, ridge, row_scale=row_scale, chunk_size=chunk_size)

    def body(t, carry):
        state, order, gains = carry
        if mode == "greedy":
            j = kernel.greedy_pick(state, quality=quality, tie_rtol=tie_rtol)
        else:
            j = kernel.sampled_pick(jax.random.fold_in(key, t), state, quality=quality)
        state, gain = kernel.rank_one_update(state, x, j, row_scale=row_scale,
                                             chunk_size=chunk_size)
        if progress is not None:
            progress.report(t + 1, k)
        return state, order.at[t].set(j), gains.at[t].set(gain)

    carry = (state, jnp.zeros((k,), jnp.int32), jnp.zeros((k,), dtype))
    state, order, gains = jax.lax.fori_loop(0, k, body, carry)
    log_det = kernel.telescoped_log_det(gains, ridge, x.shape[1])
    nonfinite = (~jnp.isfinite(log_det) | jnp.any(~jnp.isfinite(gains))
                 | jnp.any(jnp.isnan(state.scores)))
    return order, LeverageInfo(log_det, gains, nonfinite)


_select_jit = jax.jit(_select, static_argnames=("k", "mode", "normalize", "tie_rtol",
                                                "chunk_size", "progress"))


def _check_common(embeddings, ridge, quality, normalize, tie_rtol, chunk_size):
    x = check_array("embeddings", embeddings, ndim=2, finite=True, min_rows=1)
    if x.shape[1] < 1:
        raise ValueError(f"embeddings must have at least one column, got shape {x.shape}")
    ridge = check_hyperparameter("ridge", ridge)
    if quality is not None:
        quality = check_array("quality", quality, shape=(x.shape[0],), kind="numeric",
                              finite=True, lower=0)
        quality = quality.astype(x.dtype)
    if not isinstance(normalize, bool):
        raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
    if tie_rtol is None:
        tie_rtol = 16 * float(jnp.finfo(x.dtype).eps)
    tie_rtol = check_number("tie_rtol", tie_rtol, positive=False, maximum=1.0)
    return x, ridge, quality, tie_rtol, check_chunk_size(chunk_size)


def leverage_select(
    embeddings,
    k: int,
    *,
    ridge=1e-3,
    quality=None,
    chunk_size: int | None = None,
    normalize: bool = False,
    tie_rtol: float | None = None,
    progress=None,
) -> tuple[jax.Array, LeverageInfo]:
    """Selects ``k`` diverse rows by ridge leverage: greedy volume maximisation.

    Picks ``j_t = argmax_{i∉S} s_i`` at every step, the greedy maximiser of
    ``f(S) = log det(λI + X_SᵀX_S)`` (within ``1 − 1/e`` of the best ``k``-subset of
    ``f − d log λ``). :func:`leverage_sample` (adaptive leverage sampling) draws each pick with
    probability ``∝ s_i`` over the unselected rows instead; it is not an exact DPP sampler.
    Either way the ``n`` scores are updated by one rank-one step per pick, one pass
    over ``embeddings`` (:mod:`jaxsample.kernels.leverage`), and ``info.log_det`` is the
    telescoped ``f(S)``.

    **Ties** (exact for duplicate rows, and at the first pick for unit rows, where every
    ``s_i = 1/λ``): rows within ``tie_rtol`` (relative) of the largest value tie and the lowest
    index wins, so picks do not depend on round-off. Permutation equivariance therefore holds
    only for tie-free data.

    **Quality** ``q ≥ 0`` multiplies each pick's determinant gain: greedy picks
    ``argmax q_i (1 + s_i)``, i.e. maximises ``Σ_{j∈S} log q_j + f(S)``, the greedy MAP of the
    DPP with kernel ``diag(√q)(I + XXᵀ/λ)diag(√q)`` (Kulesza & Taskar's quality–diversity
    decomposition, https://arxiv.org/abs/1207.6083); raise ``q`` to a power to weigh quality
    more. Sampling draws ``∝ q_i s_i``. ``info.log_det`` and ``info.gains`` stay those of ``f``
    (the unweighted volume). Rows with ``q_i = 0`` are picked only once no other row is left.

    **Rows are used as given**: a row's norm is part of its score (``s_i = ‖x_i‖²/λ`` before the
    first pick), so long rows are favoured. For embeddings compared by cosine similarity (most
    text and image encoders) pass ``normalize=True``: rows are scaled to unit length (without
    copying ``embeddings``; zero rows stay zero).

    Float32 accuracy: the running scores start at ``‖x_i‖²/λ`` and keep an absolute error of a
    few ``u/λ`` (``u`` the unit round-off; measured ``4.5e-4`` at ``λ = 1e-3`` on unit rows,
    not growing with ``k`` up to 2 048 picks), so picks whose gains differ by less than that may
    come in another order than in float64; ``info.log_det`` matched ``slogdet`` of the picks to
    ``3e-4``. Use a larger ``λ`` or float64 where that matters.

    Args:
        embeddings: ``(n, d)`` float32/float64, finite.
        k: number of rows to select, ``1 <= k <= n`` (static).
        ridge: ``λ > 0``, a traced hyper-parameter (``vmap`` over it, or change it, without
            recompiling).
        quality: optional ``(n,)`` non-negative weights (see above).
        chunk_size: rows of ``embeddings`` per block of each pass over them (the per-pick
            matrix–vector product and the norms); ``None`` makes one pass over all rows. The
            dense path forms no ``(n, d)`` intermediate either (working memory ``O(n + d²)``
            besides ``embeddings``), so this only bounds the block a backend works on at once.
        normalize: select among the unit-normalised rows.
        tie_rtol: relative tie tolerance of greedy; default ``16·eps`` of the dtype.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the picks
            from inside the compiled loop (2 048 picks at n = 200 000 take about 20 s on 2 CPU
            cores; a new meter object compiles the loop anew).

    Returns:
        ``(indices, info)``: ``(k,)`` int32 distinct row indices in pick order, and a
        :class:`LeverageInfo`.

    Raises:
        TypeError, ValueError: naming the argument: ``k`` outside ``[1, n]``, non-finite
            ``embeddings``, ``ridge <= 0``, negative ``quality``.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
        >>> indices, info = leverage_select(x, 2)
        >>> indices.tolist()           # the duplicate of row 0 is never worth picking
        [0, 2]
        >>> round(float(info.log_det), 3) == round(2 * float(jnp.log(1.001)), 3)
        True
    """
    x, ridge, quality, tie_rtol, chunk_size = _check_common(embeddings, ridge, quality,
                                                            normalize, tie_rtol, chunk_size)
    k = check_int("k", k, 1, x.shape[0])
    return _select_jit(x, ridge, None, quality, k=k, mode="greedy", normalize=normalize,
                       tie_rtol=tie_rtol, chunk_size=chunk_size,
                       progress=check_progress(progress))


def leverage_sample(
    key: jax.Array,
    embeddings,
    k: int,
    *,
    ridge=1e-3,
    quality=None,
    chunk_size: int | None = None,
    normalize: bool = False,
    progress=None,
) -> tuple[jax.Array, LeverageInfo]:
    """Draws ``k`` diverse rows by adaptive ridge-leverage sampling.

    Each pick is drawn with probability ``∝ q_i s_i`` over the unselected rows (``s_i`` the ridge
    leverage score given the picks so far, ``q`` the optional quality), then the scores take one
    rank-one update, as in :func:`leverage_select` (which takes the arg max instead). It is not
    an exact DPP sampler. ``info.log_det`` and ``info.gains`` are those of the drawn subset.

    Args:
        key: PRNG key.
        embeddings, k, ridge, quality, chunk_size, normalize, progress: as in
            :func:`leverage_select`.

    Returns:
        ``(indices, info)``: ``(k,)`` int32 distinct row indices in draw order, and a
        :class:`LeverageInfo`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
        >>> indices, info = leverage_sample(jax.random.key(0), x, 2)
        >>> indices.shape, len(set(indices.tolist()))
        ((2,), 2)
    """
    key = check_key("key", key)
    x, ridge, quality, _, chunk_size = _check_common(embeddings, ridge, quality, normalize, None,
                                                     chunk_size)
    k = check_int("k", k, 1, x.shape[0])
    return _select_jit(x, ridge, key, quality, k=k, mode="sample", normalize=normalize,
                       tie_rtol=None, chunk_size=chunk_size, progress=check_progress(progress))


def _objective(log_det, quality, picks):
    return log_det if quality is None else log_det + jnp.sum(jnp.log(quality[picks]))


@functools.partial(jax.jit, static_argnames=("k", "per_shard_k", "mesh", "normalize",
                                             "tie_rtol", "chunk_size"))
def _select_sharded(x, ridge, quality, *, k, per_shard_k, mesh, normalize, tie_rtol,
                    chunk_size):
    axis = mesh.axis_names[0]
    n_local, d = x.shape[0] // mesh.size, x.shape[1]
    first = min(k, per_shard_k)
    options = dict(mode="greedy", normalize=normalize, tie_rtol=tie_rtol, chunk_size=chunk_size)

    def per_shard(x_local, ridge, *maybe_quality):
        q_local = maybe_quality[0] if maybe_quality else None
        picks, info = _select(x_local, ridge, None, q_local, k=per_shard_k, **options)
        offset = jax.lax.axis_index(axis).astype(jnp.int32) * n_local
        local_log_det = kernel.telescoped_log_det(info.gains[:first], ridge, d)
        local_objective = _objective(local_log_det, q_local, picks[:first])

        def gather(value):
            return jax.lax.all_gather(value, axis, tiled=True)

        union_rows = gather(x_local[picks])
        union_index = gather(picks + offset)
        union_quality = None if q_local is None else gather(q_local[picks])
        shard_log_det = gather(local_log_det[None])
        shard_objective = gather(local_objective[None])
        shard_gains = gather(info.gains[None, :first])
        shard_nonfinite = jnp.any(gather(info.nonfinite[None]))

        # the final round runs replicated on every device over the (P * per_shard_k, d) union
        final, final_info = _select(union_rows, ridge, None, union_quality, k=k, **options)
        indices, gains, log_det = union_index[final], final_info.gains, final_info.log_det
        from_union = jnp.array(True)
        if per_shard_k >= k:  # a shard's own k picks are a candidate answer too (GreeDi)
            best = jnp.argmax(shard_objective)
            from_union = _objective(log_det, union_quality, final) >= shard_objective[best]
            own = union_index[best * per_shard_k + jnp.arange(k)]
            indices = jnp.where(from_union, indices, own)
            gains = jnp.where(from_union, gains, shard_gains[best])
            log_det = jnp.where(from_union, log_det, shard_log_det[best])
        nonfinite = shard_nonfinite | final_info.nonfinite
        return indices, ShardedLeverageInfo(log_det, gains, nonfinite, shard_log_det, from_union)

    rows, replicated = PartitionSpec(axis), PartitionSpec()
    args = (x, jnp.asarray(ridge, x.dtype)) + (() if quality is None else (quality,))
    in_specs = (rows, replicated) + (() if quality is None else (rows,))
    out_specs = (replicated, ShardedLeverageInfo(*(replicated,) * 5))
    fn = jax.shard_map(per_shard, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                       check_vma=False)
    return fn(*args)


def leverage_select_sharded(
    embeddings,
    k: int,
    *,
    mesh: Mesh | None = None,
    per_shard_k: int | None = None,
    ridge=1e-3,
    quality=None,
    chunk_size: int | None = None,
    normalize: bool = False,
    tie_rtol: float | None = None,
) -> tuple[jax.Array, ShardedLeverageInfo]:
    """Greedy leverage selection of data spread over devices: per-shard greedy, then the union.

    The rows are split into ``P`` equal consecutive shards along a 1-D ``mesh`` (``shard_map``).
    Each device runs greedy :func:`leverage_select` on its shard for ``per_shard_k`` picks; the
    picked rows (``P · per_shard_k`` of them) are all-gathered and greedy picks ``k`` of this
    union (replicated on every device). When ``per_shard_k >= k``, the answer is the better (in
    ``f``, or the quality-weighted objective) of the union's selection and the best shard's own
    first ``k`` picks: the two-round GreeDi algorithm of Mirzasoleiman, Karbasi, Sarkar & Krause
    (NeurIPS 2013, https://arxiv.org/abs/1411.0541).

    Guarantees (``quality=None``, ``per_shard_k >= k``, for the monotone submodular
    ``g(S) = f(S) − d log λ``; exact greedy at each round):

    * always ``g(result) >= (1 − 1/e) · max_p g(greedy on shard p)`` and
      ``g(result) >= (1 − 1/e)² / min(P, k) · OPT`` for any split of the rows (Mirzasoleiman et
      al., Theorem 4.2);
    * if rows are assigned to shards uniformly at random (shuffle before sharding),
      ``E[g(result)] >= (1 − 1/e) / 2 · OPT`` (Barbosa, Ene, Nguyen & Ward, ICML 2015,
      https://arxiv.org/abs/1502.02606).

    A single device (``P = 1``) reduces to :func:`leverage_select` on all rows. Memory per
    device: its shard plus the ``(P · per_shard_k, d)`` union.

    Args:
        embeddings: ``(n, d)`` float32/float64, finite, ``n`` divisible by the mesh size
            (sharded along the mesh axis; a replicated array is split by ``shard_map``).
        k: rows to select, ``1 <= k <= P · per_shard_k``.
        mesh: 1-D :class:`jax.sharding.Mesh`; default every device
            (:func:`jaxsample.sharding.particle_mesh`).
        per_shard_k: greedy picks per shard, ``ceil(k / P) <= per_shard_k <= n / P``;
            default ``min(k, n / P)``.
        ridge, quality, chunk_size, normalize, tie_rtol: as in :func:`leverage_select`.

    Returns:
        ``(indices, info)``: ``(k,)`` int32 global row indices, distinct, replicated; a
        :class:`ShardedLeverageInfo`.

    Example:
        >>> import jax
        >>> from jaxsample.sharding import particle_mesh
        >>> x = jax.random.normal(jax.random.key(0), (64 * jax.device_count(), 8))
        >>> indices, info = leverage_select_sharded(x, 6, mesh=particle_mesh())
        >>> indices.shape, info.shard_log_det.shape == (jax.device_count(),)
        ((6,), True)
    """
    x, ridge, quality, tie_rtol, chunk_size = _check_common(embeddings, ridge, quality,
                                                            normalize, tie_rtol, chunk_size)
    if mesh is None:
        from jaxsample.sharding import particle_mesh

        mesh = particle_mesh()
    if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be a 1-D jax.sharding.Mesh, got {mesh!r}")
    num_shards = mesh.size
    n = x.shape[0]
    if n % num_shards:
        raise ValueError(f"embeddings: {n} rows do not split evenly over the {num_shards} "
                         "devices of the mesh (pad or trim to a multiple)")
    n_local = n // num_shards
    k = check_int("k", k, 1, num_shards * n_local)
    if per_shard_k is None:
        per_shard_k = min(k, n_local)
    per_shard_k = check_int("per_shard_k", per_shard_k, math.ceil(k / num_shards), n_local)
    return _select_sharded(x, ridge, quality, k=k, per_shard_k=per_shard_k, mesh=mesh,
                           normalize=normalize, tie_rtol=tie_rtol, chunk_size=chunk_size)


def _is_infinity(q) -> bool:
    """``q`` is a concrete ``+inf`` (the one order that selects a different formula)."""
    if isinstance(q, bool | str) or not is_concrete(q) or np.ndim(q) != 0:
        return False
    try:
        return float(q) == math.inf
    except (TypeError, ValueError):
        return False


def _unit_rows(x):
    norms = sq_norms(x)
    scale = jnp.where(norms > 0, jax.lax.rsqrt(jnp.where(norms > 0, norms, 1)), 0)
    return x * scale[:, None]


@functools.partial(jax.jit, static_argnames=("kernel_fn", "infinite"))
def _vendi(x, q, *, kernel_fn, infinite):
    with jax.named_scope("vendi_score"):
        n, d = x.shape
        if kernel_fn is None:
            unit = _unit_rows(x)
            if n > d:  # dual form: X̂ᵀX̂/n has the non-zero spectrum of K/n
                gram = jnp.matmul(unit.T, unit, precision=_HIGHEST)
            else:
                gram = jnp.matmul(unit, unit.T, precision=_HIGHEST)
        else:
            gram = jax.vmap(jax.vmap(kernel_fn, in_axes=(None, 0)), in_axes=(0, None))(x, x)
            gram = 0.5 * (gram + gram.T)
        eigenvalues = jnp.linalg.eigvalsh(gram / n)
        order = math.inf if infinite else q
        score = jnp.exp(kernel.spectral_entropy(eigenvalues, order))
        return score, VendiInfo(~jnp.isfinite(score))


def vendi_score(embeddings, *, kernel: str | Callable = "cosine", q=1.0
                ) -> tuple[jax.Array, VendiInfo]:
    """The Vendi score: the effective number of distinct rows, ``exp H_q(eig(K / n))``.

    ``K_ij = k(x_i, x_j)`` with ``k(x, x) = 1``; ``H_q`` is the order-q entropy of the
    eigenvalues of ``K / n`` (Shannon for ``q = 1``, ``−log λ_max`` for ``q = ∞``,
    ``log(Σλ^q)/(1 − q)`` otherwise; 0·log 0 = 0). ``1 <= VS <= rank K``: 1 for identical rows,
    ``n`` for orthogonal ones, ``c`` for ``c`` mutually orthogonal groups of equal size.

    ``kernel="cosine"``: ``k(x, y) = x̂·ŷ`` on unit-normalised rows (zero rows stay zero, as in
    the reference package ``vendi-score``'s ``score_dual``); the spectrum is that of the
    ``d × d`` matrix ``X̂ᵀX̂/n`` when ``n > d`` (``O(n d²)``), of the ``n × n`` ``X̂X̂ᵀ/n``
    otherwise. A callable ``kernel(x, y) -> scalar`` (on two ``(d,)`` rows, with
    ``kernel(x, x) = 1``) forms the ``n × n`` matrix (``O(n²)`` memory). Differentiable in
    ``embeddings`` where the spectrum is simple.

    Args:
        embeddings: ``(n, d)`` float32/float64, finite.
        kernel: ``"cosine"`` or a callable similarity.
        q: order ``q >= 0`` (traced; ``jnp.inf`` must be concrete).

    Returns:
        ``(score, VendiInfo)``: a scalar of ``embeddings``' dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> (round(float(vendi_score(jnp.ones((4, 4)))[0]), 4),
        ...  round(float(vendi_score(jnp.eye(4))[0]), 4))
        (1.0, 4.0)
    """
    x = check_array("embeddings", embeddings, ndim=2, finite=True, min_rows=1)
    if callable(kernel):
        kernel_fn = kernel
    else:
        check_choice("kernel", kernel, ("cosine",))
        kernel_fn = None
    infinite = _is_infinity(q)
    q = np.asarray(0.0) if infinite else check_hyperparameter("q", q, positive=False)
    return _vendi(x, q, kernel_fn=kernel_fn, infinite=infinite)
