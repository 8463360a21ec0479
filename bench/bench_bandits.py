"""Sampling to decide: Condorcet-winner identification and (π0-)PSRL against their baselines.

1. **Dueling.** The informative instance (:meth:`PreferenceMatrix.informative`, arms randomly
   relabelled): the CW beats every arm with q = 0.55, a second arm beats every other non-CW arm
   with q = 0.9, the other pairs are ½ ± U(0, 0.1). Mean duels to certified identification at
   δ = 0.05 for full-gap, winner-row (RUCB-style candidate, its row only) and uniform rotation,
   with correctness; ``duelpy`` is run beside when it is installed (bench extra).
   Goal: full-gap ≤ ½ of winner-row's duels at equal correctness.
2. **Regret.** RiverSwim (S = 6, H = 20) and a random MDP (S = 5, A = 3, H = 10, Dirichlet(1)
   rows): cumulative exact regret (mean ± standard error over seeds), exploration episodes and
   the fraction of episodes that played π*, for PSRL, π0-PSRL in both readings (reference π0 =
   uniform, and on RiverSwim the narrow always-left π0; sampled) and UCBVI-Hoeffding (c = 1 and
   c = 0.1); ``rlberry`` agents beside when installed.
3. **Throughput.** Episodes per second of π0-PSRL for 100 vmapped seeds (gpu size: 10 000).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row, time_fn

from jaxsample.decision import (
    CondorcetIdentification,
    PreferenceMatrix,
    TabularMDP,
    identify_condorcet,
    run_psrl,
    run_psrl_env,
    run_ucbvi,
)

_DUEL_SIZES = {"quick": ((8, 4, 0.15),), "full": ((10, 40, 0.05), (100, 2, 0.05)),
               "gpu": ((10, 1000, 0.05), (100, 100, 0.05))}
_RL_SIZES = {"quick": (4, 50), "full": (20, 2000), "gpu": (20, 2000)}
_THROUGHPUT = {"quick": (16, 50), "full": (100, 200), "gpu": (10_000, 200)}


def _peer_note(name):
    try:
        __import__(name)
    except ImportError:
        return f"{name} is not installed; its rows are absent"
    return f"{name} is installed but not run by this bench (no runner written yet)"


def _dueling(size):
    rows, notes = [], []
    for k, num_seeds, gap in _DUEL_SIZES[size]:
        # uniform rotation meets the CW once per K − 1 rounds: ~K²/Δ² duels, hours at K = 100
        strategies = ("full_gap", "winner_row") if size == "quick" or k > 20 else (
            "full_gap", "winner_row", "uniform")
        prefs = PreferenceMatrix.informative(k, winner_gap=gap)
        truth = int(prefs.condorcet_winner())
        keys = jax.random.split(jax.random.key(k), num_seeds)
        means = {}
        for strategy in strategies:
            fn = jax.jit(jax.vmap(lambda key, s=strategy, p=prefs: identify_condorcet(
                key, p, delta=0.05, budget=2**31 - 1, strategy=s)))
            seconds, (winner, info) = time_fn(fn, keys, repeats=1)
            duels = np.asarray(info.num_duels, np.float64)
            correct = np.mean((np.asarray(winner) == truth) & np.asarray(info.determined))
            means[strategy] = duels.mean()
            rows.append(Row(f"K={k}, CW gap {gap}", strategy, {
                "seeds": num_seeds, "mean duels": float(duels.mean()),
                "± s.e.": float(duels.std(ddof=1) / math.sqrt(num_seeds)) if num_seeds > 1
                else float("nan"),
                "correct": f"{correct:.3f}",
                "duels / winner-row": None}, seconds, peer=strategy == "winner_row"))
        # the real-input path: run with a callable oracle returning graded verdicts (a judge's
        # share in [0, 1], Beta with mean q_ij) instead of wins drawn from the matrix
        q = prefs.probs
        graded = jax.jit(jax.vmap(lambda key, q=q, k=k: CondorcetIdentification(
            k, delta=0.05).run(key, lambda kk, i, j: jax.random.beta(
                kk, 4 * q[i, j] + 1e-3, 4 * (1 - q[i, j]) + 1e-3), dtype=q.dtype)))
        seconds, (winner, info) = time_fn(graded, keys, repeats=1)
        duels = np.asarray(info.num_duels, np.float64)
        correct = np.mean((np.asarray(winner) == truth) & np.asarray(info.determined))
        rows.append(Row(f"K={k}, CW gap {gap}", "full_gap, ask/tell run, graded outcomes", {
            "seeds": num_seeds, "mean duels": float(duels.mean()),
            "± s.e.": float(duels.std(ddof=1) / math.sqrt(num_seeds)) if num_seeds > 1
            else float("nan"),
            "correct": f"{correct:.3f}", "duels / winner-row": None}, seconds))
        means["full_gap, ask/tell run, graded outcomes"] = duels.mean()
        for row in rows[-len(strategies) - 1:]:
            row.metrics["duels / winner-row"] = f"{means[row.method] / means['winner_row']:.2f}"
        ratio = means["full_gap"] / means["winner_row"]
        notes.append(f"K={k}: full-gap / winner-row duels = {ratio:.2f} — goal ≤ 0.5 "
                     f"{'met' if ratio <= 0.5 else 'missed'}")
    notes.append("graded outcomes: CondorcetIdentification.run with an oracle(key, i, j) "
                 "returning i's share ~ Beta(4q + 1e-3, 4(1 − q) + 1e-3) (mean q_ij, a judge's "
                 "graded verdict), the path of a real evaluator")
    notes.append("uniform rotation is run only for K ≤ 20 (at K = 100 it needs ~K²/Δ² duels)")
    notes.append(_peer_note("duelpy") + " (it installs without torch: duelpy + seaborn)")
    notes.append("time = one vmapped call over all seeds (the while loop runs until the slowest "
                 "seed stops); the speed-up column compares those times, not duels")
    return BenchTable("Condorcet-winner identification: duels to certification at δ = 0.05",
                      rows, notes)


def _always_left(mdp):
    return jnp.zeros((mdp.horizon, mdp.num_states), jnp.int32)


def _env_runner(mdp):
    """run_psrl_env on a simulator of ``mdp`` (rewards learned), reporting as run_psrl does."""
    p, r = mdp.transitions[0], mdp.rewards[0]

    def env_step(key, s, a):
        return jax.random.categorical(key, jnp.log(p[s, a])), r[s, a]

    def runner(key, m, *, num_episodes):
        counts, info = run_psrl_env(key, env_step, num_states=m.num_states,
                                    num_actions=m.num_actions, horizon=m.horizon,
                                    num_episodes=num_episodes, store_policies=True)
        v_star = m.initial @ m.backward_induction()[0][0]
        regret = v_star - jax.vmap(lambda pol: m.initial @ m.evaluate_policy(pol)[0])(
            info.policies)
        optimal = regret <= 1e-6 * m.horizon * jnp.maximum(v_star, 1)
        return counts, _EnvRow(regret, info.num_explore, optimal, info.blind)

    return runner


class _EnvRow(NamedTuple):
    regret: jax.Array
    num_explore: jax.Array
    optimal: jax.Array
    blind: jax.Array


def _rl(size):
    num_seeds, num_episodes = _RL_SIZES[size]
    mdps = {"RiverSwim S=6 H=20": TabularMDP.riverswim(num_states=6, horizon=20)}
    if size != "quick":
        mdps["random S=5 A=3 H=10"] = TabularMDP.random(jax.random.key(1), 5, 3, 10)
    rows = []
    for case, mdp in mdps.items():
        configs = {
            "PSRL": (run_psrl, dict(variant="psrl")),
            "π0-PSRL reference, π0 uniform": (run_psrl, dict(variant="pi0")),
            "UCBVI c=1": (run_ucbvi, dict()),
            "PSRL on a simulator, rewards learned": (_env_runner(mdp), dict()),
        }
        if size != "quick":
            configs["π0-PSRL sampled"] = (run_psrl, dict(variant="pi0",
                                                         explore_policy="sampled"))
            configs["π0-PSRL reference, value-gap test"] = (run_psrl, dict(
                variant="pi0", disagreement="value_gap"))
            if case.startswith("RiverSwim"):
                configs["π0-PSRL reference, π0 always-left"] = (run_psrl, dict(
                    variant="pi0", reference_policy=_always_left(mdp)))
            configs["UCBVI c=0.1"] = (run_ucbvi, dict(bonus_scale=0.1))
        keys = jax.random.split(jax.random.key(0), num_seeds)
        for label, (runner, kw) in configs.items():
            fn = jax.jit(jax.vmap(lambda key, r=runner, kw=kw, m=mdp: r(
                key, m, num_episodes=num_episodes, **kw)))
            seconds, (_, info) = time_fn(fn, keys, repeats=1)
            total = np.asarray(jnp.sum(info.regret, axis=1), np.float64)
            half = np.asarray(jnp.sum(info.regret[:, num_episodes // 2:], axis=1), np.float64)
            rows.append(Row(case, label, {
                "episodes": num_episodes, "seeds": num_seeds,
                "regret": float(total.mean()),
                "± s.e.": float(total.std(ddof=1) / math.sqrt(num_seeds)),
                "regret, 2nd half": float(half.mean()),
                "exploration episodes": float(np.mean(np.asarray(info.num_explore))),
                "blind episodes": float(np.mean(np.sum(np.asarray(info.blind), axis=1))),
                "π* episodes": f"{float(jnp.mean(info.optimal)):.3f}",
            }, seconds, peer=label == "UCBVI c=1"))
    notes = [
        "regret = Σ_k V*₁(s₁) − V^{π_k}₁(s₁) by exact policy evaluation (no Monte Carlo noise); "
        "exploration episodes = episodes where the disagreement test fired (recorded for PSRL, "
        "which always plays π̃)",
        "disagreement test 'reachable' unless stated; π0-PSRL's reference reading pays for "
        "every exploration episode with π0's regret, the sampled reading plays π̃ instead",
        "blind episodes (π0-PSRL, reference reading): exploration episodes in which π0 cannot "
        "play one of the two disputed actions; an always-left π0 is blind almost always and "
        "pays its own gap every episode (the run warns)",
        "PSRL on a simulator: run_psrl_env with env_step(key, s, a) drawing from the MDP and "
        "the rewards learned (Beta posteriors); regret by exact evaluation of its played "
        "policies",
        _peer_note("rlberry"),
    ]
    return BenchTable(f"Tabular RL: cumulative regret over {num_episodes} episodes", rows, notes)


def _throughput(size):
    num_seeds, num_episodes = _THROUGHPUT[size]
    mdp = TabularMDP.riverswim(num_states=6, horizon=20)
    keys = jax.random.split(jax.random.key(3), num_seeds)
    fn = jax.jit(jax.vmap(lambda key: run_psrl(key, mdp, num_episodes=num_episodes,
                                                        variant="pi0")))
    seconds, _ = time_fn(fn, keys, repeats=2)
    rate = num_seeds * num_episodes / seconds
    row = Row("RiverSwim S=6 H=20", "π0-PSRL (vmapped seeds)", {
        "seeds": num_seeds, "episodes": num_episodes, "episodes / s": float(rate),
        "μs / episode": float(1e6 / rate)}, seconds)
    return BenchTable("π0-PSRL throughput", [row], [
        "one episode = empirical MDP + posterior draw + two backward inductions + occupancy + "
        "exact evaluation + rollout, O(H·S²·A) each; no goal was set in numbers"])


def run(size: str) -> list[BenchTable]:
    tables = [_dueling(size), _rl(size)]
    if size != "quick":  # quick: the regret table's timings stand in (one compilation less)
        tables.append(_throughput(size))
    return tables
