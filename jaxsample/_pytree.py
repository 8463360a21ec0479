"""Pytree positions: one flat array per point for the kernels, the user's structure outside.

A position may be any pytree of floating arrays (a dict of sites, a tuple, an equinox module's
array leaves) with the same leading batch axes on every leaf (none for one chain, ``(N,)`` for
``N`` particles or rungs). Kernels work on one flat vector per point: :func:`ravel` concatenates
the leaves of each point into ``(..., D)`` in the leaves' common dtype, :func:`unravel` splits
them back and restores every leaf's own shape and dtype (a float32 leaf beside a float64 one
comes back float32; the float32 values are exact in float64, so the round trip is exact). The
:class:`Structure` that describes the split is static: it is read from the leaves' shapes when a
step is traced, so it costs nothing at run time and one compiled step serves one structure.

A bare array is the flat path: :func:`ravel` returns it unchanged with structure ``None``,
:func:`unravel` and :func:`on_flat` then return their argument itself, so a sampler given an
array runs exactly the operations it ran before pytrees existed (tested bitwise).

``jax.flatten_util.ravel_pytree`` is not used: it flattens one point (a batch needs a ``vmap``
and a template point for the inverse), and it promotes mixed leaf dtypes implicitly, which strict
dtype promotion refuses.

Recipe (how a sampler adopts pytree positions; :mod:`jaxsample.mcmc.mala` is the worked case):

1. ``init``: check with :func:`jaxsample._checks.check_position` (``batch_ndim=1`` for a cloud),
   compute the initial state on ``flat, structure = ravel(position, batch_ndim)`` with the user's
   functions wrapped by :func:`on_flat`, and store the position fields as
   ``unravel(flat_field, structure)``: the state holds the user's structure.
2. ``build_kernel``'s ``kernel``: at the top, ``x, structure = ravel(state.positions,
   batch_ndim)`` and ``logdensity_fn = on_flat(logdensity_fn, structure)``,
   ``score_fn = on_flat(score_fn, structure, vector=True)`` (after
   :func:`jaxsample._checks.score_callable`, or materialise ``"autodiff"`` on the flat
   ``logdensity_fn``); run the flat kernel; hand the position fields back through
   :func:`unravel`. Nothing else changes: a flat input makes every one of these calls an
   identity.
3. Test bitwise: the same numbers as an array, as a one-leaf dict and split over two leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import AUTODIFF

__all__ = ["Structure", "on_flat", "ravel", "structure_of", "unravel", "value_and_score"]

PyTree = Any


class Structure(NamedTuple):
    """How one point's leaves sit in its flat vector (hashable, static).

    Attributes:
        treedef: the pytree structure.
        shapes: each leaf's shape without the batch axes.
        dtypes: each leaf's dtype (names).
        dtype: the flat vector's dtype (the leaves' common dtype).
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    dtype: str

    @property
    def size(self) -> int:
        """``D``, the length of the flat vector."""
        return sum(_size(shape) for shape in self.shapes)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _is_flat(tree) -> bool:
    return jax.tree_util.treedef_is_leaf(jax.tree.structure(tree))


def structure_of(tree: PyTree, batch_ndim: int = 0) -> Structure | None:
    """The :class:`Structure` of ``tree``'s points (``None`` for a bare array: the flat path)."""
    if _is_flat(tree):
        return None
    leaves, treedef = jax.tree.flatten(tree)
    dtypes = tuple(jnp.dtype(leaf.dtype).name for leaf in leaves)
    with jax.numpy_dtype_promotion("standard"):  # the common dtype, stated explicitly
        common = jnp.result_type(*dtypes)
    return Structure(treedef, tuple(tuple(leaf.shape[batch_ndim:]) for leaf in leaves), dtypes,
                     jnp.dtype(common).name)


def ravel(tree: PyTree, batch_ndim: int = 0) -> tuple[jax.Array, Structure | None]:
    """``(flat, structure)``: every point's leaves concatenated into ``(*batch, D)``.

    Args:
        tree: an array (returned as it is, with ``None``) or a pytree whose leaves share their
            first ``batch_ndim`` axes.
        batch_ndim: the number of leading batch axes (0: one point).

    Example:
        >>> import jax.numpy as jnp
        >>> flat, structure = ravel({"a": jnp.ones((3, 2)), "b": jnp.zeros((3,))}, batch_ndim=1)
        >>> flat.shape, structure.size
        ((3, 3), 3)
        >>> unravel(flat, structure)["b"].shape
        (3,)
    """
    structure = structure_of(tree, batch_ndim)
    if structure is None:
        return tree, None
    leaves = jax.tree.leaves(tree)
    batch = leaves[0].shape[:batch_ndim]
    parts = [jnp.reshape(leaf, batch + (-1,)).astype(structure.dtype) for leaf in leaves]
    return (parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)), structure


def unravel(flat: jax.Array, structure: Structure | None) -> PyTree:
    """The inverse of :func:`ravel`: ``(*batch, D)`` back to the pytree (leading axes kept)."""
    if structure is None:
        return flat
    batch = flat.shape[:-1]
    leaves, start = [], 0
    for shape, dtype in zip(structure.shapes, structure.dtypes, strict=True):
        stop = start + _size(shape)
        part = flat if len(structure.shapes) == 1 else flat[..., start:stop]
        leaves.append(jnp.reshape(part, batch + shape).astype(dtype))
        start = stop
    return jax.tree.unflatten(structure.treedef, leaves)


def on_flat(fn: Callable | None, structure: Structure | None, *,
            vector: bool = False) -> Callable | None:
    """``fn`` (of the user's pytree) as a function of flat points ``(..., D)``.

    ``vector=False``: ``fn`` returns scalars (a log-density), passed through. ``vector=True``:
    ``fn`` returns a pytree like its input (a score), raveled into ``(..., D)``. Returns ``fn``
    itself when ``structure`` is ``None`` (the flat path) or ``fn`` is ``None``.
    """
    if structure is None or fn is None:
        return fn
    if vector:
        def flat_fn(z):
            out = fn(unravel(z, structure))
            return ravel(out, z.ndim - 1)[0].astype(z.dtype)
    else:
        def flat_fn(z):
            return fn(unravel(z, structure))
    return flat_fn


def value_and_score(logdensity_fn: Callable, score_fn, structure: Structure | None) -> Callable:
    """``z -> (log π(z), ∇log π(z))`` for one flat point ``(D,)``, from the user's functions.

    ``score_fn == "autodiff"`` (see :func:`jaxsample._checks.resolve_score_fn`): one
    ``jax.value_and_grad`` pass of the flat density; otherwise the user's score, raveled.
    """
    logdensity_flat = on_flat(logdensity_fn, structure)
    if isinstance(score_fn, str) and score_fn == AUTODIFF:
        return jax.value_and_grad(logdensity_flat)
    score_flat = on_flat(score_fn, structure, vector=True)
    return lambda z: (logdensity_flat(z), score_flat(z))
