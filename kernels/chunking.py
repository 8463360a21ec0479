"""Row-chunked map and reductions: the one way jaxsample bounds the memory of an O(n·m) kernel.

An interaction between ``n`` rows and ``m`` columns (a cost matrix, KDE logits, a kernel sum) is
written once as a function of a *block* of rows, ``fn(block) -> per-row outputs``. Then

* ``map_rows(fn, xs, chunk_size=None)`` is ``fn(xs)``: the dense fast path, one ``(n, m)``
  intermediate;
* ``map_rows(fn, xs, chunk_size=c)`` applies ``fn`` to ``c`` rows at a time with
  ``jax.lax.map(..., batch_size=c)``, so at most ``c·m`` intermediates exist (a ragged last
  block is handled on its own: no padding, no masks, no copy of the operands). This is the
  pattern of ott-jax's ``utils.batched_vmap``, which is not used directly because its
  ``PointCloud(batch_size=...)`` caller is broken on jax 0.10 and the helper is private.

``sum_rows`` and ``logsumexp_rows`` reduce the per-row outputs; they are O(n) extra memory, never
O(n·m). Under ``jax.grad`` a plain ``lax.map`` would keep every block's residuals (for a row
log-sum-exp, the ``(c, m)`` softmax of each block: ``n·m`` in all), so the chunked block function is
wrapped in ``jax.checkpoint``: the reverse pass stores only the input rows and recomputes each
block, and memory stays bounded by the block under ``grad`` too (checked in
``tests/kernels/test_chunking.py``).

``fn`` must be row-wise: row ``i`` of its output depends only on row ``i`` of its input (it may
close over the whole of the other operand). Inputs are valid: the caller checked them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["logsumexp_rows", "map_rows", "sum_rows"]

PyTree = Any


def map_rows(fn: Callable[..., PyTree], *xs: PyTree, chunk_size: int | None = None) -> PyTree:
    """``fn(*xs)`` computed ``chunk_size`` leading-axis rows at a time.

    Args:
        fn: maps blocks of rows ``(c, ...)`` of every ``xs`` to a pytree whose leaves have leading
            axis ``c`` (row ``i`` of the output depends only on row ``i`` of the inputs).
        *xs: pytrees of arrays sharing the leading axis length ``n``.
        chunk_size: rows per block; ``None`` (or ``>= n``) calls ``fn`` once on everything.

    Returns:
        ``fn``'s output for all ``n`` rows.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(10.0)[:, None]
        >>> row_max = lambda rows: jnp.max(rows - jnp.arange(3.0)[None, :], axis=1)
        >>> bool(jnp.all(map_rows(row_max, x, chunk_size=4) == row_max(x)))
        True
    """
    n = jax.tree.leaves(xs)[0].shape[0]
    if chunk_size is None or chunk_size >= n:
        return fn(*xs)
    # lax.map(batch_size=c) vmaps a per-row function over c rows at a time; give fn its block
    # axis back so that it is written once, for blocks.
    @jax.checkpoint
    def one_row(row):
        block = jax.tree.map(lambda a: a[None], row)
        return jax.tree.map(lambda a: a[0], fn(*block))

    num_full, remainder = divmod(n, chunk_size)
    if remainder == 0:
        return jax.lax.map(one_row, xs, batch_size=chunk_size)
    # Ragged: lax.map(batch_size=c) would slice off the n - n % c leading rows, a full copy of
    # every operand (inside a loop: one copy per iteration). Read the full blocks in place by
    # dynamic slices instead and handle the short last block on its own.
    def full_block(i):
        return jax.vmap(one_row)(jax.tree.map(
            lambda a: jax.lax.dynamic_slice_in_dim(a, i * chunk_size, chunk_size), xs))

    head = jax.lax.map(full_block, jnp.arange(num_full))
    head = jax.tree.map(lambda a: a.reshape((num_full * chunk_size,) + a.shape[2:]), head)
    tail = jax.vmap(one_row)(jax.tree.map(lambda a: a[num_full * chunk_size:], xs))
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), head, tail)


def sum_rows(fn: Callable[..., jax.Array], *xs: PyTree, chunk_size: int | None = None) -> jax.Array:
    """``Σ_i fn(*xs)[i]``: the sum of per-row values (e.g. row sums of a kernel matrix).

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(5.0)[:, None]
        >>> float(sum_rows(lambda r: jnp.sum(r * jnp.ones((1, 3)), axis=1), x, chunk_size=2))
        30.0
    """
    return jnp.sum(map_rows(fn, *xs, chunk_size=chunk_size), axis=0)


def logsumexp_rows(fn: Callable[..., jax.Array], *xs: PyTree,
                   chunk_size: int | None = None) -> jax.Array:
    """``log Σ_i exp(fn(*xs)[i])`` for per-row log-values (e.g. row log-sum-exps of logits).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.zeros((6, 1))
        >>> lse = logsumexp_rows(lambda r: jax.nn.logsumexp(r * jnp.ones((1, 4)), axis=1), x,
        ...                      chunk_size=4)
        >>> round(float(lse), 4) == round(float(jnp.log(24.0)), 4)
        True
    """
    return jax.nn.logsumexp(map_rows(fn, *xs, chunk_size=chunk_size), axis=0)
