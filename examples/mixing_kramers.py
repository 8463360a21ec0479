"""Spectral gap of the double well against the Eyring–Kramers law, with MALA hitting times.

V(x) = h(x² − 1)² at temperature T: the SQRA generator's gap λ₁ (float64) beside 2k, the MFPT
from −1 to +1 beside 1/k, for h/T from 4 to 20; then the mean hitting time of MALA chains at one
moderate barrier against T·MFPT (MALA on log π = −V/T runs the diffusion at speed 1/T). Saves
log λ₁ against 1/T.

    python examples/mixing_kramers.py --chains 400 --out examples/out/mixing_kramers.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

jax.config.update("jax_enable_x64", True)

from jaxsample.diagnostics.mixing import (  # noqa: E402
    first_passage_steps,
    fp_generator,
    kramers_rate,
    mfpt,
    rate_matrix,
    spectral_gap,
)
from jaxsample.mcmc import mala  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--barrier", type=float, default=1.0)
    parser.add_argument("--chains", type=int, default=400)
    parser.add_argument("--step-size", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/mixing_kramers.png"))
    args = parser.parse_args()
    h = args.barrier
    x = np.linspace(-2.5, 2.5, 700)
    dx = x[1] - x[0]
    v = h * (x**2 - 1) ** 2
    start = int(np.argmin(np.abs(x + 1)))
    temperatures = h / np.array([4.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0])
    print(f"{'h/T':>6} {'gap':>11} {'2k':>11} {'gap/2k':>7} {'MFPT*k':>7}")
    gaps, rates = [], []
    for t in temperatures:
        gap = float(spectral_gap(*fp_generator(v, t, dx)[0])[0][0])
        k = float(kramers_rate(0.0, h, 8 * h, -4 * h, t)[0])
        tau = float(mfpt(rate_matrix(v, t, dx)[0], x >= 1.0)[0][start])
        gaps.append(gap)
        rates.append(2 * k)
        print(f"{h / t:6.1f} {gap:11.3e} {2 * k:11.3e} {gap / (2 * k):7.3f} {tau * k:7.3f}")
    t = h / 3.0
    tau = float(mfpt(rate_matrix(v, t, dx)[0], x >= 1.0)[0][start])
    alg = mala(lambda z: -h * jnp.sum((z**2 - 1) ** 2) / t, step_size=args.step_size)
    expected = t * tau / args.step_size
    steps, censored = first_passage_steps(jax.random.key(args.seed), alg,
                                          -jnp.ones((args.chains, 1)), lambda z: z[0] >= 1.0,
                                          max_steps=int(30 * expected))
    steps = np.asarray(steps, np.float64)
    print(f"MALA at h/T = 3: mean hitting steps {steps.mean():.0f} ± "
          f"{steps.std(ddof=1) / np.sqrt(len(steps)):.0f}, T·MFPT/step = {expected:.0f}, "
          f"censored {int(censored.sum())}")
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.semilogy(1 / temperatures, gaps, "o", label="SQRA gap λ₁")
    ax.semilogy(1 / temperatures, rates, "-", label="2 × Kramers rate")
    ax.set_xlabel("1 / T")
    ax.legend()
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
