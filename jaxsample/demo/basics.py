"""Demo section: the run driver with a progress meter, and the diagnostics against exact samples.

Unadjusted Langevin (x ← x + h∇log p(x) + √(2h) ξ) on a correlated 2-D Gaussian, 500 chains vmapped
through :func:`jaxsample.run`. Its stationary law is biased by O(h); the distances to exact samples
show that bias growing with h, next to the noise floor of a second exact sample.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample import SamplingAlgorithm, diagnostics, run
from jaxsample._checks import check_hyperparameter
from jaxsample.demo import Section, SectionReport, progress
from jaxsample.targets import Gaussian


def _ula_kernel(key, x, score_fn, *, step_size):
    h = jnp.asarray(step_size, x.dtype)
    noise = jax.random.normal(key, x.shape, x.dtype)
    x = x + h * score_fn(x) + jnp.sqrt(2 * h) * noise
    return x, {"finite": jnp.all(jnp.isfinite(x))}


def _identity(x):
    return x


def _langevin(score_fn, step_size):
    """ULA in the library's contract: the step size is a traced leaf of the step pytree, so both
    step sizes below share one compilation of ``run``."""
    step = eqx.Partial(_ula_kernel, score_fn=score_fn,
                       step_size=check_hyperparameter("step_size", step_size))
    return SamplingAlgorithm(init=_identity, step=step)


def _keep_state(state, info):
    del info
    return state


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    target = Gaussian(jnp.array([1.0, -1.0]), jnp.array([[1.0, 0.8], [0.8, 1.0]]))
    num_chains, num_steps, keep = 256, 800, 400
    key_ref, key_floor, key_init, key_run, key_sw = jax.random.split(key, 5)
    reference = target.sample(key_ref, num_chains)
    rows = []

    def metrics(samples):
        return [float(diagnostics.energy_distance(samples, reference)[0]),
                float(diagnostics.mmd(samples, reference, bandwidth=1.0)[0]),
                float(diagnostics.sliced_wasserstein(key_sw, samples, reference,
                                                      num_projections=64)[0]),
                float(diagnostics.damv(samples, jnp.diag(target.cov))[0])]

    floor = target.sample(key_floor, num_chains)
    rows.append(["exact samples (noise floor)", *metrics(floor), "-", "-"])
    finals = {}
    # one meter for both runs (a meter is part of the compiled loop's cache key), relabelled
    # and restarted for each: the first run's clock includes the compilation both share
    meter = progress("ULA", every=num_steps // 4)
    for step_size in (0.05, 0.3):
        alg = _langevin(target.score, step_size)
        meter.label = f"ULA h={step_size}, {num_chains} chains vmapped"
        meter.start()
        x0 = 3.0 * jax.random.normal(key_init, (num_chains, 2))
        def chain(k, x, alg=alg):
            return run(k, alg, x, num_steps, transform=_keep_state, progress=meter)

        final, path = jax.vmap(chain)(jax.random.split(key_run, num_chains), x0)
        jax.effects_barrier()
        tail = path[:, -keep:, 0]  # first coordinate, last draws, (chains, draws)
        rows.append([f"ULA h={step_size}", *metrics(final),
                     float(diagnostics.ess(tail)[0]), float(diagnostics.rhat(tail)[0])])
        finals[step_size] = final

    fig, axes = plt.subplots(1, 2, figsize=(8, 4), sharex=True, sharey=True)
    for ax, (step_size, final) in zip(axes, finals.items(), strict=True):
        ax.scatter(reference[:, 0], reference[:, 1], s=4, alpha=0.4, label="exact")
        ax.scatter(final[:, 0], final[:, 1], s=4, alpha=0.4, label=f"ULA h={step_size}")
        ax.set_title(f"final draws of {num_chains} chains, ULA h = {step_size}")
        ax.set_xlabel("x₁")
        ax.legend(loc="upper left")
    axes[0].set_ylabel("x₂")
    fig.tight_layout()
    path = Path(outdir) / "basics_langevin.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return SectionReport(
        headers=["samples", "energy dist.", "MMD²", "sliced W2", "DAMV", "bulk ESS", "R-hat"],
        rows=rows,
        figures=[path],
        note=("ULA's O(h) bias shows in the distances at h = 0.3 (inflated variance: DAMV > 1); "
              "at h = 0.05 it sits near the exact-sample noise floor. ESS/R-hat over "
              f"{num_chains} chains x the last {keep} draws of x1: at h = 0.05 the slow "
              "direction's autocorrelation time is ~70 steps, so R-hat > 1.01 rightly says these "
              "chains are short."),
    )


SECTION = Section(name="basics", title="run + diagnostics: Langevin on a 2-D Gaussian",
                  run=_run, order=0)
