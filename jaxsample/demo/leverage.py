"""Demo section: Lev (greedy ridge-leverage selection) beside k-center and random picks.

Imbalanced clustered 2-D data (Zipf cluster sizes) mapped to random Fourier features (the feature
map of a Gaussian kernel), then ``k`` rows chosen by Lev (:func:`jaxsample.subset.leverage_select`),
k-center greedy and uniform random sampling. The table reports the Vendi score of each subset
(cosine kernel on the features, i.e. about the Gaussian kernel on the points), the clusters hit and
the log-det objective; the figure shows the picks and Vendi against ``k``.

The data (:func:`jaxsample.datasets.imbalanced_clusters`,
:func:`jaxsample.datasets.random_fourier_features`) and the k-center peer
(:func:`jaxsample.subset.baselines.k_center_greedy`) are the library's, shared with
``examples/lev_selection.py`` and ``bench/bench_leverage.py``.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from jaxsample.datasets import host_generator, imbalanced_clusters, random_fourier_features
from jaxsample.demo import Section, SectionReport
from jaxsample.subset import leverage_select, vendi_score
from jaxsample.subset.baselines import k_center_greedy

__all__ = ["SECTION"]


def _log_det(rows, ridge):
    return float(np.linalg.slogdet(ridge * np.eye(rows.shape[1]) + rows.T @ rows)[1])


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    key_data, key_features, key_random = jax.random.split(key, 3)
    num_points, num_clusters, k, ridge = 2000, 12, 48, 1e-2
    points, labels = imbalanced_clusters(key_data, num_points, 2, num_clusters=num_clusters,
                                         spread=0.75, centre_scale=3.0, exponent=1.2)
    features = random_fourier_features(key_features, points, 64, bandwidth=0.5)
    unit = features / np.linalg.norm(features, axis=1, keepdims=True)
    picks = {
        "Lev (greedy)": np.asarray(leverage_select(features, k, ridge=ridge, normalize=True)[0]),
        "k-center": np.asarray(k_center_greedy(unit, k)),
        "random": host_generator(key_random).permutation(num_points)[:k],
    }
    sizes = (1, 16, k)  # one row has Vendi 1 by definition
    curves = {name: [1.0] + [float(vendi_score(features[idx[:m]])[0]) for m in sizes[1:]]
              for name, idx in picks.items()}
    rows = []
    for name, idx in picks.items():
        hit = len(np.unique(np.asarray(labels)[idx]))
        rows.append([name, curves[name][-1], f"{hit}/{num_clusters}",
                     _log_det(unit[idx].astype(np.float64), ridge)])

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.scatter(points[:, 0], points[:, 1], s=2, c="0.8")
    for (name, idx), marker in zip(picks.items(), ("o", "s", "x"), strict=True):
        left.scatter(points[idx, 0], points[idx, 1], s=18, marker=marker, label=name)
        right.plot(sizes, curves[name], marker=marker, label=name)
    left.set(title=f"{k} picks of {num_points} points ({num_clusters} Zipf clusters)",
             xlabel="x₁", ylabel="x₂")
    left.legend(fontsize=8)
    right.set(title="diversity of the first k picks", xlabel="k (rows picked)",
              ylabel="Vendi score (cosine on RFF features)", xscale="log")
    right.legend(fontsize=8)
    fig.tight_layout()
    path = Path(outdir) / "leverage_selection.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    note = (f"k = {k}, ridge = {ridge}; features: 64 random Fourier features (Gaussian kernel, "
            "bandwidth 0.5) of the 2-D points, rows normalised; log det = log det(λI + X_SᵀX_S) "
            "on the unit feature rows.")
    return SectionReport(["method", "Vendi", "clusters hit", "log det"], rows, [path], note)


SECTION = Section(name="leverage", title="Lev: diverse subsets by ridge-leverage selection",
                  run=_run, order=70)
