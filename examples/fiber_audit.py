"""Invariance auditing: sample the fiber of a feature extractor under a diffusion prior with NDTM.

The fiber of φ at a query x_q is {x : φ(x) = φ(x_q)}: every input φ cannot tell apart from x_q.
Here the prior is an 8-D Gaussian mixture with its exact ε-predictor (any ε-network plugs in the
same way), and two feature maps are audited:

* linear, φ(x) = (x₁, x₂): the exact fiber law is a mixture again (Gaussian conditioning), so
  NDTM's samples are checked against exact draws (MMD², component weights);
* nonlinear, a fixed random tanh MLP ℝ⁸ → ℝ²: no closed form; rejection ABC from exact prior
  draws (keep the draws nearest the fiber) is the reference.

NDTM optimises a control before every DDIM step (``guidance.NDTM``) with the fiber loss
‖φ(x̂₀) − φ(x_q)‖² as terminal cost (``guidance.FiberCost``); DPS
(``guidance.DPSGuidance`` with the same cost) at the same number of ε-evaluations is the
baseline.

    python examples/fiber_audit.py --out examples/out/fiber_audit.png
"""

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from jaxsample.diagnostics import mmd
from jaxsample.diffusion import guidance
from jaxsample.targets import GaussianMixture


def mixture(dim=8, seed=1):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(4, dim))
    root = rng.normal(size=(4, dim, dim)) / np.sqrt(dim)
    cov = 0.1 * root @ np.swapaxes(root, 1, 2) + 0.05 * np.eye(dim)
    return GaussianMixture(*(jnp.asarray(a, jnp.float32) for a in (
        means, cov, np.array([0.3, 0.3, 0.2, 0.2]))))


def random_mlp(dim=8, width=16, seed=2):
    rng = np.random.default_rng(seed)
    w1 = jnp.asarray(rng.normal(size=(width, dim)) / np.sqrt(dim), jnp.float32)
    w2 = jnp.asarray(rng.normal(size=(2, width)) / np.sqrt(width), jnp.float32)
    return lambda x: w2 @ jnp.tanh(w1 @ x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=512)
    parser.add_argument("--num-steps", type=int, default=50)
    parser.add_argument("--inner-steps", type=int, default=5)
    parser.add_argument("--terminal-weight", type=float, default=5.0)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--abc-draws", type=int, default=500_000)
    parser.add_argument("--out", type=Path, default=Path("examples/out/fiber_audit.png"))
    args = parser.parse_args()

    prior = mixture()
    schedule = guidance.VPSchedule("linear")
    eps = guidance.NoisedMixture(prior, schedule)
    query = 0.5 * (prior.means[0] + prior.means[1])
    x_T = jax.random.normal(jax.random.key(0), (args.num_samples, prior.dim))
    prior_draws = prior.sample(jax.random.key(1), args.abc_draws)
    evals = args.num_steps * (args.inner_steps + 1)
    features = {"linear": lambda x: x[:2], "random MLP": random_mlp()}
    results = {}
    for name, phi in features.items():
        cost = guidance.FiberCost(phi, query)
        x_ndtm, info = guidance.sample(
            jax.random.key(2), eps, schedule, x_T, num_steps=args.num_steps,
            solver=guidance.NDTM(cost, num_steps=args.inner_steps,
                                 terminal_weight=args.terminal_weight,
                                 learning_rate=args.learning_rate,
                                 learning_rate_schedule="constant", eta=1.0))
        x_dps, _ = guidance.sample(jax.random.key(2), eps, schedule, x_T, num_steps=evals,
                                   solver=guidance.DDIM(1.0),
                                   guidance=guidance.DPSGuidance(cost, 0.1))
        if name == "linear":
            matrix = jnp.eye(2, prior.dim, dtype=jnp.float32)
            reference = guidance.LinearFiberLaw(prior, matrix, matrix @ query).sample(
                jax.random.key(3), args.num_samples)
            label = "exact fiber law"
        else:
            gap = jnp.linalg.norm(jax.vmap(phi)(prior_draws) - phi(query)[None], axis=1)
            reference = prior_draws[jnp.argsort(gap)[:args.num_samples]]
            label = f"rejection ABC (δ = {float(jnp.sort(gap)[args.num_samples - 1]):.3f})"
        residual = lambda x, phi=phi: float(jnp.mean(jnp.linalg.norm(  # noqa: E731
            jax.vmap(phi)(x) - phi(query)[None], axis=1)))
        results[name] = (x_ndtm, x_dps, reference, label)
        print(f"{name:>10}: residual NDTM {residual(x_ndtm):.4f}, DPS {residual(x_dps):.4f}, "
              f"reference {residual(reference):.4f}; MMD² to {label}: NDTM "
              f"{float(mmd(x_ndtm, reference, 1.0)[0]):.4f}, "
              f"DPS {float(mmd(x_dps, reference, 1.0)[0]):.4f}"
              f"; non-finite NDTM samples: {int(info.nonfinite.sum())}")

    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, (name, (x_ndtm, x_dps, reference, label)) in zip(axes, results.items(), strict=True):
        # the fiber's free directions: coordinates 3 and 4
        ax.scatter(*np.asarray(reference)[:, 2:4].T, s=3, alpha=0.4, label=label)
        ax.scatter(*np.asarray(x_ndtm)[:, 2:4].T, s=3, alpha=0.4, label="NDTM")
        ax.scatter(*np.asarray(x_dps)[:, 2:4].T, s=3, alpha=0.4, label="DPS")
        ax.set_title(f"fiber of φ = {name}, coordinates (x₃, x₄)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
