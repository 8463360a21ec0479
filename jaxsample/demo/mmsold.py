"""Demo section: MM-SOLD on the 12-point circle against the exact tilted and the naive laws."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport, progress

CIRCLE_BANDWIDTH, CIRCLE_SMOOTHING = 0.1, 0.2


def _radius_stats(radius, probs=None):
    probs = np.full(radius.shape, 1 / radius.size) if probs is None else probs
    mean = float(probs @ radius)
    return mean, float(np.sqrt(probs @ radius**2 - mean**2))


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    import jaxsample
    from jaxsample.particles import exact_tilt, sample_kde

    keys = jax.random.split(key, 3)
    angles = np.arange(12) * (2 * np.pi / 12)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    rows = []
    tilt, grid = exact_tilt(circle, bandwidth=CIRCLE_BANDWIDTH, smoothing=CIRCLE_SMOOTHING,
                            grid_size=41, num_quadrature=10)
    grid_radius = np.linalg.norm(np.asarray(grid.grid), axis=1)
    cell_volume = float(grid.cell_volume)
    laws = {}
    for name, log_density in [("exact tilted law (quadrature)", grid.log_density),
                              ("naive exp(−V) (quadrature)", grid.naive_log_density)]:
        laws[name] = np.exp(np.asarray(log_density, np.float64)) * cell_volume
        rows.append([name, *_radius_stats(grid_radius, laws[name]), None])
    alg = jaxsample.mmsold(jnp.asarray(circle), bandwidth=CIRCLE_BANDWIDTH,
                           smoothing=CIRCLE_SMOOTHING, num_smoothing_samples=8, step_size=1e-3)
    start, _ = sample_kde(keys[0], circle, num_samples=400, bandwidth=CIRCLE_BANDWIDTH)
    state, info = jaxsample.run(keys[1], alg, alg.init(start, rng_key=keys[2]), 100,
                                progress=progress("MM-SOLD, B = 400 particles", every=25))
    z = np.asarray(state.positions)
    rows.append(["MM-SOLD (B = 400, 100 steps)", *_radius_stats(np.linalg.norm(z, axis=1)),
                 float(info.cov_residual.max())])

    radius = np.linalg.norm(z, axis=1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    left.scatter(z[:, 0], z[:, 1], s=2, alpha=0.5, label="MM-SOLD particles")
    left.scatter(circle[:, 0], circle[:, 1], s=12, c="k", label="training data (12 points)")
    left.set_aspect("equal")
    left.set_xlabel("z₁")
    left.set_ylabel("z₂")
    left.set_title("400 new points from 12 training points", fontsize=10)
    left.legend(loc="upper right", fontsize=7)
    # the radius's law: the particles' empirical CDF against the two laws' radial CDFs (the
    # quadrature cells sorted by radius); the legend gives each mean radius
    order = np.argsort(grid_radius)
    mean_radius = float(radius.mean())
    right.plot(np.sort(radius), np.arange(1, radius.size + 1) / radius.size, "C0-", lw=2.5,
               alpha=0.6, label=f"MM-SOLD particles (mean {mean_radius:.3f})")
    for (name, probs), style in zip(laws.items(), ("k-", "C3--"), strict=True):
        cdf = np.cumsum(probs[order]) / probs.sum()
        mean = float(probs @ grid_radius / probs.sum())
        right.step(grid_radius[order], cdf, style, where="post", lw=1.2,
                   label=f"{name.replace(' (quadrature)', '')} (mean {mean:.3f})")
    right.set_xlim(0.6, 1.4)
    right.set_xlabel("radius r = |z|")
    right.set_ylabel("P(radius ≤ r)")
    right.set_title("the radius follows the tilted law, not the naive one", fontsize=10)
    right.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    path = Path(outdir) / "mmsold.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    note = (f"sigma_g={CIRCLE_BANDWIDTH}, s={CIRCLE_SMOOTHING}: exact tilt "
            f"Lambda = {float(tilt.quadratic[0, 0]):.2f} I (negative: it pushes mass back out). "
            "MM-SOLD "
            "holds mean and covariance exactly at every step (max cov residual ~ round-off) and "
            "its radius statistics follow the tilted law, not the naive e^{-V}; the checkerboard "
            "and σ-CFDM comparison is in bench/results_mmsold.md.")
    return SectionReport(headers=["law / method", "mean radius", "radius sd",
                                  "max cov residual"],
                         rows=rows, figures=[path], note=note)


SECTION = Section(name="mmsold", title="MM-SOLD: moment-matched score-smoothed Langevin",
                  run=_run, order=50)
