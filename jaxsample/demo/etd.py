"""Demo section: ETD on a 2-D four-mode mixture, next to BlackJAX SVGD.

Entropic transport descent moves 100 particles by one entropic OT plan per step towards
importance-weighted proposals. The table shows mode coverage and energy distance to exact samples,
next to BlackJAX SVGD (RBF kernel, median heuristic, Adam) when BlackJAX is installed.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport, progress


def _svgd(logdensity_fn, x0, num_steps, learning_rate):
    """BlackJAX SVGD final particles (jaxsample.particles.svgd), or None without BlackJAX."""
    try:
        import blackjax  # noqa: F401
    except ImportError:
        return None
    from jaxsample.particles import svgd

    return jax.jit(lambda x: svgd(logdensity_fn, x, num_steps=num_steps,
                                  learning_rate=learning_rate)[0])(x0)


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    import jaxsample
    from jaxsample.diagnostics import energy_distance
    from jaxsample.targets import GaussianMixture

    keys = jax.random.split(key, 6)
    target = GaussianMixture(jnp.array([[3.0, 3.0], [3.0, -3.0], [-3.0, 3.0], [-3.0, -3.0]]), 1.0)
    reference = target.sample(keys[0], 1000)
    x0 = 5.0 * jax.random.normal(keys[1], (100, 2))
    rows, clouds, mode_counts = [], {}, {}

    def timed(fn):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        return out, time.perf_counter() - t0

    def mixture_row(name, x, seconds):
        counts = np.bincount(np.asarray(target.nearest_mode(x)), minlength=4)
        rows.append(["4-mode mixture (2-D)", name, "/".join(map(str, counts)),
                     float(energy_distance(x, reference)[0]), seconds])
        clouds[name] = np.asarray(x)
        mode_counts[name] = counts

    alg = jaxsample.etd(target.logdensity, score_fn=jax.grad(target.logdensity),
                        num_proposals=10)
    meter = progress("ETD (score), 100 particles", every=10)
    (state, info), seconds = timed(lambda: jaxsample.run(keys[2], alg, alg.init(x0), 30,
                                                         progress=meter))
    mixture_row("ETD (score, 30 steps)", state.positions, seconds)
    svgd_x, seconds = timed(lambda: _svgd(target.logdensity, x0, 150, 0.1))
    if svgd_x is not None:
        mixture_row("BlackJAX SVGD (150 steps)", svgd_x, seconds)

    fig, axes = plt.subplots(1, len(clouds), figsize=(4 * len(clouds), 4), sharex=True,
                             sharey=True, squeeze=False)
    means = np.asarray(target.means)
    expected = len(x0) / len(means)  # equal weights: 25 particles per mode
    for ax, (name, x) in zip(axes[0], clouds.items(), strict=True):
        ax.scatter(reference[:, 0], reference[:, 1], s=3, alpha=0.2, color="grey",
                   label="exact draws")
        ax.scatter(x[:, 0], x[:, 1], s=8, label=f"{name}, {len(x)} particles")
        for mean, count in zip(means, mode_counts[name], strict=True):
            ax.annotate(f"{count}", mean, xytext=(0, 0), textcoords="offset points",
                        ha="center", va="center", fontsize=13, fontweight="bold", color="C3",
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
        ax.set_title(f"{name}\nparticles per mode (red; exact: {expected:g} each)", fontsize=9)
        ax.set_xlabel("x₁")
        ax.legend(loc="upper left", fontsize=7)
    axes[0, 0].set_ylabel("x₂")
    fig.tight_layout()
    path = Path(outdir) / "etd_mixture.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return SectionReport(
        headers=["target", "method", "particles per mode (exact: 25 each)", "energy dist.",
                 "time (s)"],
        rows=rows,
        figures=[path],
        note=("100 particles, M = 10 proposals each, ε = 0.1, α = 0.5, balanced coupling, 30 "
              "steps; times include compilation. The variance-collapse comparison in 50-D "
              "(ETD's DAMV 1.02 ± 0.01 over 8 systems vs SVGD's 0.09) is in bench/results_etd.md."),
    )


SECTION = Section(name="etd", title="ETD: entropic transport descent (four-mode mixture)",
                  run=_run, order=20)
