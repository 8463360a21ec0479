"""Library solvers' statuses in jaxsample's: :func:`from_optimistix` and :func:`from_lineax`.

optimistix and lineax report their own enumerations; these map them onto
:class:`~jaxsample.kernels.solver.RESULTS` (the one status, with :class:`SolverStats`, in
:mod:`jaxsample.kernels.solver`), so a user reads one status whichever solver ran.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample.kernels.solver import RESULTS, SolverStats, select

__all__ = ["from_lineax", "from_optimistix"]


def from_optimistix(solution) -> SolverStats:
    """:class:`SolverStats` from an ``optimistix.Solution`` (its ``stats["num_steps"]`` and
    ``result``): success, the step cap, divergence; anything else maps to ``nonfinite`` when the
    value is not finite and ``diverged`` otherwise."""
    import optimistix as optx

    res = solution.result
    finite = jnp.all(jnp.asarray(
        [jnp.all(jnp.isfinite(v)) for v in jax.tree.leaves(solution.value)]))
    capped = (res == optx.RESULTS.max_steps_reached) | (
        res == optx.RESULTS.nonlinear_max_steps_reached)
    result = select(finite, RESULTS.diverged, RESULTS.nonfinite)
    result = select(capped, RESULTS.max_iterations_reached, result)
    result = select(res == optx.RESULTS.successful, RESULTS.successful, result)
    return SolverStats(jnp.asarray(solution.stats["num_steps"], jnp.int32), result)


def from_lineax(solution) -> SolverStats:
    """:class:`SolverStats` from a ``lineax.Solution``: success, the step cap, else singular."""
    import lineax as lx

    res = solution.result
    result = select(res == lx.RESULTS.max_steps_reached, RESULTS.max_iterations_reached,
                    RESULTS.singular)
    result = select(res == lx.RESULTS.successful, RESULTS.successful, result)
    steps = solution.stats.get("num_steps", jnp.zeros((), jnp.int32))
    return SolverStats(jnp.asarray(steps, jnp.int32), result)
