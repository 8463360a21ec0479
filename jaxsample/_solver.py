"""Library solvers' statuses in jaxsample's: :func:`from_optimistix` and :func:`from_lineax`.

optimistix and lineax report their own enumerations; these map them onto
:class:`~jaxsample.kernels.solver.RESULTS` (the one status, with :class:`SolverStats`, in
:mod:`jaxsample.kernels.solver`), so a user reads one status whichever solver ran.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample.kernels.solver import RESULTS, SolverStats, select

__all__ = ["from_lineax", "from_optimistix", "warn_if_unsuccessful"]


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


def warn_if_unsuccessful(stats: SolverStats, what: str, *, stacklevel: int = 3) -> None:
    """One ``RuntimeWarning`` when an eager call's solver did not succeed.

    ``what`` names the solve (``"stable_max_coverage's relaxation"``); the message is
    ``RESULTS[result]``, which says how to fix it. Under tracing (``jit``, ``vmap``, ``grad``)
    nothing is printed: the status stays in the Info's ``solver`` field for the caller to read.
    A batch of solves (any leading axes) warns once, with the count that failed.
    """
    import warnings

    from jaxsample._checks import is_concrete

    converged = stats.converged
    if not is_concrete(converged):
        return
    failed = ~jnp.asarray(converged)
    if not bool(jnp.any(failed)):
        return
    first = jnp.argmax(failed.reshape(-1))
    result = jax.tree.map(lambda v: jnp.broadcast_to(v, failed.shape).reshape(-1)[first],
                          stats.result)
    count = f" ({int(failed.sum())} of {failed.size} solves)" if failed.size > 1 else ""
    warnings.warn(f"{what} did not succeed{count}: {RESULTS[result]}", RuntimeWarning,
                  stacklevel=stacklevel)
