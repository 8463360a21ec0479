"""Demo section: stable maximum coverage, coverage against sensitivity across ``reg``.

A disc-cover instance (points in the unit square, each set the points within a radius of a centre:
many near-equal sets, where greedy's picks hinge on small differences) and its one-element
neighbours. For each entropic weight ``reg``: the expected coverage of the stable algorithm's subset
and its sensitivity ``E_seed |A(I) Δ A(I′)|`` over common seeds (conditional Poisson rounding);
greedy (deterministic) is the unstable reference point. The example and the benchmark add the
independent-threshold rounding.

The instance builders and :func:`sensitivity_study` are shared with ``examples/stable_coverage.py``
and ``bench/bench_coverage.py``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport

__all__ = ["CoverageInstance", "disc_instance", "random_instance", "sensitivity_study"]


class CoverageInstance(NamedTuple):
    """An instance in padded-index form and its one-element neighbours.

    Attributes:
        indices: ``(n, d)`` int32 set ids per element, padded with -1; the last rows are the
            elements that add-neighbours add (weight 0 in the base instance).
        num_sets: m.
        weights: ``(n,)`` base element weights (1, or 0 for the not-yet-added elements).
        neighbours: ``(N, n)`` weights of the neighbours: one element deleted (its weight set to
            0) or one added (its weight set to 1).
        kinds: ``N`` strings, ``"delete"`` or ``"add"``.
    """

    indices: np.ndarray
    num_sets: int
    weights: np.ndarray
    neighbours: np.ndarray
    kinds: tuple


def _pad_rows(rows, width):
    out = np.full((len(rows), width), -1, np.int32)
    for e, row in enumerate(rows):
        row = np.unique(row)[:width]
        out[e, :row.size] = row
    return out


def host_greedy(indices, num_sets, weights, steps):
    """Greedy maximum coverage on the host (NumPy, O(nnz) in all) with each step's runner-up.

    Same rule as :func:`jaxsample.subset.greedy_max_coverage` (ties to the lowest id). Used to
    build instances: the runner-ups locate the picks that a one-element change can flip.

    Returns:
        ``(order, gains, runner_up, runner_gains)``, each ``(steps,)``.
    """
    flat = indices.reshape(-1)
    rows = np.repeat(np.arange(indices.shape[0]), indices.shape[1])
    keep = flat >= 0
    flat, rows = flat[keep], rows[keep]
    by_set = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[by_set], np.arange(num_sets + 1))
    gains = np.bincount(flat, weights[rows], minlength=num_sets).astype(np.float64)
    covered = np.zeros(indices.shape[0], bool)
    chosen = np.zeros(num_sets, bool)
    order, picked, runner, runner_gain = [], [], [], []
    for _ in range(steps):
        masked = np.where(chosen, -1.0, gains)
        best = int(np.argmax(masked))
        second = np.where(np.arange(num_sets) == best, -1.0, masked)
        order.append(best)
        picked.append(masked[best])
        runner.append(int(np.argmax(second)))
        runner_gain.append(second[runner[-1]])
        chosen[best] = True
        members = rows[by_set[starts[best]:starts[best + 1]]]
        new = members[~covered[members]]
        covered[new] = True
        sub = indices[new]
        sub = sub[sub >= 0]
        np.subtract.at(gains, sub, np.repeat(weights[new], (indices[new] >= 0).sum(axis=1)))
    return (np.array(order), np.array(picked), np.array(runner), np.array(runner_gain))


def _neighbours(indices, num_sets, k, rng, num_neighbours, added_rows):
    """Random and greedy-critical one-element neighbours of a unit-weight instance.

    * ``delete``: an element of a contender set (greedy's picks k/2 .. 2k), deleted;
    * ``add``: the rows in ``added_rows`` (elements of contender sets), added;
    * ``critical``: at a greedy step whose pick and runner-up differ by at most one unit of gain
      (and the tie rule lets one element decide) and whose runner-up greedy never picks, an
      element added to the runner-up alone. This flips greedy's pick there and changes its set:
      the adversarial neighbours a sensitivity (a sup over neighbours) is about. Up to a third of
      the neighbours, at the closest steps.
    """
    n = indices.shape[0]
    base = np.ones(n)
    order, gains, runner, runner_gains = host_greedy(indices, num_sets, base,
                                                     min(2 * k, num_sets))
    contenders = order[k // 2:]
    margin = gains[:k] - runner_gains[:k]
    close = (margin < 1) | ((margin == 1) & (runner[:k] < order[:k]))
    flips = np.flatnonzero(close & ~np.isin(runner[:k], order[:k]))   # the set, not the order
    flips = flips[np.argsort(margin[flips], kind="stable")][:num_neighbours // 3]
    critical_rows = [np.array([runner[t]]) for t in flips]
    num_add = min(len(added_rows), (num_neighbours - len(critical_rows)) // 2)
    added_rows = list(added_rows[:num_add]) + critical_rows
    num_delete = num_neighbours - len(added_rows)
    touches = np.isin(indices, contenders).any(axis=1)
    deleted = rng.choice(np.flatnonzero(touches), size=num_delete, replace=False)
    all_indices = np.concatenate([indices, _pad_rows(added_rows, indices.shape[1])])
    weights = np.r_[base, np.zeros(len(added_rows))]
    neighbours, kinds = [], []
    for e in deleted:
        w = weights.copy()
        w[e] = 0.0
        neighbours.append(w)
        kinds.append("delete")
    for j in range(len(added_rows)):
        w = weights.copy()
        w[n + j] = 1.0
        neighbours.append(w)
        kinds.append("add" if j < num_add else "critical")
    return all_indices, weights, np.stack(neighbours), tuple(kinds), contenders


def disc_instance(seed: int, num_elements: int, num_sets: int, k: int, *, mean_degree=2.5,
                  max_degree: int = 8, num_neighbours: int = 8) -> CoverageInstance:
    """Points uniform in the unit square; set i holds the points within ``r_i`` of centre ``c_i``.

    Radii are ``r̄·U(0.8, 1.2)`` with ``r̄`` such that a point lies in ``mean_degree`` discs on
    average; a point keeps its ``max_degree`` nearest containing discs. Neighbours (see
    ``_neighbours``): deleted points of contender discs (greedy's picks k/2 .. 2k), points added
    uniformly inside contender discs, and greedy-critical additions.
    """
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points = rng.random((num_elements, 2))
    centres = rng.random((num_sets, 2))
    mean_radius = math.sqrt(mean_degree / (math.pi * num_sets))
    radii = mean_radius * rng.uniform(0.8, 1.2, num_sets)
    tree = cKDTree(centres)

    def rows_of(pts):
        dist, idx = tree.query(pts, k=max_degree, distance_upper_bound=radii.max())
        safe = np.minimum(idx, num_sets - 1)
        inside = (idx < num_sets) & (dist <= radii[safe])
        return np.where(inside, idx, -1).astype(np.int32)

    indices = rows_of(points)
    contenders = host_greedy(indices, num_sets, np.ones(num_elements), min(2 * k, num_sets))[0]
    contenders = contenders[k // 2:]
    num_add = num_neighbours // 2
    discs = rng.choice(contenders, size=num_add)
    angle = rng.uniform(0, 2 * math.pi, num_add)
    radius = radii[discs] * np.sqrt(rng.random(num_add))
    added = centres[discs] + radius[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    added_rows = [r[r >= 0] for r in rows_of(added)]
    all_indices, weights, neighbours, kinds, _ = _neighbours(indices, num_sets, k, rng,
                                                             num_neighbours, added_rows)
    return CoverageInstance(all_indices, num_sets, weights, neighbours, kinds)


def random_instance(seed: int, num_elements: int, num_sets: int, k: int, *, mean_degree=3.0,
                    max_degree: int = 8, skew: float = 1.0,
                    num_neighbours: int = 8) -> CoverageInstance:
    """A random set system with skewed set sizes: element e joins ``1 + Poisson(mean − 1)`` sets
    (at most ``max_degree``) drawn with probabilities ``∝ exp(skew·N(0, 1))``. Neighbours as for
    :func:`disc_instance`; an added element joins two contender sets."""
    rng = np.random.default_rng(seed)
    popularity = np.exp(skew * rng.normal(size=num_sets))
    cdf = np.cumsum(popularity / popularity.sum())
    degree = np.minimum(1 + rng.poisson(mean_degree - 1, num_elements), max_degree)
    picks = np.minimum(np.searchsorted(cdf, rng.random((num_elements, max_degree))),
                       num_sets - 1).astype(np.int32)
    picks = np.sort(np.where(np.arange(max_degree)[None, :] < degree[:, None], picks,
                             num_sets), axis=1)
    repeated = np.zeros_like(picks, bool)
    repeated[:, 1:] = picks[:, 1:] == picks[:, :-1]
    indices = np.where(repeated | (picks >= num_sets), -1, picks).astype(np.int32)
    contenders = host_greedy(indices, num_sets, np.ones(num_elements), min(2 * k, num_sets))[0]
    contenders = contenders[k // 2:]
    num_add = num_neighbours // 2
    added_rows = [rng.choice(contenders, size=2, replace=False) for _ in range(num_add)]
    all_indices, weights, neighbours, kinds, _ = _neighbours(indices, num_sets, k, rng,
                                                             num_neighbours, added_rows)
    return CoverageInstance(all_indices, num_sets, weights, neighbours, kinds)


def sensitivity_study(instance: CoverageInstance, k: int, fractions, *, num_steps: int,
                      num_seeds: int, key, dtype=jnp.float32,
                      roundings=("cp", "independent")) -> dict:
    """Coverage and sensitivity of greedy and of stable(reg) with two roundings.

    ``reg = c · cov_greedy / (k log(m/k))`` for each fraction ``c`` in ``fractions``: the
    relaxation may give up at most a fraction c of greedy's coverage to the entropy. The base
    instance and every neighbour are solved; each rounding uses the same ``num_seeds`` common keys
    on the instance and on its neighbours.

    Returns:
        ``{"greedy": {...}, "stable": [{...} per fraction]}`` with coverages (mean over seeds for
        the stable subsets), sensitivities (mean over neighbours, and over seeds), the relaxed
        ``‖x*(I) − x*(I′)‖₁`` and the solver gaps.
    """
    from jaxsample import subset

    m = instance.num_sets
    incidence = subset.sparse_incidence(instance.indices, m)
    weights = [jnp.asarray(w, dtype) for w in (instance.weights, *instance.neighbours)]
    # plain calls in loops: each compiled piece (relaxation, fit, sampler, greedy) is compiled
    # once for these shapes and reused, which is cheaper here than compiling batched versions
    greedy_masks, greedy_cover = [], None
    for w in weights:
        mask, info = subset.greedy_max_coverage(incidence, k, weights=w)
        greedy_masks.append(np.asarray(mask))
        greedy_cover = float(info.coverage) if greedy_cover is None else greedy_cover
    greedy_masks = np.stack(greedy_masks)
    greedy_changes = (greedy_masks[1:] != greedy_masks[0]).sum(axis=1)

    regs = np.asarray(fractions) * greedy_cover / (k * math.log(m / k))
    seeds = [jax.random.fold_in(key, s) for s in range(num_seeds)]
    problems = len(weights)
    xs = np.zeros((len(regs), problems, m))
    gaps = np.zeros((len(regs), problems))
    values = np.zeros((len(regs), problems))
    converged = np.zeros((len(regs), problems), bool)
    cp = np.zeros((num_seeds, len(regs), problems, m), bool)
    independent = np.zeros_like(cp)
    for r, reg in enumerate(regs):
        for j, w in enumerate(weights):
            x, info = subset.max_coverage_relaxation(incidence, k, reg=float(reg), weights=w,
                                                     num_steps=num_steps)
            theta, fit = subset.fit_weights(x, k)
            xs[r, j], gaps[r, j], values[r, j] = x, info.gap, info.relaxed_value
            converged[r, j] = bool(fit.solver.converged)
            for s, seed in enumerate(seeds):
                if "cp" in roundings:
                    cp[s, r, j] = subset.conditional_poisson(seed, theta, k)
                if "independent" in roundings:
                    independent[s, r, j] = subset.correlated_k_subset(
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
            color="k", label="greedy")
    ax.axhline(0.95, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("sensitivity  E |A(I) Δ A(I′)|  (common seeds)")
    ax.set_ylabel("coverage / greedy coverage")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    k = 8
    instance = disc_instance(0, 3000, 120, k, num_neighbours=6)
    study = sensitivity_study(instance, k, (0.01, 0.1), num_steps=600, num_seeds=32, key=key,
                              roundings=("cp",))
    greedy = study["greedy"]
    rows = [["greedy", "-", greedy["coverage"], greedy["sensitivity"],
             greedy["max_sensitivity"], "-"]]
    for row in study["stable"]:
        rows.append([f"stable, c={row['fraction']:g}", row["reg"], row["cp_coverage"],
                     row["cp_sensitivity"], row["cp_max_sensitivity"], row["relaxed_distance"]])
    path = coverage_figure(study, Path(outdir) / "coverage_sensitivity.png",
                           f"disc cover, n=3000, m=120, k={k}, 6 neighbours, 32 seeds")
    note = ("reg = c·cov_greedy/(k log(m/k)); sensitivity = E_seed|A(I) Δ A(I′)| with common "
            "seeds (greedy: |A(I) Δ A(I′)|), mean and max over 6 one-element neighbours (two of "
            "them flip a close greedy pick); conditional Poisson rounding, 600 mirror steps.")
    return SectionReport(["method", "reg", "coverage", "sensitivity (mean)", "sensitivity (max)",
                          "‖x*(I) − x*(I′)‖₁"], rows, [path], note)


SECTION = Section(name="coverage", title="Stable maximum coverage (coverage vs sensitivity)",
                  run=_run, order=75)
