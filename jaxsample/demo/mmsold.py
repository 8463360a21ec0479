"""Demo section: MM-SOLD vs naive smoothed Langevin (and σ-CFDM) on the circle and checkerboard."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport

CIRCLE_BANDWIDTH, CIRCLE_SMOOTHING = 0.1, 0.2


def _radius_stats(radius, probs=None):
    probs = np.full(radius.shape, 1 / radius.size) if probs is None else probs
    mean = float(probs @ radius)
    return mean, float(np.sqrt(probs @ radius**2 - mean**2))


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    import jaxsample
    from jaxsample.datasets import checkerboard
    from jaxsample.diagnostics import sliced_wasserstein
    from jaxsample.particles import cfdm_sample, exact_tilt, sample_kde, smoothed_langevin

    keys = jax.random.split(key, 8)
    angles = np.arange(12) * (2 * np.pi / 12)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    rows, clouds = [], {}

    tilt = exact_tilt(circle, bandwidth=CIRCLE_BANDWIDTH, smoothing=CIRCLE_SMOOTHING,
                      grid_size=61, num_quadrature=16)
    grid_radius = np.linalg.norm(tilt.grid, axis=1)
    cell = tilt.cell_volume
    for name, log_density in [("exact tilted law (quadrature)", tilt.log_density),
                              ("naive e^{-V} (quadrature)", tilt.naive_log_density)]:
        rows.append(["circle", name, *_radius_stats(grid_radius, np.exp(log_density) * cell),
                     None, None])
    kwargs = dict(bandwidth=CIRCLE_BANDWIDTH, smoothing=CIRCLE_SMOOTHING,
                  num_smoothing_samples=16, step_size=1e-3)
    for name, make in [("MM-SOLD", jaxsample.mmsold), ("naive smoothed Langevin",
                                                        smoothed_langevin)]:
        alg = make(jnp.asarray(circle), **kwargs)
        start = sample_kde(keys[1], circle, 800, bandwidth=CIRCLE_BANDWIDTH)
        state, info = jaxsample.run(keys[0], alg, alg.init(start, rng_key=keys[7]), 200)
        z = np.asarray(state.positions)
        clouds[("circle", name)] = z
        rows.append(["circle", name, *_radius_stats(np.linalg.norm(z, axis=1)),
                     float(info.cov_residual[-1]), None])

    data = checkerboard(keys[2], 500)
    target = checkerboard(keys[3], 4000)
    board = dict(bandwidth=0.02, smoothing=0.02, num_smoothing_samples=2,
                 step_size=5e-4)
    for name, make in [("MM-SOLD", jaxsample.mmsold), ("naive smoothed Langevin",
                                                        smoothed_langevin)]:
        alg = make(data, **board)
        start = sample_kde(keys[5], data, 600, bandwidth=board["bandwidth"])
        state, info = jaxsample.run(keys[4], alg, alg.init(start, rng_key=keys[7]), 150)
        clouds[("checkerboard", name)] = np.asarray(state.positions)
        rows.append(["checkerboard", name, None, None, float(info.cov_residual[-1]),
                     float(sliced_wasserstein(keys[6], state.positions, target))])
    cfdm, _ = cfdm_sample(keys[4], data, num_samples=600, smoothing=0.02, num_steps=100,
                          num_smoothing_samples=2)
    clouds[("checkerboard", "σ-CFDM")] = np.asarray(cfdm)
    rows.append(["checkerboard", "σ-CFDM (100 steps)", None, None, None,
                 float(sliced_wasserstein(keys[6], cfdm, target))])
    rows.append(["checkerboard", "training data (reference)", None, None, None,
                 float(sliced_wasserstein(keys[6], data, target))])

    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    panels = [("circle", "MM-SOLD"), ("circle", "naive smoothed Langevin"),
              ("checkerboard", "MM-SOLD"), ("checkerboard", "σ-CFDM")]
    for ax, (case, name) in zip(axes, panels, strict=True):
        z = clouds[(case, name)]
        ax.scatter(z[:, 0], z[:, 1], s=2, alpha=0.5, label="particles")
        train = circle if case == "circle" else np.asarray(data)
        ax.scatter(train[:, 0], train[:, 1], s=8 if case == "circle" else 2, c="k",
                   label="training data")
        ax.set_title(f"{case}: {name}")
        ax.set_aspect("equal")
    axes[0].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    path = Path(outdir) / "mmsold.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    note = (f"Circle: sigma_g={CIRCLE_BANDWIDTH}, s={CIRCLE_SMOOTHING}, exact tilt "
            f"Lambda = {tilt.quadratic[0, 0]:.2f} I (negative: the tilt pushes mass back out). "
            "MM-SOLD holds mean and covariance exactly at every step (cov residual ~ round-off) "
            "and its radius statistics follow the tilted law; the naive dynamics drifts to "
            "e^{-V}. Checkerboard: 500 training points, B=600, 150 steps.")
    return SectionReport(
        headers=["case", "method", "mean radius", "radius sd", "cov residual",
                 "sliced W2 to target"],
        rows=rows, figures=[path], note=note)


SECTION = Section(name="mmsold", title="MM-SOLD: moment-matched score-smoothed Langevin",
                  run=_run, order=50)
