"""The Laplace fit of a density, ETD's fixed preconditioner: :func:`laplace_preconditioner`.

BFGS (optimistix) finds the mode; ``jax.hessian`` gives the precision there, and
:func:`damped_chol_of_precision` turns it into the lower Cholesky factor of a covariance scale,
damped where it is not positive definite. :class:`Precision` wraps a precision matrix a user
already has, passed as ``etd(..., preconditioner=Precision(P))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample._checks import check_array, check_callable, check_int, check_number, is_concrete
from jaxsample._solver import from_optimistix, warn_if_unsuccessful
from jaxsample.kernels.solver import RESULTS, SolverStats
from jaxsample.kernels.solver import select as select_result

__all__ = ["LaplaceFit", "LaplaceInfo", "Precision", "damped_chol_of_precision",
           "laplace_preconditioner"]


class Precision(NamedTuple):
    """Wraps a precision matrix ``P`` (``(d, d)``) passed as ``preconditioner=Precision(P)``:
    the sampler whitens with ``chol(P⁻¹)``."""

    matrix: jax.Array


class LaplaceFit(NamedTuple):
    """The Laplace approximation ``N(mode, LLᵀ)`` from :func:`laplace_preconditioner`.

    Attributes:
        mode: the maximiser of ``logdensity_fn`` ``(d,)`` (the starting point if the optimiser
            produced a non-finite one under tracing).
        chol: lower Cholesky factor ``L`` of the covariance ``(−∇² log π(mode) + λI)⁻¹``;
            always finite.
    """

    mode: jax.Array
    chol: jax.Array


class LaplaceInfo(NamedTuple):
    """How the Laplace fit went.

    Attributes:
        solver: BFGS's :class:`~jaxsample.SolverStats`; ``RESULTS.not_positive_definite`` when
            the Hessian had to be damped (the fit is then usable but is not a Laplace
            approximation at a maximum).
        damping: the ``λ >= 0`` added to the negative Hessian's eigenvalues (0 when it was
            positive definite).
        nonfinite: the optimiser or the Hessian produced a non-finite value (under tracing; an
            eager call raises instead).
    """

    solver: SolverStats
    damping: jax.Array
    nonfinite: jax.Array


def laplace_preconditioner(logdensity_fn: Callable, position, *, max_iterations: int = 500,
                           tolerance: float = 1e-6) -> tuple[LaplaceFit, LaplaceInfo]:
    """Laplace fit of ``π``: its mode by BFGS (optimistix) and ``chol((−∇² log π)⁻¹)`` there.

    Pass ``fit.chol`` as ``etd(..., preconditioner=fit.chol)`` (and start the particles near
    ``fit.mode``). The Hessian is ``jax.hessian`` of ``logdensity_fn`` (``O(d²)`` memory).

    Failures are never a NaN factor: where ``H = −∇² log π(mode)`` is not positive definite
    (a saddle, or BFGS stopped short), its eigenvalues are floored, ``H + λI`` with
    ``λ = max(0, −λ_min(H)) + 10⁻³·mean|λ(H)|``, the damping is reported and
    ``info.solver.result`` is ``RESULTS.not_positive_definite``. When ``logdensity_fn`` is not
    finite at the point the optimiser returns (a start outside the support) an eager call
    raises a ``ValueError`` with the reason; under tracing the fit falls back to
    ``N(position, I)`` with ``info.nonfinite`` set. An eager call whose fit did not succeed
    (BFGS stopped at ``max_iterations``, or the Hessian was damped) warns once.

    A Laplace factor suits near-Gaussian posteriors: on a funnel or a hierarchical model at
    small scale (eight schools) the mode sits in the neck, the factor is tiny in the directions
    that matter, and a sampler preconditioned with it does worse than none (BFGS reports
    success there: the fit is right, the approximation is not).

    Args:
        logdensity_fn: ``log π(x)`` for one point ``(d,)``.
        position: starting point ``(d,)`` of the optimiser.
        max_iterations: BFGS step cap.
        tolerance: BFGS relative and absolute tolerance.

    Returns:
        ``(LaplaceFit(mode, chol), LaplaceInfo(solver, damping, nonfinite))``.

    Example:
        >>> import jax.numpy as jnp
        >>> fit, info = laplace_preconditioner(lambda x: -0.5 * jnp.sum((x - 1.0)**2 / 4.0),
        ...                                    jnp.zeros(2))
        >>> fit.mode.round(4).tolist(), jnp.diag(fit.chol).round(4).tolist()
        ([1.0, 1.0], [2.0, 2.0])
        >>> bool(info.solver.converged), float(info.damping)
        (True, 0.0)
    """
    import optimistix as optx

    check_callable("logdensity_fn", logdensity_fn)
    position = check_array("position", position, ndim=1, finite=True)
    tolerance = check_number("tolerance", tolerance)
    max_iterations = check_int("max_iterations", max_iterations, 1)
    solution = optx.minimise(lambda x, _: -logdensity_fn(x),
                             optx.BFGS(rtol=tolerance, atol=tolerance), position,
                             max_steps=max_iterations, throw=False)
    mode = solution.value
    mode_ok = jnp.all(jnp.isfinite(mode)) & jnp.isfinite(logdensity_fn(mode))
    if is_concrete(mode_ok) and not bool(mode_ok):
        status = RESULTS[from_optimistix(solution).result] or "converged"
        raise ValueError(
            "laplace_preconditioner: logdensity_fn is not finite at the point the optimiser "
            f"returned after {int(solution.stats['num_steps'])} steps ({status}); start it "
            "where logdensity_fn is finite, or make logdensity_fn finite on the support")
    mode = jnp.where(mode_ok, mode, position)
    precision = -jax.hessian(logdensity_fn)(mode)
    chol, damping, hessian_ok = damped_chol_of_precision(precision)
    if is_concrete(chol) and not bool(hessian_ok):
        raise ValueError("laplace_preconditioner: the Hessian of logdensity_fn at the mode is "
                         "not finite; check logdensity_fn near the mode")
    nonfinite = ~mode_ok | ~hessian_ok
    chol = jnp.where(hessian_ok, chol, jnp.eye(chol.shape[0], dtype=chol.dtype))
    stats = from_optimistix(solution)
    result = select_result(damping > 0, RESULTS.not_positive_definite, stats.result)
    result = select_result(nonfinite, RESULTS.nonfinite, result)
    info = LaplaceInfo(SolverStats(stats.num_iterations, result), damping, nonfinite)
    warn_if_unsuccessful(info.solver, "laplace_preconditioner's fit")
    return LaplaceFit(mode, chol), info


def damped_chol_of_precision(precision):
    """``chol((P + λI)⁻¹)`` by one eigendecomposition of the symmetrised ``P``; ``λ = 0`` when
    ``P`` is positive definite, else ``−λ_min + 10⁻³·mean|λ|``. Returns
    ``(factor, λ, finite)``."""
    precision = 0.5 * (precision + precision.T)
    finite = jnp.all(jnp.isfinite(precision))
    precision = jnp.where(finite, precision, jnp.eye(precision.shape[0], dtype=precision.dtype))
    eigenvalues, vectors = jnp.linalg.eigh(precision)
    floor = 1e-3 * jnp.mean(jnp.abs(eigenvalues)) + jnp.finfo(precision.dtype).tiny
    damping = jnp.where(eigenvalues[0] > 0, jnp.zeros_like(floor), floor - eigenvalues[0])
    cov = (vectors / (eigenvalues + damping)[None, :]) @ vectors.T
    return jnp.linalg.cholesky(0.5 * (cov + cov.T)), damping, finite
