"""One solver status for the whole library: :class:`RESULTS` and :class:`SolverStats`.

Every Info whose method runs a solver, a fit or a search carries one field
``solver: SolverStats(num_iterations, result)``, kernels' Infos (:mod:`jaxsample.kernels.secular`)
and samplers' alike. ``result`` is a member of :class:`RESULTS`, an ``equinox.Enumeration`` in the
style of lineax's and optimistix's: a jittable, vmappable pytree whose members carry the message a
user needs to fix the problem. Eagerly, ``RESULTS[info.solver.result]`` is that message (empty for
success). It sits in the kernel layer so that a kernel's own Info reports through it; the
top-level namespace re-exports both (``jaxsample.RESULTS``, ``jaxsample.SolverStats``).

:func:`sequential` and :func:`batched` combine the stats of several solves into one.

Example:
    >>> import jax.numpy as jnp
    >>> from jaxsample import RESULTS, SolverStats
    >>> stats = SolverStats.of(jnp.asarray(200), converged=jnp.asarray(False))
    >>> bool(stats.converged), RESULTS[stats.result].split(";")[0]
    (False, 'did not converge within max_iterations')
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["RESULTS", "SolverStats", "batched", "select", "sequential"]


class RESULTS(eqx.Enumeration):
    """Outcome of a solver, fit or search inside a jaxsample method."""

    successful = ""
    max_iterations_reached = (
        "did not converge within max_iterations; raise max_iterations (or num_steps) or loosen "
        "tolerance"
    )
    nonfinite = (
        "a non-finite value (NaN or inf) was met; check the inputs and that the function is finite "
        "where it is evaluated"
    )
    diverged = (
        "the iteration diverged; use a smaller step size or learning rate, or a better "
        "starting point"
    )
    not_positive_definite = (
        "a matrix that must be positive definite is not (a Hessian at a saddle or a maximum, or a "
        "singular covariance); a damped or diagonal fallback was used, or none was possible"
    )
    singular = "a linear system is singular or ill-conditioned; regularise it"


class SolverStats(NamedTuple):
    """How an inner solver, fit or search ended.

    Attributes:
        num_iterations: iterations (or optimiser steps) taken, int32.
        result: a :class:`RESULTS` member (``RESULTS[result]`` is its message, eagerly).
    """

    num_iterations: jax.Array
    result: eqx.Enumeration

    @property
    def converged(self) -> jax.Array:
        """``result == RESULTS.successful`` as a boolean array."""
        return self.result == RESULTS.successful

    @classmethod
    def of(cls, num_iterations, *, converged, nonfinite=None) -> SolverStats:
        """Stats from an iteration count and flags: ``nonfinite`` wins over ``converged``.

        Args:
            num_iterations: iterations taken (cast to int32).
            converged: boolean array, whether the tolerance was met.
            nonfinite: optional boolean array, whether a non-finite value was met.
        """
        result = select(converged, RESULTS.successful, RESULTS.max_iterations_reached)
        if nonfinite is not None:
            result = select(nonfinite, RESULTS.nonfinite, result)
        return cls(jnp.asarray(num_iterations, jnp.int32), result)


def select(pred, on_true, on_false):
    """``RESULTS.where`` for a boolean array of any shape (elementwise; members broadcast)."""
    pred = jnp.asarray(pred)
    if pred.ndim == 0:
        return RESULTS.where(pred, on_true, on_false)
    shape = pred.shape

    def flat(item):
        value = jnp.broadcast_to(jax.tree.leaves(item)[0], shape).reshape(-1)
        return jax.tree.unflatten(jax.tree.structure(item), [value])

    out = jax.vmap(RESULTS.where)(pred.reshape(-1), flat(on_true), flat(on_false))
    return jax.tree.map(lambda v: v.reshape(shape), out)


def sequential(first: SolverStats, second: SolverStats) -> SolverStats:
    """Two solves run one after the other: iterations add up, the first unsuccessful result is
    kept."""
    return SolverStats(first.num_iterations + second.num_iterations,
                       select(first.converged, second.result, first.result))


def batched(stats: SolverStats) -> SolverStats:
    """A batch of solves (leading axis) run together, as a vmapped solve runs: the most
    iterations, and the first unsuccessful result (``successful`` if every solve succeeded)."""
    first_failure = jnp.argmin(stats.converged)
    return SolverStats(jnp.max(stats.num_iterations),
                       jax.tree.map(lambda value: value[first_failure], stats.result))
