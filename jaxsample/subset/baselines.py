"""Baselines of the subset family: greedy maximum coverage, k-center greedy.

:func:`greedy_max_coverage` is the ``(1 − 1/e)``-optimal greedy algorithm (Nemhauser, Wolsey &
Fisher 1978), the unstable reference point of :func:`jaxsample.subset.stable_max_coverage`: it is
deterministic, so its sensitivity to a one-element change of the instance is ``|A(I) Δ A(I′)|``.
:func:`k_center_greedy` (farthest point first) is the coreset peer of
:func:`jaxsample.subset.leverage_select`.

:func:`sensitivity_study` measures coverage against sensitivity ``E_seed |A(I) Δ A(I′)|`` for
greedy and the stable algorithm on an instance and its one-element neighbours
(:func:`jaxsample.datasets.disc_instance`); :func:`coverage_figure` plots it.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_int
from jaxsample.kernels import coverage as coverage_kernel
from jaxsample.kernels.pairwise import sq_norms
from jaxsample.subset._incidence import prepare_incidence
from jaxsample.subset.coverage import PaddedIncidence, max_coverage_relaxation
from jaxsample.subset.ksubset import conditional_poisson, correlated_k_subset, fit_weights

__all__ = ["GreedyInfo", "coverage_figure", "greedy_max_coverage", "k_center_greedy",
           "sensitivity_study"]


class GreedyInfo(NamedTuple):
    """What :func:`greedy_max_coverage` reports besides the mask.

    Attributes:
        order: ``(k,)`` int32 set ids in the order chosen.
        gains: ``(k,)`` marginal gain of each pick (non-increasing: submodularity).
        coverage: ``cov(A)`` of the chosen sets (the sum of the gains).
        nonfinite: a NaN/inf in the gains (only from non-finite weights passed under ``jit``).
    """

    order: jax.Array
    gains: jax.Array
    coverage: jax.Array
    nonfinite: jax.Array


@functools.partial(jax.jit, static_argnames=("k",))
def _greedy(incidence, weights, k):
    mask, order, gains = coverage_kernel.greedy_coverage(incidence, weights, k)
    value = coverage_kernel.mask_coverage(incidence, weights, mask)
    nonfinite = ~jax.numpy.all(jax.numpy.isfinite(gains)) | ~jax.numpy.isfinite(value)
    return mask, GreedyInfo(order, gains, value, nonfinite)


def greedy_max_coverage(incidence, k: int, weights=None) -> tuple[jax.Array, GreedyInfo]:
    """Greedy maximum coverage: k times, the set covering the most uncovered weight.

    Ties go to the lowest set id. Each pick is one ``Bᵀu`` pass over the incidence (dense, or the
    padded form :class:`jaxsample.subset.PaddedIncidence`).

    Args:
        incidence: ``(n, m)`` dense bool/0-1 array (elements × sets) or a ``PaddedIncidence``.
        k: number of sets, ``1 <= k <= m``.
        weights: ``(n,)`` element weights ``>= 0`` (default ones).

    Returns:
        ``(mask (m,) bool, GreedyInfo)``.

    Raises:
        ValueError, TypeError: naming the argument (``k > m``, negative weights, non-finite or
            non-0/1 incidence).

    Example:
        >>> import numpy as np
        >>> incidence = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]], bool)
        >>> mask, info = greedy_max_coverage(incidence, 2)
        >>> mask.tolist(), info.order.tolist(), float(info.coverage)
        ([True, False, True], [0, 2], 4.0)
    """
    incidence, weights = prepare_incidence(incidence, weights)
    k = check_int("k", k, 1, coverage_kernel.num_sets(incidence))
    return _greedy(incidence, weights, k)


@functools.partial(jax.jit, static_argnames="k")
def k_center_greedy(x, k: int, first=0):
    """k-center greedy (Gonzalez 1985; the coreset of Sener & Savarese 2018): farthest point next.

    Starts from row ``first``; each pick is the row farthest (Euclidean) from every pick so far,
    one pass over ``x`` per pick (``‖x_i‖² + ‖c‖² − 2 x_i·c``), lowest index among exact ties.

    Example:
        >>> import jax.numpy as jnp
        >>> k_center_greedy(jnp.array([[0.0], [1.0], [5.0], [2.0]]), 3).tolist()
        [0, 2, 3]
    """
    norms = sq_norms(x)

    def body(t, carry):
        nearest, order = carry
        j = jnp.where(t == 0, first, jnp.argmax(nearest)).astype(jnp.int32)
        centre = x[j]
        cross = jnp.matmul(x, centre, precision=jax.lax.Precision.HIGHEST)
        distance = jnp.maximum(norms + norms[j] - 2 * cross, 0)
        return jnp.minimum(nearest, distance).at[j].set(-1), order.at[t].set(j)

    start = jnp.full(x.shape[0], jnp.inf, x.dtype)
    _, order = jax.lax.fori_loop(0, k, body, (start, jnp.zeros((k,), jnp.int32)))
    return order


def sensitivity_study(instance, k: int, fractions, *, num_steps: int | None = None,
                      num_seeds: int, key,
                      dtype=jnp.float32, roundings=("cp", "independent")) -> dict:
    """Coverage and sensitivity of greedy and of stable(reg) with two roundings.

    The stability audit of :func:`jaxsample.subset.stable_max_coverage` against this module's
    greedy peer, on a :class:`jaxsample.datasets.CoverageInstance` (shared by the benchmark, the
    example and the demo; host-side, not jittable).

    ``reg = c · cov_greedy / (k log(m/k))`` for each fraction ``c`` in ``fractions``: the
    relaxation may give up at most a fraction c of greedy's coverage to the entropy. The base
    instance and every neighbour are solved; each rounding uses the same ``num_seeds`` common keys
    on the instance and on its neighbours.

    Returns:
        ``{"greedy": {...}, "stable": [{...} per fraction]}`` with coverages (mean over seeds for
        the stable subsets), sensitivities (mean over neighbours, and over seeds), the relaxed
        ``‖x*(I) − x*(I′)‖₁``, the solver gaps on the base instance (absolute and relative) and
        whether every relaxation met its relative-gap tolerance (``num_steps=None``: the cap
        chosen from reg, see :func:`jaxsample.subset.max_coverage_relaxation`).
    """
    m = instance.num_sets
    incidence = PaddedIncidence.from_indices(instance.indices, num_sets=m)
    weights = [jnp.asarray(w, dtype) for w in (instance.weights, *instance.neighbours)]
    # plain calls in loops: each compiled piece (relaxation, fit, sampler, greedy) is compiled
    # once for these shapes and reused, which is cheaper here than compiling batched versions
    greedy_masks, greedy_cover = [], None
    for w in weights:
        mask, info = greedy_max_coverage(incidence, k, weights=w)
        greedy_masks.append(np.asarray(mask))
        greedy_cover = float(info.coverage) if greedy_cover is None else greedy_cover
    greedy_masks = np.stack(greedy_masks)
    greedy_changes = (greedy_masks[1:] != greedy_masks[0]).sum(axis=1)

    regs = np.asarray(fractions) * greedy_cover / (k * math.log(m / k))
    seeds = [jax.random.fold_in(key, s) for s in range(num_seeds)]
    problems = len(weights)
    xs = np.zeros((len(regs), problems, m))
    gaps = np.zeros((len(regs), problems))
    relative_gaps = np.zeros((len(regs), problems))
    relaxed = np.zeros((len(regs), problems), bool)
    values = np.zeros((len(regs), problems))
    converged = np.zeros((len(regs), problems), bool)
    cp = np.zeros((num_seeds, len(regs), problems, m), bool)
    independent = np.zeros_like(cp)
    for r, reg in enumerate(regs):
        for j, w in enumerate(weights):
            x, info = max_coverage_relaxation(incidence, k, reg=float(reg), weights=w,
                                                     num_steps=num_steps)
            theta, fit = fit_weights(x, k)
            xs[r, j], gaps[r, j], values[r, j] = x, info.gap, info.relaxed_value
            relative_gaps[r, j], relaxed[r, j] = info.relative_gap, bool(info.solver.converged)
            converged[r, j] = bool(fit.solver.converged)
            for s, seed in enumerate(seeds):
                if "cp" in roundings:
                    cp[s, r, j] = conditional_poisson(seed, theta, k)[0]
                if "independent" in roundings:
                    independent[s, r, j] = correlated_k_subset(
                        seed, x, k, scheme="independent")[0]
    base_weights = instance.weights
    padded = np.where(instance.indices < 0, m, instance.indices)

    def cover(masks):                       # host: (..., m) masks -> coverage of the base
        extended = np.concatenate([masks, np.zeros(masks.shape[:-1] + (1,), bool)], axis=-1)
        return (extended[..., padded].any(axis=-1) * base_weights).sum(axis=-1)

    kinds = np.array(instance.kinds)
    stable = []
    for r, (c, reg) in enumerate(zip(fractions, regs, strict=True)):
        row = {"fraction": float(c), "reg": float(reg), "gap": float(gaps[r, 0]),
               "relative_gap": float(relative_gaps[r, 0]),
               "relaxation_converged": bool(np.all(relaxed[r])),
               "relaxed_value": float(values[r, 0]),
               "relaxed_distance": float(np.abs(xs[r, 1:] - xs[r, 0]).sum(axis=1).mean()),
               "fit_converged": bool(np.all(converged[r]))}
        for name, masks in (("cp", cp), ("independent", independent)):
            if name not in roundings:
                continue
            masks = masks[:, r]
            changes = (masks[:, 1:] != masks[:, :1]).sum(axis=2).mean(axis=0)   # per neighbour
            row[f"{name}_coverage"] = float(cover(masks[:, 0]).mean())
            row[f"{name}_sensitivity"] = float(changes.mean())
            row[f"{name}_max_sensitivity"] = float(changes.max())
            row[f"{name}_by_kind"] = {kind: float(changes[kinds == kind].mean())
                                      for kind in sorted(set(instance.kinds))}
            row[f"{name}_size"] = float(masks[:, 0].sum(axis=1).mean())
        stable.append(row)
    greedy_row = {"coverage": greedy_cover, "sensitivity": float(greedy_changes.mean()),
                  "max_sensitivity": float(greedy_changes.max()),
                  "by_kind": {kind: float(greedy_changes[kinds == kind].mean())
                              for kind in sorted(set(instance.kinds))},
                  "changes": greedy_changes.tolist()}
    return {"greedy": greedy_row, "stable": stable, "kinds": instance.kinds}


def coverage_figure(study: dict, path: Path, title: str) -> Path:
    """Coverage (relative to greedy) against sensitivity, one point per reg and rounding."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    greedy = study["greedy"]
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for name, label, marker in (("cp", "stable, conditional Poisson", "o"),
                                ("independent", "stable, independent thresholds", "s")):
        if f"{name}_coverage" not in study["stable"][0]:
            continue
        xs = [row[f"{name}_sensitivity"] for row in study["stable"]]
        ys = [row[f"{name}_coverage"] / greedy["coverage"] for row in study["stable"]]
        ax.plot(xs, ys, marker=marker, label=label)
        for x, y, row in zip(xs, ys, study["stable"], strict=True):
            ax.annotate(f"c={row['fraction']:g}", (x, y), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.plot([greedy["sensitivity"]], [1.0], marker="*", markersize=12, linestyle="none",
            color="k", label="greedy (deterministic)")
    ax.axhline(0.95, color="grey", linewidth=0.8, linestyle=":",
               label="95% of greedy's coverage")
    ax.set_xlabel("sensitivity  E |A(I) Δ A(I′)|  (common seeds)")
    ax.set_ylabel("coverage / greedy coverage")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
