"""One bracketed root finder: bisection on a monotone predicate, for floats and integers.

``bisect(go_right, lo, hi, num_iterations=n)`` keeps a bracket ``[lo, hi]`` and halves it ``n``
times: where ``go_right(mid)`` holds the root lies above ``mid`` (``lo ← mid``), else below
(``hi ← mid``). It needs only a predicate, so it serves root finding (``go_right = f(mid) < 0``
for an increasing ``f``), quantiles (a decreasing survival function still above its level) and
the smallest integer meeting a target (``go_right = not reached(mid)``). Integers bisect as
``mid = lo + (hi − lo) // 2`` and reach a unit bracket after ``⌈log₂(hi − lo)⌉`` halvings.
Jittable and vmappable (a ``fori_loop`` with a static count); callers wrap ``go_right`` to
bisect on a transformed scale (e.g. ``asinh`` for relative precision at large ``|x|``).

optimistix's ``Bisection`` root finder needs a function value with a sign and its own stopping
rule; these callers have only an ordering (and some need integer brackets), so the loop is
written here once.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["bisect"]


def bisect(go_right: Callable[[jax.Array], jax.Array], lo, hi, *, num_iterations: int
           ) -> tuple[jax.Array, jax.Array]:
    """Halve the bracket ``[lo, hi]`` ``num_iterations`` times on a monotone predicate.

    Args:
        go_right: ``mid -> bool`` (scalar or elementwise), True where the sought point lies
            above ``mid``; monotone: True below the point, False above it.
        lo, hi: the bracket (arrays of one shape, float or integer; ``lo <= hi``).
        num_iterations: halvings (static).

    Returns:
        The final ``(lo, hi)``: ``go_right`` held at ``lo`` and failed at ``hi`` whenever it
        did so at the initial ends.

    Example:
        >>> import jax.numpy as jnp
        >>> lo, hi = bisect(lambda x: x**2 < 2.0, jnp.asarray(0.0), jnp.asarray(2.0),
        ...                 num_iterations=30)
        >>> round(float(hi), 6)
        1.414214
        >>> int(bisect(lambda n: n * n < 50, jnp.asarray(0), jnp.asarray(100),
        ...            num_iterations=7)[1])
        8
    """
    lo, hi = jnp.asarray(lo), jnp.asarray(hi)
    integer = jnp.issubdtype(lo.dtype, jnp.integer)

    def step(_, bounds):
        a, b = bounds
        mid = a + (b - a) // 2 if integer else 0.5 * (a + b)
        right = go_right(mid)
        return jnp.where(right, mid, a), jnp.where(right, b, mid)

    return jax.lax.fori_loop(0, num_iterations, step, (lo, hi))
