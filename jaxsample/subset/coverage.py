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
* :func:`sparse_incidence` — the padded-index form of the incidence for n = 10⁶ elements.

The entropic weight is called ``reg`` (the relaxation's λ).

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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample._solver import SolverStats
from jaxsample.kernels import coverage as kernel
from jaxsample.kernels.coverage import PaddedIncidence
from jaxsample.subset.ksubset import correlated_k_subset

__all__ = [
    "CoverageInfo",
    "CoverageRelaxationInfo",
    "PaddedIncidence",
    "coverage",
    "max_coverage_relaxation",
    "prepare_incidence",
    "sparse_incidence",
    "stable_max_coverage",
]

class CoverageRelaxationInfo(NamedTuple):
    """What :func:`max_coverage_relaxation` reports about ``x``.

    Attributes:
        relaxed_value: ``F(x) = Σ_e w_e min(1, (Bx)_e)``.
        entropy: ``H(x)``, in ``[0, k log(m/k)]``.
        objective: ``Φ(x) = F(x) + reg·H(x)``.
        gap: the solver's residual, a duality gap: ``Φ(x*) − Φ(x) <= gap``.
        distance_bound: ``sqrt(2 k gap / reg) >= ‖x − x*‖₁`` (strong concavity of ``reg·H``).
        nonfinite: a NaN/inf in ``x``, the objective or the gap.
    """

    relaxed_value: jax.Array
    entropy: jax.Array
    objective: jax.Array
    gap: jax.Array
    distance_bound: jax.Array
    nonfinite: jax.Array


class CoverageInfo(NamedTuple):
    """What :func:`stable_max_coverage` reports besides the mask.

    Attributes:
        marginals: ``(m,)`` the relaxed ``x*`` (the rounding's inclusion probabilities).
        relaxed_value: ``F(x*)``.
        objective: ``Φ(x*) = F(x*) + reg·H(x*)``.
        gap: the relaxation solver's duality gap (its residual).
        distance_bound: ``sqrt(2 k gap / reg) >= ‖x − x*‖₁``.
        coverage: ``cov(A)`` of the returned subset.
        fit_residual: ``max|π − x|`` of the conditional Poisson fit (0 for the other schemes).
        solver: :class:`~jaxsample.SolverStats` of that fit (0 iterations and ``successful`` for
            the other schemes).
        nonfinite: a NaN/inf anywhere above.
    """

    marginals: jax.Array
    relaxed_value: jax.Array
    objective: jax.Array
    gap: jax.Array
    distance_bound: jax.Array
    coverage: jax.Array
    fit_residual: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def sparse_incidence(indices, num_sets: int) -> PaddedIncidence:
    """The padded-index (sparse) incidence: row e lists the sets that contain element e.

    Memory and every pass are ``O(n·d)`` for rows of width d, never ``O(n·m)``: the form for
    n = 10⁶ elements. Pad a row with ``-1`` (or ``num_sets``); a row must not repeat a set.

    Args:
        indices: ``(n, d)`` integer set ids in ``[0, num_sets)``, padded with ``-1``.
        num_sets: m.

    Returns:
        :class:`PaddedIncidence` (a pytree; pass it through ``jit``).

    Raises:
        ValueError: ids out of range, or a set repeated within a row.

    Example:
        >>> import numpy as np
        >>> inc = sparse_incidence(np.array([[0, 2], [1, -1], [2, -1]]), 3)
        >>> inc.indices.tolist(), inc.num_sets
        ([[0, 2], [1, 3], [2, 3]], 3)
    """
    num_sets = check_int("num_sets", num_sets, 1)
    indices = check_array("indices", indices, ndim=2, kind="integer", min_rows=1)
    if is_concrete(indices):
        host = np.asarray(indices)
        if host.size and (host.min() < -1 or host.max() > num_sets):
            raise ValueError(f"indices must be set ids in [0, num_sets = {num_sets}) or the pad "
                             f"-1, got values in [{host.min()}, {host.max()}]")
        host = np.where(host < 0, num_sets, host)
        ordered = np.sort(host, axis=1)
        if bool(np.any((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] < num_sets))):
            raise ValueError("indices must not repeat a set within a row (element)")
        indices = jnp.asarray(host, jnp.int32)
    else:
        indices = jnp.where(indices < 0, num_sets, indices).astype(jnp.int32)
    return PaddedIncidence(indices, num_sets)


