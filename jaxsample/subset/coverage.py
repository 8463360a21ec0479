"""Stable maximum coverage: the entropic relaxation, rounded by a common-seed k-subset sampler.

Greedy maximum coverage is ``(1 − 1/e)``-optimal but unstable: change one element and the chosen
sets can change completely. The stable algorithm (Stable maximum coverage, NeurIPS 2026) solves the
negative-entropy-regularised capped concave relaxation over the hypersimplex,

    x* = argmax_{x ∈ [0,1]^m, Σx = k}  Σ_e w_e min(1, (Bx)_e) + reg·H(x),   H(x) = −Σ x_i log x_i,

whose maximiser is unique and ``w_e k / reg``-Lipschitz (in ℓ₁) in adding or deleting element e,
and rounds it with a *common-seed* k-subset sampler (:func:`jaxsample.subset.correlated_k_subset`):
the same key on two nearby marginal vectors returns nearly the same subset. Coverage stays within
``1 − 1/e`` of ``OPT − reg·k·log(m/k)`` for the conditional Poisson rounding, which is negatively
associated (:mod:`jaxsample.kernels.coverage`, :mod:`jaxsample.kernels.ksubset`).

* :func:`stable_max_coverage` — relaxation + correlated rounding, ``(mask, CoverageInfo)``;
* :func:`max_coverage_relaxation` — the relaxed ``x*`` alone, with its duality gap;
* :meth:`PaddedIncidence.from_indices` — the padded-index form of the incidence for n = 10⁶
  elements;
* :func:`coverage` — ``cov(A)`` of any mask (e.g. a baseline's).

The entropic weight is called ``reg`` (the relaxation's λ).

**When the solve has converged.** The mirror ascent stops once its certified *relative* duality
gap ``(D(τ̄) − Φ(x)) / D(τ̄)``, a bound on ``(Φ(x*) − Φ(x)) / Φ(x*)``, is at most ``tolerance``
(default ``10⁻³``); ``info.solver`` is ``successful`` only then, and ``max_iterations_reached``
when the step cap came first (an eager call then warns once). The steps a given accuracy needs
grow as ``1 / reg`` (:mod:`jaxsample.kernels.coverage`), so the default cap is chosen from
``reg``: ``num_steps = clip(⌈8000 · w̄ / reg⌉, 100, 100 000)`` with ``w̄`` the mean positive
element weight (the problem is invariant to scaling ``w`` and ``reg`` together). Measured at
n = 3000, m = 120, k = 10 (random and disc set systems, unit weights), the steps to a relative
gap of ``10⁻³`` were at most ``3700 / reg`` for reg in ``[0.1, 10]``; the rule leaves a factor of
two.

Example:
    >>> import jax, numpy as np
    >>> from jaxsample import subset
    >>> incidence = np.random.default_rng(0).random((200, 30)) < 0.2    # elements × sets
    >>> mask, info = subset.stable_max_coverage(jax.random.key(1), incidence, 4, reg=0.5)
    >>> int(mask.sum()), bool(info.coverage <= 200), bool(info.nonfinite)
    (4, True, False)
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_hyperparameter,
    check_int,
    check_key,
    check_progress,
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.kernels import coverage as kernel
from jaxsample.kernels.solver import SolverStats, sequential
from jaxsample.subset._incidence import prepare_incidence
from jaxsample.subset.ksubset import checked_rounding

__all__ = [
    "CoverageInfo",
    "CoverageRelaxationInfo",
    "MaskCoverageInfo",
    "PaddedIncidence",
    "coverage",
    "max_coverage_relaxation",
    "stable_max_coverage",
]

class PaddedIncidence(kernel.PaddedIncidence):
    """Sparse incidence: for each element, the ids of the sets that contain it.

    The form for n = 10⁶ elements: memory and every pass are ``O(n·d)`` for rows of width d,
    never ``O(n·m)`` (see :class:`jaxsample.kernels.coverage.PaddedIncidence` for the layout and
    the transposed index ``members``). Build it with :meth:`from_indices`, which checks the ids.
    """

    @classmethod
    def from_indices(cls, indices, *, num_sets: int) -> PaddedIncidence:
        """The padded incidence from per-element set ids, checked.

        Args:
            indices: ``(n, d)`` integer set ids in ``[0, num_sets)``, padded with ``-1`` (or
                ``num_sets``); a row must not repeat a set. Values are checked when concrete.
            num_sets: m, a Python int ``>= 1``.

        Raises:
            ValueError, TypeError: naming ``indices`` or ``num_sets`` (ids out of range, a set
                repeated within a row, wrong rank or dtype).

        Example:
            >>> import numpy as np
            >>> inc = PaddedIncidence.from_indices(np.array([[0, 2], [1, -1], [2, -1]]),
            ...                                    num_sets=3)
            >>> inc.indices.tolist(), inc.num_sets
            ([[0, 2], [1, 3], [2, 3]], 3)
        """
        num_sets = check_int("num_sets", num_sets, 1)
        array = check_array("indices", indices, ndim=2, kind="integer", min_rows=1)
        if not is_concrete(array):
            return super().from_indices(array, num_sets=num_sets)
        host = np.asarray(indices) if isinstance(indices, np.ndarray) else np.asarray(array)
        if host.size and (host.min() < -1 or host.max() > num_sets):
            raise ValueError(f"indices must be set ids in [0, num_sets = {num_sets}) or the pad "
                             f"-1, got values in [{host.min()}, {host.max()}]")
        ordered = np.sort(np.where(host < 0, num_sets, host), axis=1)
        if bool(np.any((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] < num_sets))):
            raise ValueError("indices must not repeat a set within a row (element)")
        return super().from_indices(host, num_sets=num_sets)


DEFAULT_TOLERANCE = 1e-3       # relative duality gap
_STEPS_PER_UNIT_REG = 8000      # default cap: ⌈8000 · w̄ / reg⌉ mirror steps (module docstring)
_MIN_STEPS, _MAX_STEPS = 100, 100_000


class CoverageRelaxationInfo(NamedTuple):
    """What :func:`max_coverage_relaxation` reports about ``x``.

    Attributes:
        relaxed_value: ``F(x) = Σ_e w_e min(1, (Bx)_e)``.
        entropy: ``H(x)``, in ``[0, k log(m/k)]``.
        objective: ``Φ(x) = F(x) + reg·H(x)``.
        gap: the solver's residual, a duality gap: ``Φ(x*) − Φ(x) <= gap``.
        relative_gap: ``gap / D(τ̄)``, a bound on ``(Φ(x*) − Φ(x)) / Φ(x*)``: the stopping rule.
        distance_bound: ``sqrt(2 k gap / reg) >= ‖x − x*‖₁`` (strong concavity of ``reg·H``).
        solver: :class:`~jaxsample.SolverStats` of the mirror ascent: the steps taken;
            ``successful`` when ``relative_gap <= tolerance``, ``max_iterations_reached`` when
            ``num_steps`` ran out first, ``nonfinite`` when a value went NaN/inf.
        nonfinite: a NaN/inf in ``x``, the objective or the gap.
    """

    relaxed_value: jax.Array
    entropy: jax.Array
    objective: jax.Array
    gap: jax.Array
    relative_gap: jax.Array
    distance_bound: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


class MaskCoverageInfo(NamedTuple):
    """What :func:`coverage` reports besides ``cov(A)``.

    Attributes:
        nonfinite: the coverage is NaN/inf (only from non-finite weights passed under ``jit``).
    """

    nonfinite: jax.Array


class CoverageInfo(NamedTuple):
    """What :func:`stable_max_coverage` reports besides the mask.

    Attributes:
        marginals: ``(m,)`` the relaxed ``x*`` (the rounding's inclusion probabilities).
        relaxed_value: ``F(x*)``.
        objective: ``Φ(x*) = F(x*) + reg·H(x*)``.
        gap: the relaxation solver's duality gap (its residual).
        relative_gap: ``gap / D(τ̄)`` (see :class:`CoverageRelaxationInfo`).
        distance_bound: ``sqrt(2 k gap / reg) >= ‖x − x*‖₁``.
        coverage: ``cov(A)`` of the returned subset.
        fit_residual: ``max|π − x|`` of the conditional Poisson fit (0 for the other schemes).
        solver: :class:`~jaxsample.SolverStats` of the relaxation and the fit run one after the
            other: the mirror steps plus the fit's iterations (none for the other schemes), and
            the first unsuccessful result (the relaxation's ``max_iterations_reached`` when its
            relative gap missed ``gap_tolerance``, else the fit's when it missed ``tolerance``).
        nonfinite: a NaN/inf anywhere above.
    """

    marginals: jax.Array
    relaxed_value: jax.Array
    objective: jax.Array
    gap: jax.Array
    relative_gap: jax.Array
    distance_bound: jax.Array
    coverage: jax.Array
    fit_residual: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def _step_cap(reg, weights):
    """The default cap ``clip(⌈8000 · w̄ / reg⌉, 100, 100 000)``, ``w̄`` the mean positive
    weight (traced: it follows a traced ``reg``)."""
    positive = weights > 0
    count = jnp.maximum(jnp.sum(positive), 1).astype(weights.dtype)
    mean = jnp.sum(jnp.where(positive, weights, jnp.zeros_like(weights))) / count
    steps = jnp.ceil(_STEPS_PER_UNIT_REG * mean / reg)
    steps = jnp.nan_to_num(steps, nan=_MIN_STEPS, posinf=_MAX_STEPS)
    return jnp.clip(steps, _MIN_STEPS, _MAX_STEPS).astype(jnp.int32)


def _host_step_cap(reg, weights) -> int:
    """:func:`_step_cap` on the host, for a progress meter's static total (the largest cap where
    ``reg`` or the weights are traced)."""
    if not (is_concrete(reg) and is_concrete(weights)):
        return _MAX_STEPS
    host = np.asarray(weights, np.float64)
    positive = host[host > 0]
    mean = positive.mean() if positive.size else 1.0
    return int(np.clip(math.ceil(_STEPS_PER_UNIT_REG * mean / float(reg)), _MIN_STEPS,
                       _MAX_STEPS))


@functools.partial(jax.jit, static_argnames=("k", "num_steps", "progress", "total"))
def _relax(incidence, weights, k, reg, num_steps, tolerance, progress=None, total=None):
    m = kernel.num_sets(incidence)
    dtype = weights.dtype
    reg = jnp.asarray(reg, dtype)
    if k == m:  # the hypersimplex is the single point 1
        log_x = jnp.zeros((m,), dtype)
        value = kernel.relaxed_coverage(incidence, weights, jnp.ones((m,), dtype))
        zero = jnp.zeros((), dtype)
        out = kernel.Relaxation(log_x, value, zero, value, value, zero, zero,
                                jnp.zeros((), jnp.int32), jnp.ones((), bool))
    else:
        cap = _step_cap(reg, weights) if num_steps is None else num_steps
        report = None if progress is None else (lambda t, _: progress.report(t, total))
        out = kernel.entropic_mirror_ascent(incidence, weights, k, reg, cap, tolerance, report)
    x = jnp.exp(out.log_marginals)
    bound = jnp.sqrt(2 * k * out.gap / reg)
    nonfinite = (jnp.any(~jnp.isfinite(out.log_marginals)) | ~jnp.isfinite(out.objective)
                 | ~jnp.isfinite(out.gap))
    stats = SolverStats.of(out.num_steps, converged=out.converged, nonfinite=nonfinite)
    return x, CoverageRelaxationInfo(out.value, out.entropy, out.objective, out.gap,
                                     out.relative_gap, bound, stats, nonfinite)


def _check_problem(incidence, k, reg, weights, num_steps, tolerance, progress,
                   tolerance_name="tolerance"):
    check_progress(progress)
    incidence, weights = prepare_incidence(incidence, weights)
    m = kernel.num_sets(incidence)
    k = check_int("k", k, 1, m)
    reg = check_hyperparameter("reg", reg)
    num_steps = check_int("num_steps", num_steps, 1, allow_none=True)
    tolerance = check_hyperparameter(tolerance_name, tolerance, positive=False, maximum=1.0)
    total = None
    if progress is not None:
        total = num_steps if num_steps is not None else _host_step_cap(reg, weights)
    return incidence, weights, k, reg, num_steps, tolerance, total


def max_coverage_relaxation(incidence, k: int, *, reg, weights=None, num_steps: int | None = None,
                            tolerance=DEFAULT_TOLERANCE, progress=None
                            ) -> tuple[jax.Array, CoverageRelaxationInfo]:
    """The maximiser ``x*`` of ``F + reg·H`` over the capped hypersimplex, by mirror ascent.

    Entropic mirror ascent with the KL projection (``ρ_t = 2/(t + 1)`` steps, best iterate kept),
    certified by a duality gap: see :mod:`jaxsample.kernels.coverage`. Each step is one pass
    ``Bx`` and one ``Bᵀu`` over the incidence. The loop stops when the relative duality gap
    ``gap / D(τ̄) >= (Φ(x*) − Φ(x)) / Φ(x*)`` is at most ``tolerance``, or after ``num_steps``.

    Args:
        incidence: ``(n, m)`` dense bool/0-1 array (elements × sets) or a :class:`PaddedIncidence`.
        k: number of sets, ``1 <= k <= m``.
        reg: entropic weight ``> 0`` (a traced value: ``jax.vmap`` over it works).
        weights: ``(n,)`` element weights ``>= 0`` (default ones); their dtype is the output's.
        num_steps: the most mirror steps; default ``clip(⌈8000 · w̄ / reg⌉, 100, 100 000)``
            (``w̄`` the mean positive weight: the steps a given accuracy needs grow as
            ``1 / reg``; see the module docstring).
        tolerance: relative duality gap to stop at, in ``[0, 1]`` (traced); ``info.solver`` is
            ``successful`` only when it is met.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the mirror
            steps from inside the compiled loop (a new meter object compiles the loop anew);
            its total is the step cap, and a solve that meets ``tolerance`` stops before it.

    Returns:
        ``(marginals (m,), CoverageRelaxationInfo)``. An eager call whose solve missed
        ``tolerance`` warns once (``RuntimeWarning``); under ``jit`` read ``info.solver``.

    Example:
        >>> import numpy as np
        >>> incidence = np.random.default_rng(0).random((200, 30)) < 0.2
        >>> x, info = max_coverage_relaxation(incidence, 4, reg=1e4)
        >>> bool(np.abs(np.asarray(x) - 4 / 30).max() < 0.01)    # a large reg pulls x* to k/m
        True
        >>> x, info = max_coverage_relaxation(incidence, 4, reg=0.5)
        >>> round(float(x.sum()), 4), bool(info.solver.converged), bool(info.relative_gap <= 1e-3)
        (4.0, True, True)
    """
    incidence, weights, k, reg, num_steps, tolerance, total = _check_problem(
        incidence, k, reg, weights, num_steps, tolerance, progress)
    x, info = _relax(incidence, weights, k, reg, num_steps, tolerance, progress, total)
    warn_if_unsuccessful(info.solver, "max_coverage_relaxation's mirror ascent")
    return x, info


@jax.jit
def _assemble(incidence, weights, x, relaxed, mask, fit):
    value = kernel.mask_coverage(incidence, weights, mask)
    nonfinite = relaxed.nonfinite | fit.nonfinite | ~jnp.isfinite(value)
    return CoverageInfo(x, relaxed.relaxed_value, relaxed.objective, relaxed.gap,
                        relaxed.relative_gap, relaxed.distance_bound, value, fit.residual,
                        sequential(relaxed.solver, fit.solver), nonfinite)


def stable_max_coverage(key, incidence, k: int, *, reg, weights=None,
                        num_steps: int | None = None, gap_tolerance=DEFAULT_TOLERANCE,
                        scheme: str = "cp", tolerance=None, max_iterations: int = 50,
                        progress=None) -> tuple[jax.Array, CoverageInfo]:
    """Stable maximum coverage: the entropic relaxation rounded with a common seed.

    Solves ``x* = argmax F + reg·H`` (:func:`max_coverage_relaxation`) and rounds it with
    :func:`jaxsample.subset.correlated_k_subset`. Two instances that differ in one element give
    relaxed solutions within ``w_e k / reg`` in ℓ₁ (add/delete), and the same ``key`` then gives
    nearly the same subset. With ``"cp"``, ``E cov(A) >= (1 − 1/e)(OPT − reg·k·log(m/k))``.

    Args:
        key: PRNG key, the common seed of the rounding (reuse it across instances to couple).
        incidence: ``(n, m)`` dense bool/0-1 array or a :class:`PaddedIncidence`.
        k: number of sets, ``1 <= k <= m``.
        reg: entropic weight ``> 0`` (traced): larger is more stable and less optimal.
        weights: ``(n,)`` element weights ``>= 0`` (default ones).
        num_steps: the most mirror-ascent steps; default chosen from ``reg`` as in
            :func:`max_coverage_relaxation`.
        gap_tolerance: the relaxation's relative duality gap to stop at (its ``tolerance``).
        scheme: rounding, one of :data:`jaxsample.subset.ksubset.SCHEMES` (``"independent"``
            does not keep ``|A| = k``).
        tolerance, max_iterations: the ``"cp"`` fit's (see
            :func:`jaxsample.subset.fit_weights`).
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the mirror
            steps, which take nearly all the time (32 s for 200 steps at n = 10⁶, m = 10⁴ on 2
            CPU cores).

    Returns:
        ``(mask (m,) bool, CoverageInfo)``. An eager call whose relaxation or fit missed its
        tolerance warns once (``RuntimeWarning``); under ``jit`` read ``info.solver``.

    Raises:
        ValueError, TypeError: naming the argument (``k > m``, negative weights, non-finite or
            non-0/1 incidence, ``reg <= 0``, unknown scheme).

    Example:
        >>> import jax, numpy as np
        >>> incidence = np.random.default_rng(0).random((200, 30)) < 0.2
        >>> mask, info = stable_max_coverage(jax.random.key(1), incidence, 4, reg=0.5)
        >>> int(mask.sum()), bool(info.solver.converged), bool(info.coverage <= info.relaxed_value)
        (4, True, True)
    """
    key = check_key("key", key)
    incidence, weights, k, reg, num_steps, gap_tolerance, total = _check_problem(
        incidence, k, reg, weights, num_steps, gap_tolerance, progress, "gap_tolerance")
    # compiled pieces, so that the relaxation, the fit and the sampler are each compiled once per
    # shape and reused across calls that share them (under an outer jit they are inlined); the
    # rounding checks the scheme, the fit's settings and x* itself (in [0, 1], summing to k)
    x, relaxed = _relax(incidence, weights, k, reg, num_steps, gap_tolerance, progress, total)
    mask, fit = checked_rounding(key, x, k, scheme=scheme, tolerance=tolerance,
                               max_iterations=max_iterations)
    info = _assemble(incidence, weights, x, relaxed, mask, fit)
    warn_if_unsuccessful(info.solver, "stable_max_coverage (relaxation, then the rounding's fit)")
    return mask, info


@jax.jit
def _coverage(incidence, weights, mask):
    value = kernel.mask_coverage(incidence, weights, mask)
    return value, MaskCoverageInfo(~jnp.isfinite(value))


def coverage(incidence, mask, weights=None) -> tuple[jax.Array, MaskCoverageInfo]:
    """``cov(A) = Σ_e w_e 1[element e is in a chosen set]`` for a ``(m,)`` bool mask.

    One pass over the incidence (a gather per element for :class:`PaddedIncidence`).

    Args:
        incidence: ``(n, m)`` dense bool/0-1 array or a :class:`PaddedIncidence`.
        mask: ``(m,)`` bool, the chosen sets.
        weights: ``(n,)`` element weights ``>= 0`` (default ones); their dtype is the output's.

    Returns:
        ``(coverage, MaskCoverageInfo)``.

    Example:
        >>> import numpy as np
        >>> incidence = np.array([[1, 0], [1, 1], [0, 0]], bool)
        >>> value, info = coverage(incidence, np.array([False, True]))
        >>> float(value), bool(info.nonfinite)
        (1.0, False)
    """
    incidence, weights = prepare_incidence(incidence, weights)
    m = kernel.num_sets(incidence)
    mask = check_array("mask", mask, shape=(m,), kind="bool")
    return _coverage(incidence, weights, mask)

