"""Demo section: Gaussian sampling from smoothed scores in O(log κ) queries vs Chebyshev's √κ.

A 64-d Gaussian whose precision has a log-uniform spectrum on [1, κ] (random rotation). The
smoothed-score sampler (:func:`jaxsample.gaussian.sample`) with its default elliptic rule and with
the paper's sinc rule, and the Chebyshev baseline (plain gradients, products Λv), are asked for
the same relative accuracy ε = 1e-6 (Chebyshev at κ = 1e6 only); the table shows queries per
sample, the measured whitened error ‖Λ^{1/2}(x − m) − z‖/‖z‖ and time. Runs in float64.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample import gaussian
from jaxsample.demo import Section, SectionReport
from jaxsample.kernels.resolvent import elliptic_num_nodes, sinc_rule


def _problem(rng, dim, kappa):
    """Host-side (NumPy) precision and its square root: eager jnp ops would each compile."""
    q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    lam = np.geomspace(1.0, kappa, dim)
    precision = (q * lam) @ q.T
    return 0.5 * (precision + precision.T), (q * np.sqrt(lam)) @ q.T


def _error(x, noise, mean, sqrt_precision):
    whitened = (np.asarray(x) - mean[None, :]) @ sqrt_precision
    noise = np.asarray(noise)
    return float(np.max(np.linalg.norm(whitened - noise, axis=1) / np.linalg.norm(noise, axis=1)))


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib.pyplot as plt

    dim, tol, num_samples = 64, 1e-6, 8
    rows = []
    with jax.enable_x64(True):
        key_problem, key_noise = jax.random.split(key)
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key_problem)))
        mean_np = rng.standard_normal(dim)
        mean = jnp.asarray(mean_np)
        z = jax.random.normal(key_noise, (num_samples, dim), jnp.float64)
        for kappa in (1e2, 1e6):
            precision, sqrt_precision = _problem(rng, dim, kappa)
            oracle = gaussian.SmoothedScoreOracle(jnp.asarray(precision), mean)
            spectrum = dict(lambda_min=1.0, lambda_max=kappa, tol=tol)
            error = lambda x, noise, root=sqrt_precision: _error(x, noise, mean_np, root)

            for rule in ("elliptic", "sinc"):
                t0 = time.perf_counter()
                x, info = gaussian.transform_noise(key, oracle, z, mean=mean, rule=rule,
                                                   **spectrum)
                x.block_until_ready()
                rows.append([f"{kappa:.0e}", f"{rule} resolvent (smoothed scores)",
                             int(info.num_levels), error(x, z), time.perf_counter() - t0])
            if kappa < 1e6:  # one baseline run (a compilation per degree) shows the √κ
                continue
            t0 = time.perf_counter()
            key_cheb = jax.random.key(int(np.log10(kappa)))
            x, info = gaussian.chebyshev_sample(key_cheb, oracle.score, mean=mean,
                                                num_samples=num_samples, **spectrum)
            x.block_until_ready()
            noise = jax.random.normal(key_cheb, (num_samples, dim), jnp.float64)
            rows.append([f"{kappa:.0e}", "Chebyshev (gradients)", int(info.num_levels),
                         error(x, noise), time.perf_counter() - t0])

    kappas = np.logspace(1, 10, 19)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for eps, style in ((1e-3, "--"), (1e-6, "-")):
        elliptic = [elliptic_num_nodes(1.0, k, eps) for k in kappas]
        sinc = [len(sinc_rule(1.0, k, eps).taus) for k in kappas]
        cheb = [0.5 * np.sqrt(k) * np.log(2 / eps) for k in kappas]
        ax.loglog(kappas, elliptic, "C2" + style, label=f"elliptic resolvent, ε={eps:g}")
        ax.loglog(kappas, sinc, "C0" + style, label=f"sinc resolvent, ε={eps:g}")
        ax.loglog(kappas, cheb, "C3" + style, label=f"Chebyshev ≈ (√κ/2)log(2/ε), ε={eps:g}")
    measured = [r for r in rows if r[1].startswith("Chebyshev")]
    ax.loglog([float(r[0]) for r in measured], [r[2] for r in measured], "C3o",
              label="Chebyshev degree (measured)")
    ax.set_xlabel("condition number κ")
    ax.set_ylabel("queries per sample")
    ax.set_title("Queries to reach relative error ε")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(outdir) / "gaussian_queries.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return SectionReport(
        headers=["κ", "sampler", "queries / sample", "max whitened error", "time (s)"],
        rows=rows,
        figures=[path],
        note=(f"d = {dim}, ε = {tol:g}, {num_samples} samples, float64. Smoothed-score queries "
              "grow by a constant per decade of κ (the elliptic rule needs 3–8× fewer than the "
              "sinc rule); gradient-only Chebyshev grows like √κ. The whitened error "
              "‖Λ^{1/2}(x − m) − z‖/‖z‖ is ≤ ~2ε for all (times include compilation)."),
    )


SECTION = Section(name="gaussian", title="smoothed-score Gaussian sampler: log κ vs √κ queries",
                  run=_run, order=40)
