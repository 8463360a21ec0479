"""ETD on separated modes: are the mode weights kept, against BlackJAX's tempered SMC? (issue 48)

Two tables.

1. **The multimodal suite.** Gaussian mixtures of 2–8 separated modes with unequal weights in
   d = 2–20 (identity covariances; the modes are 8–19 apart, so no MALA move crosses), each run
   from a wide Gaussian start that covers the modes. A particle's mode is its nearest mean. The
   mode-weight TV ``½ Σ_k |p̂_k − w_k|`` is set beside the multinomial floor ``E TV`` of N exact
   draws (simulated); the within-mode sd ratio is the mean over modes and coordinates of the
   particles' sd (1 under π). ETD runs with its defaults; BlackJAX adaptive tempered SMC
   (``smc_peer``, MALA mutation tuned between stages) runs from the same start law as its prior,
   once with as many particles and once with the evaluations raised to about ETD's. Every
   evaluation count is read from instrumented calls (``smc_peer.counted``), not a formula.
   ETD's ``mass_lost`` flag is counted over the seeds.
2. **The diagnosis** (two modes, d = 10): the defaults beside one change each, the record of
   why the earlier defaults emptied the minority mode.

Both tables are quality-only: no column is a time, so the host's load does not bear on them.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import smc_peer
from harness import BenchTable, Row

import jaxsample
from jaxsample.particles import Mutation, ProposalAdaptation


class Mixture(NamedTuple):
    name: str
    means: np.ndarray  # (K, d)
    weights: np.ndarray  # (K,)
    start_scale: float  # the start law N(0, s² I), also SMC's prior


def _corners(k: int, d: int, half_width: float) -> np.ndarray:
    """``k = 2^j`` corners of a cube of side ``2·half_width`` in the first ``j`` coordinates
    (``j = 1``: ``∓half_width·1`` along the diagonal, the issue's case)."""
    if k == 2:
        return np.stack([-half_width * np.ones(d), half_width * np.ones(d)])
    j = int(math.log2(k))
    corners = np.zeros((k, d))
    corners[:, :j] = half_width * np.array(list(itertools.product((-1, 1), repeat=j)))
    return corners


def _weights(k: int) -> np.ndarray:
    w = np.arange(1, k + 1, dtype=np.float64)
    return w / w.sum()


MIXTURES = (
    Mixture("2 modes, d = 2 (0.3 / 0.7)", _corners(2, 2, 3.0), np.array([0.3, 0.7]), 3.0),
    Mixture("2 modes, d = 10 (0.3 / 0.7)", _corners(2, 10, 3.0), np.array([0.3, 0.7]), 2.0),
    Mixture("2 modes, d = 20 (0.3 / 0.7)", _corners(2, 20, 3.0), np.array([0.3, 0.7]), 2.0),
    Mixture("4 modes, d = 2 (0.1-0.4)", _corners(4, 2, 4.0), _weights(4), 4.0),
    Mixture("4 modes, d = 10 (0.1-0.4)", _corners(4, 10, 4.0), _weights(4), 3.0),
    Mixture("8 modes, d = 5 (1:2:...:8)", _corners(8, 5, 4.0), _weights(8), 3.0),
    Mixture("8 modes, d = 20 (1:2:...:8)", _corners(8, 20, 4.0), _weights(8), 3.0),
)


def _logdensity(mixture: Mixture):
    means = jnp.asarray(mixture.means, jnp.float32)
    log_w = jnp.log(jnp.asarray(mixture.weights, jnp.float32))

    def logdensity(x):
        return jax.nn.logsumexp(log_w - 0.5 * jnp.sum((x[None, :] - means) ** 2, axis=-1))

    return logdensity


def floor_tv(weights: np.ndarray, n: int, draws: int = 20000) -> float:
    """``E ½Σ|p̂_k − w_k|`` for ``p̂`` the frequencies of ``n`` exact draws (simulated)."""
    counts = np.random.default_rng(0).multinomial(n, weights, size=draws)
    return float(0.5 * np.abs(counts / n - weights).sum(axis=1).mean())


def mode_metrics(x: np.ndarray, mixture: Mixture) -> tuple[float, float]:
    """(mode-weight TV, within-mode sd ratio) of particles ``x`` (nearest-mean modes)."""
    labels = np.argmin(((x[:, None, :] - mixture.means[None]) ** 2).sum(-1), axis=1)
    p = np.bincount(labels, minlength=len(mixture.weights)) / len(x)
    sds = [x[labels == k].std(axis=0).mean() for k in range(len(p)) if (labels == k).sum() > 1]
    return float(0.5 * np.abs(p - mixture.weights).sum()), float(np.mean(sds))


def _etd_runs(mixture, seeds, num_particles, num_steps, settings):
    """ETD (defaults unless ``settings``) on every seed, vmapped: per-seed final particles,
    ``mass_lost``, ``collapsed``, final ``α``/``h``, and the evaluations per seed."""
    logdensity = smc_peer.counted(_logdensity(mixture))
    alg = jaxsample.etd(logdensity, score_fn="autodiff", **settings)
    dim = mixture.means.shape[1]

    def one(seed):
        k0, k1 = jax.random.split(jax.random.key(seed))
        x0 = mixture.start_scale * jax.random.normal(k0, (num_particles, dim))
        state, info = jaxsample.run(k1, alg, alg.init(x0), num_steps)
        return (state.positions, state.mass_lost, state.collapsed, info.proposal_step[-1],
                info.mutation_step_size[-1])

    out, counts = smc_peer.tallied(jax.jit(jax.vmap(one)), jnp.asarray(list(seeds)))
    per_seed = {k: v // len(seeds) for k, v in counts.items()}
    return [np.asarray(v) for v in out], per_seed


def _smc_runs(mixture, seeds, num_particles, num_mcmc_steps):
    logdensity = _logdensity(mixture)
    dim = mixture.means.shape[1]
    results = []
    for seed in seeds:
        k0, k1 = jax.random.split(jax.random.key(seed))
        x0 = mixture.start_scale * jax.random.normal(k0, (num_particles, dim))
        x, info = smc_peer.adaptive_tempered_smc(k1, logdensity, x0,
                                                 prior_scale=mixture.start_scale,
                                                 num_mcmc_steps=num_mcmc_steps)
        results.append((np.asarray(x), info))
    return results


def _row(mixture, method, particles_per_seed, counts, num_particles, extra):
    metrics = [mode_metrics(x, mixture) for x in particles_per_seed]
    tv = np.array([m[0] for m in metrics])
    floor = floor_tv(mixture.weights, num_particles)
    return Row(mixture.name, method, {
        "N": num_particles,
        "mode-weight TV (mean)": float(tv.mean()),
        "TV per seed": " ".join(f"{v:.3f}" for v in tv),
        "floor (N exact)": floor,
        "x floor": float(tv.mean() / floor),
        "goal <= 2x floor": "met" if tv.mean() <= 2 * floor else "missed",
        "within-mode sd ratio": float(np.mean([m[1] for m in metrics])),
        "density evals": counts["density_evals"],
        "gradient evals": counts["gradient_evals"],
        **extra})


def _suite(size):
    quick = size == "quick"
    mixtures = MIXTURES[:1] if quick else MIXTURES
    seeds = range(2 if quick else 5)
    n, steps = (100, 40) if quick else (200, 200)
    rows, verdicts = [], []
    for mixture in mixtures:
        (positions, lost, collapsed, *_), counts = _etd_runs(mixture, seeds, n, steps, {})
        rows.append(_row(mixture, f"ETD defaults ({steps} steps)", positions, counts, n, {
            "mass_lost raised": f"{int(lost.sum())}/{len(lost)}",
            "collapsed raised": f"{int(collapsed.sum())}/{len(collapsed)}"}))
        etd_tv = rows[-1].metrics["mode-weight TV (mean)"]
        etd_evals = counts["density_evals"]
        for smc_n, moves in ((n, 10),) if quick else ((n, 10), (10 * n, 30)):
            runs = _smc_runs(mixture, seeds, smc_n, moves)
            mean_counts = {k: int(np.mean([info[k] for _, info in runs]))
                           for k in ("density_evals", "gradient_evals")}
            rows.append(_row(mixture, f"SMC (BlackJAX adaptive tempered, MALA, {moves} "
                             "moves/stage)", [x for x, _ in runs], mean_counts, smc_n, {
                                 "stages": float(np.mean([i["num_stages"] for _, i in runs])),
                                 "reached 1": f"{sum(i['reached_one'] for _, i in runs)}/"
                                              f"{len(runs)}"}))
            if smc_n != n:
                smc_tv = rows[-1].metrics["mode-weight TV (mean)"]
                ratio = mean_counts["density_evals"] / etd_evals
                verdicts.append(
                    f"{mixture.name}: ETD {etd_tv:.3f} against SMC {smc_tv:.3f} at "
                    f"{ratio:.2f}x ETD's densities: "
                    + ("met" if etd_tv <= smc_tv else f"missed by {etd_tv / smc_tv:.2f}x"))
    notes = [
        f"ETD: N = {n}, {steps} steps, defaults, {len(seeds)} seeds, start N(0, s² I) (s per "
        "mixture: 2-4, covering the modes); SMC: the same start law as its prior, N and MALA "
        "moves per stage as named; evaluations per run (seed mean) read from instrumented "
        "calls; densities include those with a gradient.",
        "Floor: E[TV] of N exact draws (multinomial, simulated); 'x floor' is the row's mean TV "
        "over it. Goal (issue 48): the defaults' TV within 2x the floor on every mixture.",
    ]
    if verdicts:
        notes.append("Goal: ETD's TV at or below SMC's at equal density evaluations (SMC with "
                     "10x the particles and 30 moves per stage, about ETD's evaluations): "
                     + "; ".join(verdicts) + ".")
    return BenchTable("Multimodal suite: mode weights, ETD defaults against BlackJAX tempered "
                      "SMC", rows, notes)


DIAGNOSIS_VARIANTS = {
    "defaults": {},
    "proposal step always following the mutation step (the earlier default)":
        {"proposal_adaptation": ProposalAdaptation(follows_mutation=True)},
    "the earlier default, no weight guard":
        {"proposal_adaptation": ProposalAdaptation(follows_mutation=True), "min_weight_ess": 0.0},
    "the earlier default, mutation step not adapted":
        {"proposal_adaptation": ProposalAdaptation(follows_mutation=True),
         "mutation": Mutation(adaptation_rate=0.0)},
    "no mutation (the paper's step)": {"mutation": Mutation(steps=0)},
    "preconditioner 'fisher'": {"preconditioner": "fisher"},
}


def _diagnosis(size):
    quick = size == "quick"
    mixture = MIXTURES[1]
    n, steps, seeds = 200, (60 if quick else 200), range(2 if quick else 5)
    rows = []
    variants = list(DIAGNOSIS_VARIANTS.items())[:2] if quick else DIAGNOSIS_VARIANTS.items()
    for name, settings in variants:
        (positions, lost, collapsed, alpha, h), counts = _etd_runs(mixture, seeds, n, steps,
                                                                   settings)
        rows.append(_row(mixture, name, positions, counts, n, {
            "final alpha": float(alpha.mean()), "final h": float(h.mean()),
            "mass_lost raised": f"{int(lost.sum())}/{len(lost)}",
            "collapsed raised": f"{int(collapsed.sum())}/{len(collapsed)}"}))
    notes = [
        f"N = {n}, {steps} steps, start N(0, 4I), {len(seeds)} seeds.",
        "Mechanism (each row changes one thing): the ensemble covariance of a two-mode cloud is "
        "dominated by the distance between the modes (variance ~76 along the axis joining them, 1 "
        "across), so in whitened coordinates the modes are 0.11 wide along that axis; the MALA "
        "step adapts to the narrow axis (h -> 0.03-0.05). When the proposal step follows it (the "
        "earlier default), the proposals become a spiky kernel estimate of the cloud, the "
        "importance weights heavy-tailed, and the mode holding fewer particles gets less than its "
        "share in a typical step: a positive feedback that empties it (by step 15-30), unseen by "
        "every local check; the evidence estimate falls by log(1/0.7) and mass_lost sees it. The "
        "defaults follow the MALA step only while the weight guard tempers (by 1 - beta), which "
        "on these modes is only in the first steps.",
    ]
    return BenchTable("ETD: mode weights on two separated modes (d = 10), the defaults and one "
                      "change each", rows, notes)


def run(size: str) -> list[BenchTable]:
    return [_suite(size), _diagnosis(size)]
