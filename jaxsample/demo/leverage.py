"""Demo section: Lev (greedy ridge-leverage selection) beside k-center and random picks.

Imbalanced clustered 2-D data (Zipf cluster sizes) mapped to random Fourier features (the feature
map of a Gaussian kernel), then ``k`` rows chosen by Lev (:func:`jaxsample.subset.leverage_select`),
k-center greedy and uniform random sampling. The table reports the Vendi score of each subset
(cosine kernel on the features, i.e. about the Gaussian kernel on the points), the clusters hit and
the log-det objective; the figure shows the picks and Vendi against ``k``.

The data generator and the k-center peer live here so that ``examples/lev_selection.py`` and
``bench/bench_leverage.py`` use the same ones.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport
from jaxsample.kernels.pairwise import sq_norms
from jaxsample.subset import leverage_select, vendi_score

__all__ = ["SECTION", "imbalanced_clusters", "k_center_greedy", "random_fourier_features"]


def _generator(key) -> np.random.Generator:
    """A NumPy generator seeded by a JAX key (data generation needs no compilation)."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())


def imbalanced_clusters(key, num_points: int, dim: int, *, num_clusters: int = 50,
                        exponent: float = 1.0, spread: float = 0.5, centre_scale: float = 1.0,
                        dtype=np.float32):
    """Gaussian clusters with Zipf sizes: cluster ``c`` holds a share ``∝ 1/(c + 1)^exponent``.

    Centres are ``centre_scale`` times independent unit vectors (``dim >= 3``) or ``N(0, I)``
    points (``dim < 3``); points are ``centre + spread · N(0, I/dim)``. Every cluster has at least
    one point. Rows come in random order (as in a corpus, so consecutive batches mix clusters).
    Drawn with NumPy from a generator seeded by ``key`` (same key, same points).

    Returns:
        ``(points (num_points, dim), labels (num_points,) int32)`` NumPy arrays.

    Example:
        >>> import jax
        >>> x, labels = imbalanced_clusters(jax.random.key(0), 1000, 8, num_clusters=5)
        >>> x.shape, np.bincount(labels).tolist()
        ((1000, 8), [441, 218, 145, 109, 87])
    """
    share = 1.0 / np.arange(1, num_clusters + 1) ** exponent
    sizes = np.maximum(1, np.floor(num_points * share / share.sum()).astype(int))
    sizes[0] += num_points - sizes.sum()
    rng = _generator(key)
    labels = rng.permutation(np.repeat(np.arange(num_clusters), sizes)).astype(np.int32)
    centres = rng.standard_normal((num_clusters, dim))
    if dim >= 3:
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = rng.standard_normal((num_points, dim), dtype=np.float32).astype(dtype)
    points *= spread / math.sqrt(dim)
    points += (centre_scale * centres).astype(dtype)[labels]
    return points, labels


def random_fourier_features(key, points, num_features: int, bandwidth: float) -> np.ndarray:
    """``φ(x) = √(2/m) cos(Wx + b)``, ``W ~ N(0, I/bandwidth²)``, ``b ~ U[0, 2π)`` (NumPy).

    ``φ(x)·φ(y) ≈ exp(−‖x − y‖² / (2 bandwidth²))`` (Rahimi & Recht 2007), so cosine geometry on
    the features is about Gaussian-kernel geometry on the points.
    """
    rng = _generator(key)
    points = np.asarray(points)
    weights = rng.standard_normal((points.shape[1], num_features)) / bandwidth
    phase = rng.uniform(0.0, 2 * math.pi, num_features)
    features = math.sqrt(2.0 / num_features) * np.cos(points @ weights + phase)
    return features.astype(points.dtype)


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
        "random": _generator(key_random).permutation(num_points)[:k],
    }
    sizes = (1, 16, k)  # one row has Vendi 1 by definition
    curves = {name: [1.0] + [float(vendi_score(features[idx[:m]])) for m in sizes[1:]]
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
    left.set(title=f"{k} picks of {num_points} points ({num_clusters} Zipf clusters)")
    left.legend(fontsize=8)
    right.set(xlabel="k", ylabel="Vendi score (cosine on RFF features)", xscale="log")
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
