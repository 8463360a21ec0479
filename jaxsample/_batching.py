"""A vmapped batch of independent solves that can report progress: :func:`vmap_in_blocks`.

Bootstrap fits (``risk.bootstrap_fits``, ``choice.bootstrap_value_priorities``) are one ``vmap``
of a solver over resamples. A progress meter cannot report from inside one vmapped call, so with
a meter the rows run in blocks of a ``lax.scan``, one report per block. A vmapped solver loop runs
as long as its slowest member and leaves finished members unchanged, so the blocks give the same
fits as the single ``vmap`` (to round-off).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["vmap_in_blocks"]

NUM_BLOCKS = 10


def vmap_in_blocks(fn: Callable[..., Any], *xs: Any, progress=None) -> Any:
    """``jax.vmap(fn)(*xs)``; with a meter, in ``min(10, n)`` blocks with a report after each.

    The last block is padded by repeating leading rows, whose results are cut off.

    Args:
        fn: a function of one row of each of ``xs``.
        *xs: pytrees of arrays sharing the leading axis length ``n``.
        progress: ``None`` or a meter (``report(step, num_steps)``); it sees ``num_steps`` =
            the number of blocks.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.arange(7.0)
        >>> bool(jnp.all(vmap_in_blocks(jnp.square, x) == x**2))
        True
    """
    if progress is None:
        return jax.vmap(fn)(*xs)
    total = jax.tree.leaves(xs)[0].shape[0]
    num_blocks = min(NUM_BLOCKS, total)
    size = -(-total // num_blocks)
    pad = num_blocks * size - total

    def blocks(a):
        a = jnp.concatenate([a, a[:pad]]) if pad else a
        return a.reshape((num_blocks, size) + a.shape[1:])

    def body(_, block):
        index, rows = block
        out = jax.vmap(fn)(*rows)
        progress.report(index + 1, num_blocks)
        return None, out

    _, out = jax.lax.scan(body, None, (jnp.arange(num_blocks, dtype=jnp.int32),
                                       jax.tree.map(blocks, xs)))
    return jax.tree.map(lambda v: v.reshape((num_blocks * size,) + v.shape[2:])[:total], out)
