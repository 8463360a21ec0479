"""Ridge leverage scores against a selection, their rank-one update, the telescoped log-det.

For embeddings ``X`` (rows ``x_i``, shape ``(n, d)``), a selection ``S`` and a ridge ``λ > 0`` let

.. math::
    A_S = λ I_d + X_S^T X_S, \\qquad s_i = x_i^T A_S^{-1} x_i

(``s_i`` is the ridge leverage score of row ``i`` against ``S``). The volume objective
``f(S) = log det A_S`` gains ``log(1 + s_i)`` when row ``i`` joins ``S`` (matrix determinant
lemma), so it telescopes: ``f(S_k) = d log λ + Σ_t log(1 + s_{j_t})``. After row ``j`` joins,
with ``a = A_S^{-1} x_j`` and ``c = 1 + x_j^T a`` (Sherman–Morrison),

.. math::
    A^{-1} \\leftarrow A^{-1} - a a^T / c, \\qquad s_i \\leftarrow s_i - (x_i^T a)^2 / c,

which is **one matrix–vector product** ``X a`` (one pass over ``X``) plus ``O(d²)``: no
``(n, d)`` intermediate, no recomputation (:func:`rank_one_update`). Scores start at
``s_i = ‖x_i‖² / λ`` and ``A^{-1} = I / λ`` (:func:`init_state`).

A row scale ``w`` (``row_scale``) makes every function act on the rows ``w_i x_i`` without forming
them (the per-row factor is applied to the matrix–vector product): this is how the public API
normalises rows (``w_i = 1 / ‖x_i‖``) without copying ``X``.

Every pass over ``X`` goes through :func:`jaxsample.kernels.chunking.map_rows`: ``chunk_size``
rows of ``X`` at a time (``None``: one pass over all rows).

The downdated scores carry the rounding of their starting value ``‖x_i‖² / λ``: an absolute error
of about ``u ‖x_i‖² / λ`` per update (``u`` the unit round-off). :func:`selection_scores` computes
scores afresh from the selected rows (a Cholesky factor of ``A_S``, no ``1/λ`` cancellation); the
public API uses it to refresh the running scores.

The Vendi score (Friedman & Dieng, https://arxiv.org/abs/2210.02410) is ``exp`` of the order-q
entropy of a kernel matrix's normalised spectrum (:func:`spectral_entropy`).

Inputs are valid: the public entry points (:mod:`jaxsample.subset.leverage`) checked them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.pairwise import sq_norms
from jaxsample.kernels.resampling import categorical

__all__ = [
    "LeverageState",
    "greedy_pick",
    "init_state",
    "rank_one_update",
    "sampled_pick",
    "selection_scores",
    "spectral_entropy",
    "telescoped_log_det",
]

_HIGHEST = jax.lax.Precision.HIGHEST


class LeverageState(NamedTuple):
    """The running state of a leverage-score selection.

    Attributes:
        gram_inverse: ``(d, d)`` ``A_S^{-1} = (λI + X_S^T X_S)^{-1}``.
        scores: ``(n,)`` ridge leverage scores ``s_i = x_i^T A_S^{-1} x_i`` (``>= 0``).
        selected: ``(n,)`` bool, True for the rows in ``S``.
    """

    gram_inverse: jax.Array
    scores: jax.Array
    selected: jax.Array


def _matvec(x, vector, row_scale, chunk_size):
    """``w ⊙ (X v)``: one pass over ``X``, ``chunk_size`` rows at a time."""
    out = map_rows(lambda rows: jnp.matmul(rows, vector, precision=_HIGHEST), x,
                   chunk_size=chunk_size)
    return out if row_scale is None else out * row_scale


def init_state(x: jax.Array, ridge, *, row_scale: jax.Array | None = None,
               chunk_size: int | None = None) -> LeverageState:
    """The empty selection: ``A^{-1} = I / λ``, ``s_i = w_i² ‖x_i‖² / λ``, nothing selected.

    Args:
        x: ``(n, d)`` embeddings.
        ridge: ``λ > 0`` (a scalar, cast to ``x.dtype``).
        row_scale: optional ``(n,)`` factors ``w_i`` (rows act as ``w_i x_i``).
        chunk_size: rows of ``x`` per block of the norm pass (``None``: all at once).

    Returns:
        A :class:`LeverageState`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> state = jax.jit(init_state)(jnp.array([[3.0, 4.0], [1.0, 0.0]]), 0.5)
        >>> state.scores.tolist(), state.gram_inverse.tolist()
        ([50.0, 2.0], [[2.0, 0.0], [0.0, 2.0]])
    """
    with jax.named_scope("leverage_init"):
        n, d = x.shape
        ridge = jnp.asarray(ridge, x.dtype)
        norms = map_rows(sq_norms, x, chunk_size=chunk_size)
        if row_scale is not None:
            norms = norms * row_scale * row_scale
        return LeverageState(jnp.eye(d, dtype=x.dtype) / ridge, norms / ridge,
                             jnp.zeros((n,), bool))


def rank_one_update(state: LeverageState, x: jax.Array, j, *,
                    row_scale: jax.Array | None = None,
                    chunk_size: int | None = None) -> tuple[LeverageState, jax.Array]:
    """Adds row ``j`` to the selection: the Sherman–Morrison step, one pass over ``x``.

    ``a = A^{-1} x_j``, ``c = 1 + x_j^T a`` (the leverage of ``x_j`` computed afresh from
    ``A^{-1}``, not read from the running scores), then ``A^{-1} ← A^{-1} − a aᵀ / c`` and
    ``s_i ← max(s_i − (x_i^T a)² / c, 0)`` for every row (the clamp removes round-off below 0;
    the picked row's own score becomes ``s_j / (1 + s_j)``).

    Args:
        state: the current :class:`LeverageState`.
        x: ``(n, d)`` embeddings.
        j: int32 scalar, an index not yet selected.
        row_scale: optional ``(n,)`` row factors (as in :func:`init_state`).
        chunk_size: rows of ``x`` per block of the matrix–vector product.

    Returns:
        ``(new_state, log_gain)`` with ``log_gain = log c = f(S ∪ {j}) − f(S)``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[1.0, 0.0], [1.0, 1.0]])
        >>> state, gain = jax.jit(rank_one_update)(init_state(x, 1.0), x, 0)
        >>> float(gain), state.scores.tolist()
        (0.6931471824645996, [0.5, 1.5])
    """
    with jax.named_scope("leverage_rank_one_update"):
        row = x[j] if row_scale is None else x[j] * row_scale[j]
        a = jnp.matmul(state.gram_inverse, row, precision=_HIGHEST)
        c = 1 + jnp.maximum(jnp.dot(row, a, precision=_HIGHEST), 0)
        projections = _matvec(x, a, row_scale, chunk_size)
        scores = jnp.maximum(state.scores - projections * projections / c, 0)
        gram_inverse = state.gram_inverse - jnp.outer(a, a) / c
        return (LeverageState(gram_inverse, scores, state.selected.at[j].set(True)),
                jnp.log(c))


def greedy_pick(state: LeverageState, *, quality: jax.Array | None = None,
                tie_rtol: float) -> jax.Array:
    """The greedy choice: the unselected row of largest value, lowest index among near-ties.

    The value is ``s_i`` (``quality=None``) or ``q_i (1 + s_i)``, the determinant ratio
    ``det L_{S∪i} / det L_S`` of the quality-weighted kernel (see
    :func:`jaxsample.subset.leverage_select`). Rows with ``value >= max − tie_rtol·|max|`` tie and
    the lowest index wins, so results do not depend on the last bits of a backend's matrix–vector
    product. NaN values rank below every valid row; selected rows are never picked.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> state = LeverageState(jnp.eye(1), jnp.array([1.0, 3.0, 3.0, 2.0]),
        ...                       jnp.array([False, False, False, False]))
        >>> int(jax.jit(greedy_pick, static_argnames="tie_rtol")(state, tie_rtol=1e-6))
        1
    """
    with jax.named_scope("leverage_greedy_pick"):
        scores = state.scores
        value = scores if quality is None else quality * (1 + scores)
        value = jnp.where(jnp.isnan(value), -1, value)
        value = jnp.where(state.selected, -jnp.inf, value)
        top = jnp.max(value)
        threshold = jnp.where(jnp.isinf(top), top, top - tie_rtol * jnp.abs(top))
        return jnp.argmax(value >= threshold).astype(jnp.int32)


def sampled_pick(key: jax.Array, state: LeverageState, *,
                 quality: jax.Array | None = None) -> jax.Array:
    """Draws an unselected row with probability ``∝ s_i`` (or ``∝ q_i s_i``).

    When no unselected row has positive weight (every remaining row already spanned, or zero
    quality), the draw is uniform over the unselected rows. One uniform per draw
    (:func:`jaxsample.kernels.resampling.categorical`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> state = LeverageState(jnp.eye(1), jnp.array([5.0, 1.0, 0.0]),
        ...                       jnp.array([True, False, False]))
        >>> int(jax.jit(sampled_pick)(jax.random.key(0), state))
        1
    """
    with jax.named_scope("leverage_sampled_pick"):
        weight = state.scores if quality is None else quality * state.scores
        usable = ~state.selected & (weight > 0)
        weight = jnp.where(usable, weight, 1)
        uniform = jnp.where(state.selected, -jnp.inf, 0).astype(weight.dtype)
        log_weight = jnp.where(jnp.any(usable), jnp.where(usable, jnp.log(weight), -jnp.inf),
                               uniform)
        return categorical(key, log_weight)


def selection_scores(x: jax.Array, selected_rows: jax.Array, ridge, *,
                     row_scale: jax.Array | None = None,
                     chunk_size: int | None = None) -> tuple[jax.Array, jax.Array]:
    """Leverage scores of every row against a given selection, computed afresh.

    With the Cholesky factor ``L Lᵀ = A_S = λI + X_Sᵀ X_S``, ``s_i = ‖L^{-1} x_i‖²``: no
    subtraction from ``‖x_i‖² / λ``, so no cancellation (the reference the running scores of
    :func:`rank_one_update` drift from). Zero rows of ``selected_rows`` contribute nothing
    (padding). Cost ``O(k d² + d³ + n d²)``; the ``(c, d)`` solve of each block of ``x`` is the
    largest intermediate.

    Args:
        x: ``(n, d)`` embeddings.
        selected_rows: ``(k, d)`` the rows of ``S`` (already scaled by their row factors).
        ridge: ``λ > 0``.
        row_scale: optional ``(n,)`` factors of the rows of ``x``.
        chunk_size: rows of ``x`` per block.

    Returns:
        ``(scores (n,), gram_inverse (d, d))``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([[1.0, 0.0], [1.0, 1.0]])
        >>> scores, _ = jax.jit(selection_scores)(x, x[:1], 1.0)
        >>> [round(float(s), 6) for s in scores]
        [0.5, 1.5]
    """
    with jax.named_scope("leverage_selection_scores"):
        d = x.shape[1]
        ridge = jnp.asarray(ridge, x.dtype)
        gram = ridge * jnp.eye(d, dtype=x.dtype) + jnp.matmul(selected_rows.T, selected_rows,
                                                               precision=_HIGHEST)
        factor = jnp.linalg.cholesky(gram)

        def block(rows):
            solved = jax.scipy.linalg.solve_triangular(factor, rows.T, lower=True)
            return jnp.sum(solved * solved, axis=0)

        scores = map_rows(block, x, chunk_size=chunk_size)
        if row_scale is not None:
            scores = scores * row_scale * row_scale
        identity = jnp.eye(d, dtype=x.dtype)
        gram_inverse = jax.scipy.linalg.cho_solve((factor, True), identity)
        return scores, 0.5 * (gram_inverse + gram_inverse.T)


def telescoped_log_det(gains: jax.Array, ridge, dim: int) -> jax.Array:
    """``f(S) = log det(λI_d + X_SᵀX_S) = d log λ + Σ_t gains_t``.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(telescoped_log_det(jnp.log(jnp.array([2.0, 3.0])), 1.0, 4)), 4)
        1.7918
    """
    ridge = jnp.asarray(ridge, gains.dtype)
    return dim * jnp.log(ridge) + jnp.sum(gains)


def spectral_entropy(eigenvalues: jax.Array, q) -> jax.Array:
    """Order-q (Rényi) entropy of a spectrum, ``0 log 0 = 0``.

    Eigenvalues below ``m·u·λ_max`` (``m`` their number, ``u`` the unit round-off: what an
    eigensolver returns for an exact zero) are set to 0; the rest are used as given (they sum to 1
    for a kernel with unit diagonal divided by ``n``). ``q = 1`` is Shannon's
    ``−Σ λ log λ``, ``q = ∞`` (pass ``jnp.inf``) ``−log λ_max``, otherwise
    ``log(Σ λ^q) / (1 − q)``. ``q`` may be traced (a finite value; ``∞`` must be concrete).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> entropy = jax.jit(spectral_entropy)
        >>> [round(float(entropy(jnp.array([0.5, 0.5, 0.0]), q)), 4) for q in (1.0, 2.0)]
        [0.6931, 0.6931]
    """
    with jax.named_scope("spectral_entropy"):
        dtype = eigenvalues.dtype
        top = jnp.max(eigenvalues)
        floor = eigenvalues.shape[0] * jnp.finfo(dtype).eps * top
        positive = eigenvalues > floor
        lam = jnp.where(positive, eigenvalues, 1)  # 1: a safe placeholder, masked out below
        if isinstance(q, float) and q == float("inf"):
            return -jnp.log(top)
        q = jnp.asarray(q, dtype)
        shannon = -jnp.sum(jnp.where(positive, lam * jnp.log(lam), 0))
        is_one = q == 1
        q_safe = jnp.where(is_one, 2, q).astype(dtype)
        power_sum = jnp.sum(jnp.where(positive, lam**q_safe, 0))
        renyi = jnp.log(power_sum) / (1 - q_safe)
        return jnp.where(is_one, shannon, renyi)