def _float_dtype(incidence, weights):
    if weights is not None:
        return jnp.asarray(weights).dtype
    if (not isinstance(incidence, PaddedIncidence) and hasattr(incidence, "dtype")
            and jnp.issubdtype(incidence.dtype, jnp.floating)):
        return incidence.dtype
    return jnp.zeros(()).dtype


def prepare_incidence(incidence, weights=None):
    """Checks an incidence and element weights; returns them as the kernels take them.

    A dense ``(n, m)`` bool/0-1 incidence becomes a float array of the weights' dtype; a
    :class:`PaddedIncidence` passes through. ``weights`` default to ones.

    Raises:
        ValueError, TypeError: naming ``incidence`` or ``weights``: wrong rank, non-finite or
            non-0/1 entries, negative or non-finite weights, mismatched n.
    """
    dtype = _float_dtype(incidence, weights)
    if isinstance(incidence, PaddedIncidence):
        n = incidence.indices.shape[0]
    else:
        incidence = check_array("incidence", incidence, ndim=2, kind=None, min_rows=1)
        if not (jnp.issubdtype(incidence.dtype, jnp.number)
                or jnp.issubdtype(incidence.dtype, jnp.bool_)):
            raise TypeError(f"incidence must be bool or numeric, got dtype {incidence.dtype}")
        if incidence.shape[1] < 1:
            raise ValueError(f"incidence needs at least one set (column), got {incidence.shape}")
        if is_concrete(incidence) and not jnp.issubdtype(incidence.dtype, jnp.bool_):
            host = np.asarray(incidence)
            if not np.all(np.isfinite(host)):
                raise ValueError("incidence must be finite; got NaN or inf entries")
            if not np.all((host == 0) | (host == 1)):
                raise ValueError("incidence must hold 0/1 (or bool) entries")
        n = incidence.shape[0]
        incidence = incidence.astype(dtype)
    if weights is None:
        weights = jnp.ones((n,), dtype)
    else:
        weights = check_array("weights", weights, shape=(n,))
        if is_concrete(weights):
            host = np.asarray(weights, np.float64)
            if not np.all(np.isfinite(host)):
                raise ValueError("weights must be finite; got NaN or inf entries")
            if np.any(host < 0):
                raise ValueError(f"weights must be >= 0, got minimum {host.min()}")
    return incidence, weights


@functools.partial(jax.jit, static_argnames=("k", "num_steps"))
def _relax(incidence, weights, k, reg, num_steps):
    m = kernel.num_sets(incidence)
    dtype = weights.dtype
    reg = jnp.asarray(reg, dtype)
    if k == m:  # the hypersimplex is the single point 1
        log_x = jnp.zeros((m,), dtype)
        value = kernel.relaxed_coverage(incidence, weights, jnp.ones((m,), dtype))
        zero = jnp.zeros((), dtype)
        out = kernel.Relaxation(log_x, value, zero, value, value, zero)
    else:
        out = kernel.entropic_mirror_ascent(incidence, weights, k, reg, num_steps)
    x = jnp.exp(out.log_marginals)
    bound = jnp.sqrt(2 * k * out.gap / reg)
    nonfinite = (jnp.any(~jnp.isfinite(out.log_marginals)) | ~jnp.isfinite(out.objective)
                 | ~jnp.isfinite(out.gap))
    return x, CoverageRelaxationInfo(out.value, out.entropy, out.objective, out.gap, bound,
                                     nonfinite)


def _check_problem(incidence, k, reg, weights, num_steps):
    incidence, weights = prepare_incidence(incidence, weights)
    m = kernel.num_sets(incidence)
    k = check_int("k", k, 1, m)
    reg = check_hyperparameter("reg", reg)
    num_steps = check_int("num_steps", num_steps, 1)
    return incidence, weights, k, reg, num_steps


