"""Condorcet-winner identification: duels to certification against K, per sampling strategy.

On the informative instance (the CW beats every arm by ``--winner-gap``, a second arm beats every
other non-CW arm by 0.4, the other pairs are near ½), runs full-gap, winner-row and uniform
sampling over seeds for each K and plots the mean duels to certified identification at level
δ, with the correctness rate.

Then the ask/tell interface on *recorded* outcomes: no offline pairwise-outcome data set (a sports
or judgement log) ships with the library or its data packages, so a log of graded verdicts
(fractions in [0, 1], a judge's share of preference for i) is drawn once into a table, and
``CondorcetIdentification`` replays it: each ``ask`` takes the next unused verdict of the pair it
names. A real log is used the same way (``--replay-log`` reads a ``.npz`` with ``outcomes[i, j,
n]``, ``n``-th verdict of i against j, NaN-padded).

    python examples/dueling_bandits.py --out examples/out/dueling_bandits.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import numpy as np

from jaxsample.decision import CondorcetIdentification, PreferenceMatrix, identify_condorcet
from jaxsample.report import markdown_table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", type=int, nargs="+", default=[4, 6, 8, 12])
    parser.add_argument("--strategies", nargs="+", default=["full_gap", "winner_row", "uniform"])
    parser.add_argument("--winner-gap", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--num-seeds", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/dueling_bandits.png"))
    parser.add_argument("--replay-log", type=Path, default=None)
    args = parser.parse_args(argv)
    replay(args)

    keys = jax.random.split(jax.random.key(args.seed), args.num_seeds)
    results = {s: [] for s in args.strategies}
    rows = []
    for k in args.arms:
        prefs = PreferenceMatrix.informative(k, winner_gap=args.winner_gap, seed=args.seed)
        truth = int(prefs.condorcet_winner())
        for strategy in args.strategies:
            winner, info = jax.vmap(lambda key, s=strategy, p=prefs: identify_condorcet(
                key, p, delta=args.delta, budget=2**31 - 1, strategy=s))(keys)
            duels = np.asarray(info.num_duels, np.float64)
            correct = float(np.mean((np.asarray(winner) == truth) & np.asarray(info.determined)))
            results[strategy].append(duels.mean())
            rows.append([k, strategy, duels.mean(), correct])
    print(markdown_table(["K", "strategy", "mean duels", "correct"], rows))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for strategy, means in results.items():
        ax.plot(args.arms, means, marker="o", label=strategy)
    ax.set_xlabel("K (arms)")
    ax.set_ylabel(f"mean duels to certification (δ = {args.delta})")
    ax.set_yscale("log")
    ax.set_title(f"informative instance, CW gap {args.winner_gap}, {args.num_seeds} seeds",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def replay(args):
    """Certifies a winner from a table of recorded verdicts through ask/tell (host loop)."""
    if args.replay_log is not None:
        outcomes = np.load(args.replay_log)["outcomes"]
    else:  # a recorded log stand-in: 2 000 graded verdicts per pair, Beta with mean q
        prefs = PreferenceMatrix.informative(6, winner_gap=0.25, seed=args.seed)
        q = np.asarray(prefs.probs, np.float64)
        rng = np.random.default_rng(args.seed)
        draws = rng.beta(6 * q[..., None] + 1e-3, 6 * (1 - q[..., None]) + 1e-3,
                         (*q.shape, 2000))
        outcomes = np.where(np.arange(q.shape[0])[:, None, None]
                            < np.arange(q.shape[0])[None, :, None], draws,
                            1 - np.swapaxes(draws, 0, 1))
    k = outcomes.shape[0]
    used = np.zeros((k, k), int)
    m = CondorcetIdentification(k, delta=args.delta)
    state = m.init(jax.random.key(args.seed))
    key = jax.random.key(args.seed + 1)
    while not bool(m.done(state)):
        i, j = (int(v) for v in m.ask(key, state))
        n = used[min(i, j), max(i, j)]
        verdict = outcomes[i, j, n] if n < outcomes.shape[2] else np.nan
        if not np.isfinite(verdict):
            print(f"the log ran out of verdicts for pair ({i}, {j}) after {n}")
            break
        used[min(i, j), max(i, j)] += 1
        state = m.tell(state, i, j, float(verdict))
    winner, info = m.result(state)
    print(f"replayed log: winner {int(winner)}, certified {bool(info.determined)} "
          f"after {int(info.num_duels)} recorded verdicts")


if __name__ == "__main__":
    main()
