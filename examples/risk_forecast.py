"""Repeated-sampling risk: forecast attack success at scale, and ask whether more samples help.

1. SABER: a synthetic red-teaming log (``--prompts`` prompts, ``--attempts`` attempts each, success
   probabilities drawn from ``Beta(a, b)``). Fit the beta-binomial law, forecast ASR@N with a
   bootstrap interval (prompts resampled, model refitted, all in one vmapped call), the budget
   needed to reach a risk level, and compare with the truth.
2. Best-of-N on user rewards: reward scores with 0/1 correctness labels (here simulated with a
   heavier-tailed incorrect class). ``tail_tension`` fits GPD tails and says for which N more
   samples still help; ``bon_pool_accuracy`` is the exact accuracy of Best-of-N drawn from the pool.

    python examples/risk_forecast.py --out examples/out/risk_forecast.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)   # betaln differences at large N need float64

from jaxsample import risk  # noqa: E402
from jaxsample.report import markdown_table  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("-a", type=float, default=0.3)
    parser.add_argument("-b", type=float, default=12.0)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--rewards", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/risk_forecast.png"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    key = jax.random.key(args.seed)

    theta = rng.beta(args.a, args.b, args.prompts)
    successes = rng.binomial(args.attempts, theta).astype(np.float64)
    fit, fit_info = risk.fit_beta_binomial(successes, float(args.attempts))
    ns = np.unique(np.round(np.logspace(np.log10(args.attempts), 5, 12)))
    interval, _ = risk.bootstrap_asr(key, jnp.asarray(ns), successes, float(args.attempts),
                                  num_resamples=args.resamples, max_trials=args.attempts)
    truth = np.mean(-np.expm1(ns[:, None] * np.log1p(-theta[None, :])), axis=1)
    budget, _ = risk.budget_at(0.5, fit.alpha, fit.beta, fit.pi0)
    print(f"fit: alpha={float(fit.alpha):.3f} beta={float(fit.beta):.2f} "
          f"(truth {args.a}, {args.b}), converged={bool(fit_info.solver.converged)}; "
          f"attempts for a 50% population ASR: {int(budget)}")
    print(markdown_table(["N", "truth", "anchored", "95% interval"],
                         [[int(n), t, e, f"[{lo:.3f}, {hi:.3f}]"] for n, t, e, lo, hi in
                          zip(ns, truth, np.asarray(interval.estimate),
                              np.asarray(interval.lower), np.asarray(interval.upper),
                              strict=True)]))

    labels = (rng.random(args.rewards) < 0.3).astype(np.float64)
    scores = np.where(labels == 1, rng.normal(1.0, 1.0, args.rewards),
                      rng.normal(0.0, 1.5, args.rewards))
    hazard_gap, tension = risk.tail_tension(scores, labels)
    pool_ns = jnp.asarray([1.0, 4.0, 16.0, 64.0, 256.0, 1024.0])
    pool, _ = risk.bon_pool_accuracy(scores, labels, pool_ns)
    print(markdown_table(["N", "hazard gap T(u_N)", "more samples help?"],
                         [[int(n), g, bool(h)] for n, g, h in
                          zip(np.asarray(tension.n), np.asarray(hazard_gap),
                              np.asarray(tension.helps), strict=True)]))
    print(markdown_table(["N", "Best-of-N accuracy from the pool"],
                         [[int(n), a] for n, a in zip(np.asarray(pool_ns), np.asarray(pool),
                                                      strict=True)]))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    left.fill_between(ns, interval.lower, interval.upper, alpha=0.3, label="95% bootstrap")
    left.plot(ns, interval.estimate, "o--", label="SABER anchored")
    left.plot(ns, truth, "k-", label="truth")
    left.set_xscale("log")
    left.set_xlabel("attempts per prompt N")
    left.set_ylabel("ASR@N")
    left.legend(fontsize=7)
    right.plot(pool_ns, pool, "o-")
    right.set_xscale("log")
    right.set_xlabel("N")
    right.set_ylabel("Best-of-N accuracy (pool)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
