"""ETD on separated modes: are the mode weights kept? (issue 48, the diagnosis table).

The target is a two-component Gaussian mixture in d = 10, weights 0.3 / 0.7, means ``∓3·1``,
identity covariances (the modes are 19 apart; no Markov chain crosses). ETD runs from N(0, 4I)
with N = 200 particles and, per row, the defaults or the defaults with one mechanism changed. The
mode-weight TV ``|p̂ − 0.3|`` (a particle's mode is the sign of its coordinate sum) is set beside
the multinomial floor ``E|p̂ − 0.3|`` of N exact draws, ``√(0.3·0.7/N)·√(2/π)``; the within-mode
sd ratio is the mean over the two modes and the coordinates of the particles' sd (1 under π).
Also reported: the proposal step ``α_t`` and the mutation step ``h_t`` at the end.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row

import jaxsample
from jaxsample.particles import Mutation, ProposalAdaptation

DIM = 10
WEIGHTS = (0.3, 0.7)


def _logdensity(x):
    means = jnp.stack([-3.0 * jnp.ones(DIM), 3.0 * jnp.ones(DIM)])
    return jax.nn.logsumexp(jnp.log(jnp.asarray(WEIGHTS))
                            - 0.5 * jnp.sum((x - means) ** 2, axis=-1))


VARIANTS = {
    "defaults": {},
    "proposal step not following the mutation step":
        {"proposal_adaptation": ProposalAdaptation(follows_mutation=False)},
    "mutation step not adapted": {"mutation": Mutation(adaptation_rate=0.0)},
    "no mutation (the paper's step)": {"mutation": Mutation(steps=0)},
    "no weight guard": {"min_weight_ess": 0.0},
    "preconditioner None": {"preconditioner": None},
    "preconditioner 'fisher'": {"preconditioner": "fisher"},
}


def _one(settings, seed, num_particles, num_steps):
    alg = jaxsample.etd(_logdensity, score_fn="autodiff", **settings)
    x0 = 2.0 * jax.random.normal(jax.random.key(seed), (num_particles, DIM))
    state, info = jaxsample.run(jax.random.key(1000 + seed), alg, alg.init(x0),
                                num_steps=num_steps)
    x = np.asarray(state.positions)
    minority = x.sum(axis=1) < 0
    sds = [x[m].std(axis=0).mean() for m in (minority, ~minority) if m.sum() > 1]
    return {"tv": abs(minority.mean() - WEIGHTS[0]), "sd": float(np.mean(sds)),
            "alpha": float(info.proposal_step[-1]), "h": float(info.mutation_step_size[-1]),
            "collapsed": bool(state.collapsed)}


def _table(size):
    quick = size == "quick"
    num_particles, num_steps, seeds = 200, (60 if quick else 200), range(2 if quick else 5)
    floor = math.sqrt(WEIGHTS[0] * WEIGHTS[1] / num_particles) * math.sqrt(2 / math.pi)
    rows = []
    variants = list(VARIANTS.items())[:2] if quick else VARIANTS.items()
    for name, settings in variants:
        runs = [_one(settings, seed, num_particles, num_steps) for seed in seeds]
        tv = np.array([r["tv"] for r in runs])
        rows.append(Row("2 modes, d = 10, 0.3 / 0.7", name, {
            "mode-weight TV (mean)": float(tv.mean()),
            "TV per seed": " ".join(f"{v:.2f}" for v in tv),
            "floor": floor,
            "x floor": float(tv.mean() / floor),
            "goal <= 2x floor": "met" if tv.mean() <= 2 * floor else "missed",
            "within-mode sd ratio": float(np.mean([r["sd"] for r in runs])),
            "final alpha": float(np.mean([r["alpha"] for r in runs])),
            "final h": float(np.mean([r["h"] for r in runs])),
            "collapsed": sum(r["collapsed"] for r in runs)}))
    notes = [
        f"N = {num_particles}, {num_steps} steps, start N(0, 4I), {len(seeds)} seeds; floor: "
        "the multinomial E|p - 0.3| of N exact draws; 'collapsed': how many seeds ended flagged.",
        "Mechanism (each row changes one thing): the ensemble covariance of a two-mode cloud is "
        "dominated by the distance between the modes (variance ~76 along the axis joining them, 1 "
        "across), so in whitened coordinates the modes are 0.11 wide along that axis; the MALA "
        "step adapts to the narrow axis (h -> 0.03-0.05), the proposal step follows it, the "
        "proposals become a spiky kernel estimate of the cloud, the importance weights "
        "heavy-tailed, and the mode holding fewer particles gets less than its share in a typical "
        "step: a positive feedback that empties it (by step 15-30). Keeping the proposal step "
        "fixed, or a preconditioner that measures the local scale ('fisher': its score "
        "covariance is the within-mode one), keeps the weights.",
    ]
    return BenchTable("ETD: mode weights on separated modes (the defaults and one change each)",
                      rows, notes)


def run(size: str) -> list[BenchTable]:
    return [_table(size)]