def max_coverage_relaxation(incidence, k: int, *, reg, weights=None, num_steps: int = 500
                            ) -> tuple[jax.Array, CoverageRelaxationInfo]:
    """The maximiser ``x*`` of ``F + reg·H`` over the capped hypersimplex, by mirror ascent.

    Entropic mirror ascent with the KL projection (``ρ_t = 2/(t + 1)`` steps, best iterate kept),
    certified by a duality gap: see :mod:`jaxsample.kernels.coverage`. Each step is one pass
    ``Bx`` and one ``Bᵀu`` over the incidence.

    Args:
        incidence: ``(n, m)`` dense bool/0-1 array (elements × sets) or :func:`sparse_incidence`.
        k: number of sets, ``1 <= k <= m``.
        reg: entropic weight ``> 0`` (a traced value: ``jax.vmap`` over it works).
        weights: ``(n,)`` element weights ``>= 0`` (default ones); their dtype is the output's.
        num_steps: mirror steps.

    Returns:
        ``(marginals (m,), CoverageRelaxationInfo)``.

    Example:
        >>> import numpy as np
        >>> incidence = np.random.default_rng(0).random((200, 30)) < 0.2
        >>> x, info = max_coverage_relaxation(incidence, 4, reg=1e4)
        >>> bool(np.abs(np.asarray(x) - 4 / 30).max() < 0.01)    # a large reg pulls x* to k/m
        True
        >>> x, info = max_coverage_relaxation(incidence, 4, reg=0.5)
        >>> round(float(x.sum()), 4), bool(info.gap < 0.1)
        (4.0, True)
    """
    incidence, weights, k, reg, num_steps = _check_problem(incidence, k, reg, weights, num_steps)
    return _relax(incidence, weights, k, reg, num_steps)


@jax.jit
def _assemble(incidence, weights, x, relaxed, mask, fit):
    value = kernel.mask_coverage(incidence, weights, mask)
    nonfinite = relaxed.nonfinite | fit.nonfinite | ~jnp.isfinite(value)
    return CoverageInfo(x, relaxed.relaxed_value, relaxed.objective, relaxed.gap,
                        relaxed.distance_bound, value, fit.residual, fit.solver, nonfinite)


def stable_max_coverage(key, incidence, k: int, *, reg, weights=None, num_steps: int = 500,
                        scheme: str = "cp", tolerance=None, max_iterations: int = 50
                        ) -> tuple[jax.Array, CoverageInfo]:
    """Stable maximum coverage: the entropic relaxation rounded with a common seed.

    Solves ``x* = argmax F + reg·H`` (:func:`max_coverage_relaxation`) and rounds it with
    :func:`jaxsample.subset.correlated_k_subset`. Two instances that differ in one element give
    relaxed solutions within ``w_e k / reg`` in ℓ₁ (add/delete), and the same ``key`` then gives
    nearly the same
    subset. With ``"cp"``, ``E cov(A) >= (1 − 1/e)(OPT − reg·k·log(m/k))``.

    Args:
        key: PRNG key, the common seed of the rounding (reuse it across instances to couple).
        incidence: ``(n, m)`` dense bool/0-1 array or :func:`sparse_incidence`.
        k: number of sets, ``1 <= k <= m``.
        reg: entropic weight ``> 0`` (traced): larger is more stable and less optimal.
        weights: ``(n,)`` element weights ``>= 0`` (default ones).
        num_steps: mirror-ascent steps.
        scheme: rounding, one of :data:`jaxsample.subset.ksubset.SCHEMES` (``"independent"``
            does not keep ``|A| = k``).
        tolerance, max_iterations: the ``"cp"`` fit's (see
            :func:`jaxsample.subset.fit_weights`).

    Returns:
        ``(mask (m,) bool, CoverageInfo)``.

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
    incidence, weights, k, reg, num_steps = _check_problem(incidence, k, reg, weights, num_steps)
    # compiled pieces, so that the relaxation, the fit and the sampler are each compiled once per
    # shape and reused across calls that share them (under an outer jit they are inlined); the
    # rounding checks the scheme, the fit's settings and x* itself (in [0, 1], summing to k)
    x, relaxed = _relax(incidence, weights, k, reg, num_steps)
    mask, fit = correlated_k_subset(key, x, k, scheme=scheme, tolerance=tolerance,
                                    max_iterations=max_iterations)
    return mask, _assemble(incidence, weights, x, relaxed, mask, fit)


@jax.jit
def _coverage(incidence, weights, mask):
    return kernel.mask_coverage(incidence, weights, mask)


def coverage(incidence, mask, weights=None) -> jax.Array:
    """``cov(A) = Σ_e w_e 1[element e is in a chosen set]`` for a ``(m,)`` bool mask.

    Example:
        >>> import numpy as np
        >>> incidence = np.array([[1, 0], [1, 1], [0, 0]], bool)
        >>> float(coverage(incidence, np.array([False, True])))
        1.0
    """
    incidence, weights = prepare_incidence(incidence, weights)
    m = kernel.num_sets(incidence)
    mask = check_array("mask", mask, shape=(m,), kind="bool")
    return _coverage(incidence, weights, mask)

