"""Demo section: ETD on a 2-D four-mode mixture and on a 50-D Gaussian (variance collapse).

Entropic transport descent moves 100 particles by one entropic OT plan per step towards
importance-weighted proposals. The table shows mode coverage and energy distance to exact samples on
the mixture, and the dimension-averaged marginal variance (DAMV, ideal 1) on N(0, I_50), next to
BlackJAX SVGD (RBF kernel, median heuristic, Adam) when BlackJAX is installed.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport


def _svgd(logdensity_fn, x0, num_steps, learning_rate):
    """BlackJAX SVGD final particles (jaxsample.particles.svgd), or None without BlackJAX."""
    try:
        import blackjax  # noqa: F401
    except ImportError:
        return None
    from jaxsample.particles import svgd

    return jax.jit(lambda x: svgd(logdensity_fn, x, num_steps=num_steps,
                                  learning_rate=learning_rate))(x0)


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    import jaxsample
    from jaxsample.diagnostics import damv, energy_distance
    from jaxsample.targets import GaussianMixture

    keys = jax.random.split(key, 6)
    target = GaussianMixture(jnp.array([[3.0, 3.0], [3.0, -3.0], [-3.0, 3.0], [-3.0, -3.0]]), 1.0)
    reference = target.sample(keys[0], 1000)
    x0 = 5.0 * jax.random.normal(keys[1], (100, 2))
    rows, clouds = [], {}

    def timed(fn):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        return out, time.perf_counter() - t0

    def mixture_row(name, x, seconds):
        counts = np.bincount(np.asarray(target.nearest_mode(x)), minlength=4)
        rows.append(["4-mode mixture (2-D)", name, "/".join(map(str, counts)),
                     float(energy_distance(x, reference)), None, seconds])
        clouds[name] = np.asarray(x)

    for name, score in [("ETD (score)", jax.grad(target.logdensity)), ("ETD (score-free)", None)]:
        alg = jaxsample.etd(target.logdensity, score_fn=score)
        (state, _), seconds = timed(lambda alg=alg: jaxsample.run(keys[2], alg, alg.init(x0), 50))
        mixture_row(name, state.positions, seconds)
    svgd_x, seconds = timed(lambda: _svgd(target.logdensity, x0, 250, 0.1))
    if svgd_x is not None:
        mixture_row("BlackJAX SVGD (250 steps)", svgd_x, seconds)

    def std_normal(x):
        return -0.5 * jnp.sum(x**2)

    z0 = 2.0 * jax.random.normal(keys[3], (100, 50))
    alg = jaxsample.etd(std_normal, score_fn=jax.grad(std_normal))
    (state, info), seconds = timed(lambda: jaxsample.run(keys[4], alg, alg.init(z0), 60))
    rows.append(["N(0, I_50)", "ETD (score)", f"{int(info.num_distinct[-1])} distinct", None,
                 float(damv(state.positions)), seconds])
    svgd_z, seconds = timed(lambda: _svgd(std_normal, z0, 500, 0.05))
    if svgd_z is not None:
        rows.append(["N(0, I_50)", "BlackJAX SVGD (500 steps)", "-", None,
                     float(damv(svgd_z)), seconds])

    fig, axes = plt.subplots(1, len(clouds), figsize=(4 * len(clouds), 4), sharex=True,
                             sharey=True, squeeze=False)
    for ax, (name, x) in zip(axes[0], clouds.items(), strict=True):
        ax.scatter(reference[:, 0], reference[:, 1], s=3, alpha=0.2, color="grey", label="exact")
        ax.scatter(x[:, 0], x[:, 1], s=8, label=name)
        ax.set_title(name)
        ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    path = Path(outdir) / "etd_mixture.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return SectionReport(
        headers=["target", "method", "particles per mode", "energy dist.", "DAMV", "time (s)"],
        rows=rows,
        figures=[path],
        note=("100 particles, M = 25 proposals each, ε = 0.1, α = 0.5, balanced coupling; ETD runs "
              "50 steps (mixture) and 60 steps (50-D). Times "
              "include compilation. DAMV: dimension-averaged marginal variance, ideal 1; SVGD's "
              "kernel repulsion fades in 50-D and its variance collapses."),
    )


SECTION = Section(name="etd", title="ETD: entropic transport descent (mixture, variance collapse)",
                  run=_run, order=20)
