"""Lev selection on imbalanced clustered 2-D data, beside k-center and random picks.

Points come from Gaussian clusters with Zipf sizes (one cluster holds a large share, many are
tiny). They are embedded by random Fourier features (the feature map of a Gaussian kernel), so
cosine geometry on the features is Gaussian-kernel geometry on the points, and ``k`` rows are
picked by Lev (:func:`jaxsample.subset.leverage_select`, greedy and sampled), k-center greedy and
uniform random sampling. Left: the picks of Lev and random. Middle: k-center. Right: the Vendi
score of each method's first ``m`` picks against ``m`` (greedy picks are nested, so one run per
method gives the whole curve).

    python examples/lev_selection.py --out examples/out/lev_selection.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from jaxsample.datasets import imbalanced_clusters, random_fourier_features
from jaxsample.subset import leverage_sample, leverage_select, vendi_score
from jaxsample.subset.baselines import k_center_greedy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-points", type=int, default=5000)
    parser.add_argument("--num-clusters", type=int, default=20)
    parser.add_argument("--k", type=int, default=128, help="largest subset size")
    parser.add_argument("--ridge", type=float, default=1e-2)
    parser.add_argument("--num-features", type=int, default=128)
    parser.add_argument("--bandwidth", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/lev_selection.png"))
    args = parser.parse_args(argv)

    key_data, key_features, key_sample, key_random = jax.random.split(jax.random.key(args.seed), 4)
    points, labels = imbalanced_clusters(key_data, args.num_points, 2,
                                         num_clusters=args.num_clusters, spread=0.75,
                                         centre_scale=3.0, exponent=1.2)
    features = random_fourier_features(key_features, points, args.num_features, args.bandwidth)
    unit = features / np.linalg.norm(features, axis=1, keepdims=True)
    picks = {
        "Lev greedy": leverage_select(features, args.k, ridge=args.ridge, normalize=True)[0],
        "Lev sampled": leverage_sample(key_sample, features, args.k, ridge=args.ridge,
                                       normalize=True)[0],
        "k-center": k_center_greedy(unit, args.k),
        "random": np.random.default_rng(args.seed).permutation(args.num_points)[: args.k],
    }
    picks = {name: np.asarray(idx) for name, idx in picks.items()}
    sizes = [m for m in (4, 8, 16, 32, 64, 128, 256, 512) if m <= args.k]
    curves = {name: [float(vendi_score(features[idx[:m]])[0]) for m in sizes]
              for name, idx in picks.items()}
    print(f"{args.num_points} points, {args.num_clusters} Zipf clusters (largest "
          f"{np.bincount(labels).max()}, smallest {np.bincount(labels).min()}), k = {args.k}")
    for name, idx in picks.items():
        hit = len(np.unique(labels[idx]))
        print(f"{name:12s} Vendi at m = {sizes}: {np.round(curves[name], 2).tolist()}; "
              f"clusters hit {hit}/{args.num_clusters}")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    shown = (("Lev greedy", "random"), ("k-center",))
    for ax, names in zip(axes[:2], shown, strict=True):
        ax.scatter(points[:, 0], points[:, 1], s=2, c="0.8")
        for name in names:
            ax.scatter(points[picks[name], 0], points[picks[name], 1], s=14, label=name)
        ax.set(title=f"{args.k} picks of {args.num_points} points")
        ax.legend(fontsize=8)
    for name, values in curves.items():
        axes[2].plot(sizes, values, marker="o", label=name)
    axes[2].set(xlabel="m (first m picks)", ylabel="Vendi score (cosine on RFF features)",
                xscale="log", yscale="log", title="diversity against subset size")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
