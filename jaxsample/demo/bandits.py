"""Demo section: sampling to decide — Condorcet-winner identification and π0-PSRL on RiverSwim.

Left: duels to certified identification on the informative instance (the CW beats every arm by
0.15; a second arm beats the rest by 0.4) for the full-gap and winner-row strategies. Right: the
cumulative exact regret of PSRL and π0-PSRL (reference reading, uniformly random π0) on
RiverSwim (S = 6, H = 20). The example scripts and the benchmark sweep K, seeds and UCBVI.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport

__all__ = ["duel_counts", "regret_curves"]


def duel_counts(key, prefs, strategies, num_seeds, *, delta=0.05):
    """``{strategy: (duels (num_seeds,), correct (num_seeds,))}`` from un-batched runs.

    Seeds run one after another through one compilation per strategy (a batched loop would
    compile again for every batch size).
    """
    from jaxsample.decision import identify_condorcet

    winner_true = int(prefs.condorcet_winner())
    out = {}
    for strategy in strategies:
        duels, correct = [], []
        for k in jax.random.split(key, num_seeds):
            winner, info = identify_condorcet(k, prefs, delta=delta, strategy=strategy,
                                              budget=10**7)
            duels.append(int(info.num_duels))
            correct.append(int(winner) == winner_true and bool(info.determined))
        out[strategy] = (np.asarray(duels), np.asarray(correct))
    return out


def regret_curves(key, mdp, num_episodes, configs):
    """``{label: PSRLInfo}`` for ``configs = {label: run_psrl keyword arguments}``."""
    from jaxsample.decision import run_psrl

    return {label: run_psrl(key, mdp, num_episodes=num_episodes, **kw)[1]
            for label, kw in configs.items()}


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxsample.decision import PreferenceMatrix, TabularMDP

    key_duel, key_rl = jax.random.split(key)
    prefs = PreferenceMatrix.informative(8, winner_gap=0.15)
    duels = duel_counts(key_duel, prefs, ("full_gap", "winner_row"), 3)
    mdp = TabularMDP.riverswim(num_states=6, horizon=20)
    runs = regret_curves(key_rl, mdp, 300, {"PSRL": dict(variant="psrl"),
                                            "π0-PSRL (π0 uniform)": dict(variant="pi0")})
    rows = [[strategy, float(n.mean()), float(ok.mean())] for strategy, (n, ok) in duels.items()]
    rl_rows = [[label, float(jnp.sum(info.regret)), int(info.num_explore)]
               for label, info in runs.items()]
    fig, (ax_d, ax_r) = plt.subplots(1, 2, figsize=(9, 3.4))
    names = list(duels)
    ax_d.bar(names, [duels[s][0].mean() for s in names], color=["C0", "C1"])
    ax_d.set_xlabel("duel-selection strategy")
    ax_d.set_ylabel("duels to identification (δ = 0.05)")
    ax_d.set_title("K = 8, CW gap 0.15, informative non-winner arm", fontsize=9)
    for label, info in runs.items():
        ax_r.plot(np.arange(1, 301), np.cumsum(np.asarray(info.regret)), label=label)
    ax_r.set_xscale("log")
    ax_r.set_xlabel("episode")
    ax_r.set_ylabel("cumulative regret (exact)")
    ax_r.set_title("RiverSwim S=6, H=20", fontsize=9)
    ax_r.legend(fontsize=7)
    fig.tight_layout()
    path = Path(outdir) / "bandits.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    ratio = duels["full_gap"][0].mean() / duels["winner_row"][0].mean()
    note = (f"full-gap needs {ratio:.2f}x winner-row's duels (3 seeds, all certified); exact "
            "regret by policy evaluation, one seed; π0-PSRL's exploration episodes play the "
            "uniform π0, so its regret grows while the disagreement test keeps firing.")
    return SectionReport(
        ["dueling, K = 8: strategy", "mean duels to certify", "share correct"], rows, [path],
        note, extra_tables=[(["RiverSwim S = 6, H = 20: variant",
                              "cumulative regret, 300 episodes", "exploration episodes"],
                             rl_rows)])


SECTION = Section(name="bandits", title="Sampling to decide: dueling bandits and π0-PSRL",
                  run=_run, order=90)
