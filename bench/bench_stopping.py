"""Learned stopping on the paper's targets: one level and the multilevel scheme vs fixed length.

GMM9 (the paper's: std 0.740, unequal weights, d = 2) and ManyWell at d = 32 with the paper's
p₀ = N(0, 3²I) (65 536 modes), MALA base kernel. Rows: a stopping net trained by
``train_stopping`` (Poisson/TD + minimal flow) with ``levels=1`` and with the paper's multilevel
scheme ``levels=2`` (run by ``sample_multilevel``), and fixed-length MALA at the learned chain's
mean length from the same starts. Metrics as in the paper where they apply: forward length
(mean moves); MMD² with a Gaussian kernel of median bandwidth (the paper's; the reference
sample's median pairwise distance, fixed across rows; on GMM9 it is ~7, wider than the modes,
and hardly tells the rows apart) and of the search bandwidth (1 on GMM9, the median on ManyWell-32,
where distances are ~8 and bandwidth 1 gives 0) that the equal-quality search uses; the
Sinkhorn divergence (ott-jax, squared Euclidean cost, ott's default ε = 5 % of the mean cost);
mode-weight TV and the normalised entropy of the mode histogram (GMM9); the mean per-well weight
error (ManyWell: the fraction of each well's first coordinate right of the saddle against
0.844); and the fixed length fixed-length MALA needs to reach the learned chain's MMD² at
the search bandwidth (every length to 16, then a ×1.5 grid, from one scan). The goal: ≥ 30 %
fewer steps than fixed length at equal MMD². Not reported: the paper's ELBO/EUBO and reverse
lengths need the density of the trajectory under a learned backward kernel, which a stopped
fixed-kernel chain does not have. At full size a note gives the exact minimal-flow rule
on a discretised version (``optimal_stop_tabular`` on a grid MALA; for ManyWell one well's first
coordinate): ``E[L*]`` of one level and of two levels, what exact termination costs.

jaxsample's choices: GMM9's p₀ is N(0, 5²I), not the paper's N(0, I): the paper's learned
forward kernel jumps between modes, a local MALA from N(0, I) must cross 6.8σ barriers to reach
eight of the nine modes. MALA step sizes 0.3 (GMM9) and 0.005 (ManyWell-32: from p₀ = N(0, 3²I)
a coordinate at |x| = 6 has a gradient near 800, and MALA at 0.05 accepted 1e-11 of its moves
over 400 steps from p₀, at 0.01 a third, at 0.003 95 %).

A second table (:func:`study_defaults`, quality only) re-measures learned stopping at
``train_stopping``'s *defaults* on three d = 2 targets with exact draws (a banana, a correlated
Gaussian, a two-mode mixture), 5 seeds, against fixed-length MALA at equal moves and at equal
density evaluations. Measured (full size, energy distance, mean ± se): banana learned
0.434 ± 0.026 vs fixed 0.0186 ± 0.0013 (equal moves) / 0.0163 ± 0.0019 (equal evaluations);
correlated Gaussian (4 seeds; the fifth's fit went NaN) 0.164 ± 0.030 vs 0.168 ± 0.019 /
0.116 ± 0.012; mixture 0.0062 ± 0.0015 vs 0.0188 ± 0.0030 / 0.0030 ± 0.0009; floors
0.0017-0.0025. No win at equal cost: learned stopping loses on the banana, ties at equal moves
and loses at equal evaluations on the Gaussian, and beats only equal moves on the mixture.
"""

from __future__ import annotations

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row
from ott.geometry import pointcloud
from ott.tools.sinkhorn_divergence import sinkhorn_divergence

from jaxsample.diagnostics import energy_distance, mmd
from jaxsample.kernels import pairwise
from jaxsample.mcmc import (
    adaptive_stop,
    mala,
    optimal_stop_tabular,
    sample_multilevel,
    sample_until_stopped,
    train_stopping,
)
from jaxsample.targets import GMM9, Banana, ManyWell

_CHAINS = {"quick": 256, "full": 2048, "gpu": 16384}
_TRAIN_STEPS = {"quick": 40, "full": 1000, "gpu": 3000}
_POOL_STEPS = {"quick": 20, "full": 100, "gpu": 100}
_EVAL = 2048  # rows compared with the reference (MMD², Sinkhorn)


def _checkpoints(length, horizon):
    """Fixed lengths probed for equal MMD: every length to 16, then ×1.5, to ``horizon``."""
    grid, value = set(range(1, 17)), 16.0
    while value < horizon:
        value *= 1.5
        grid.add(int(round(value)))
    return sorted(grid | {length})


def _fixed_mala_curve(key, logdensity, step_size, x0, checkpoints):
    """Fixed-length MALA positions after each of ``checkpoints`` steps (one scan, one compile)."""
    alg = mala(logdensity, step_size=step_size)
    marks = jnp.asarray(checkpoints)

    @jax.jit
    def go(key, x0):
        states = jax.vmap(alg.init)(x0)
        keys = jax.random.split(key, x0.shape[0])
        buffer = jnp.zeros((len(checkpoints),) + x0.shape, x0.dtype)

        def body(carry, t):
            states, buffer = carry
            states, _ = jax.vmap(alg.step)(jax.vmap(jax.random.fold_in, (0, None))(keys, t),
                                           states)
            hit = marks == t + 1
            buffer = jnp.where(hit[:, None, None], states.position[None], buffer)
            return (states, buffer), None

        (_, buffer), _ = jax.lax.scan(body, (states, buffer), jnp.arange(checkpoints[-1]))
        return buffer

    return go(key, x0)


def _discrete_mala(logpi, points, step_size):
    """MALA on a grid (Gaussian proposal renormalised over the grid, MH-corrected): reversible
    w.r.t. the grid's normalised π; returns ``(K, π)`` in float64."""
    lp = logpi(points)
    eps = 1e-5
    score = np.stack([(logpi(points + eps * e) - logpi(points - eps * e)) / (2 * eps)
                      for e in np.eye(points.shape[1])], 1)
    mean = points + step_size * score
    log_q = -((points[None, :, :] - mean[:, None, :]) ** 2).sum(-1) / (4 * step_size)
    log_q -= np.logaddexp.reduce(log_q, axis=1, keepdims=True)
    k = np.exp(log_q + np.minimum(0.0, lp[None, :] + log_q.T - lp[:, None] - log_q))
    np.fill_diagonal(k, 0.0)
    # the rejection mass; round-off can push it a few ulps below 0 where every move is accepted
    k[np.diag_indices_from(k)] = np.maximum(1.0 - k.sum(axis=1), 0.0)
    k /= k.sum(axis=1, keepdims=True)
    return k, np.exp(lp - np.logaddexp.reduce(lp))


def _exact_rule_bound(logpi, points, step_size, init_std, max_steps, levels):
    """The exact minimal-flow rule on a discretised problem: ``E[L*]`` of one level and of
    ``levels`` levels (the sum of the levels' ``E[L*_l]``, level ``l`` from ``π_{l−1}`` to
    ``π_l`` by a discretised MALA on ``π_l``), the TV of fixed length ``round(E[L*])`` and the
    fixed length reaching TV 0.01 (searched to ``max_steps``)."""
    lp0 = -0.5 * (points**2).sum(1) / init_std**2
    p0 = np.exp(lp0 - np.logaddexp.reduce(lp0))
    k, pi = _discrete_mala(logpi, points, step_size)
    multilevel, start = 0.0, p0
    with jax.enable_x64(True):
        _, info = optimal_stop_tabular(k, p0, pi)
        for level in range(levels):
            beta = (level + 1) / levels
            k_l, pi_l = _discrete_mala(lambda x, b=beta: b * logpi(x) - (1 - b) * 0.5 * (
                x**2).sum(1) / init_std**2, points, step_size)
            _, info_l = optimal_stop_tabular(k_l, start, pi_l)
            multilevel += float(info_l.expected_length)
            start = pi_l
    length = float(info.expected_length)
    matched = max(int(round(length)), 1)
    law, tv_matched, needed = p0, None, None
    for t in range(1, max_steps + 1):
        law = law @ k
        tv = 0.5 * np.abs(law - pi).sum()
        if t == matched:
            tv_matched = tv
        if tv <= 0.01:
            needed = t
            break
    return length, multilevel, matched, tv_matched, needed


def _mode_metrics(target, x):
    """GMM9: (mode-weight TV, normalised mode entropy); ManyWell: (mean per-well weight error,
    None)."""
    if isinstance(target, ManyWell):
        right = np.asarray(x[:, 0::2] > target.saddle).mean(0)
        return float(np.abs(right - float(target.well_weights[1])).mean()), None
    weights = np.asarray(target.mode_weights)
    counts = np.bincount(np.asarray(target.assign_mode(x)), minlength=weights.shape[0])
    freq = counts / counts.sum()
    nz = freq[freq > 0]
    entropy = float(-(nz * np.log(nz)).sum() / np.log(weights.shape[0]))
    return 0.5 * float(np.abs(freq - weights).sum()), entropy


def _sinkhorn(x, y):
    return float(sinkhorn_divergence(pointcloud.PointCloud, x=x, y=y)[0])


def _grid_logpi(target):
    def logpi(points):
        with jax.enable_x64(True):
            return np.asarray(jax.vmap(target.logdensity)(jnp.asarray(points, jnp.float64)))
    return logpi


def _well_logpi(points):
    x = points[:, 0]
    return -(x**4) + 6 * x**2 + 0.5 * x


# the exact-rule bound of each stopping problem, discretised (full / gpu sizes only)
_BOUNDS = {
    "GMM9": ("2-D grid, spacing 0.5 on [-15, 15]²",
             lambda: np.stack(np.meshgrid(*(np.linspace(-15, 15, 61),) * 2, indexing="ij"),
                              -1).reshape(-1, 2), 2000),
    "ManyWell": ("one well's first coordinate, spacing 0.025 on [-3.5, 3.5]",
                 lambda: np.linspace(-3.5, 3.5, 281)[:, None], 100_000),
}


def _stopping_rows(size, name, target, step_size, init_std, max_steps, search_bandwidth):
    n = _CHAINS[size]
    dim = target.dim
    keys = jax.random.split(jax.random.key(0), 8)
    logpi = target.logdensity

    def logp0(x):
        return (-0.5 * jnp.sum(x * x) / init_std**2 - dim * math.log(init_std)
                - 0.5 * dim * math.log(2 * math.pi))

    x0 = init_std * jax.random.normal(keys[0], (n, dim))
    reference = target.sample(keys[1], _EVAL)
    bandwidth = float(pairwise.median_scale(reference))
    search_h = bandwidth if search_bandwidth is None else search_bandwidth

    def distance(x, h=search_h):
        return float(mmd(x[:_EVAL], reference, bandwidth=h)[0])

    kernel = functools.partial(mala, step_size=step_size)
    results, notes = {}, []
    for levels in (1, 2):
        t0 = time.perf_counter()
        net, info = train_stopping(keys[2], kernel, logpi, logp0, x0[: min(n, 512)],
                                   levels=levels, num_steps=_TRAIN_STEPS[size],
                                   pool_steps=_POOL_STEPS[size], batch_size=256,
                                   learning_rate=1e-3, flow_penalty=1e-2, width=32, depth=2)
        jax.block_until_ready(net.log_z)
        train_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        if levels == 1:
            wrapped = adaptive_stop(kernel(logpi), net, max_steps=max_steps)
            x, stop = sample_until_stopped(keys[3], wrapped, x0)
        else:
            x, stop = sample_multilevel(keys[3], kernel, logpi, logp0, net, x0,
                                        max_steps=max_steps)
        jax.block_until_ready(x)
        results[levels] = (x, stop, time.perf_counter() - t0, train_seconds, info, net)
    # fixed length at each learned chain's mean length, and the equal-MMD search, from one scan
    lengths = {lv: max(int(round(float(r[1].lengths.mean()))), 1) for lv, r in results.items()}
    checkpoints = sorted(set(_checkpoints(lengths[1], 64 if size == "quick" else 16 * max_steps))
                         | set(lengths.values()))
    t0 = time.perf_counter()
    curve = _fixed_mala_curve(keys[5], logpi, step_size, x0, checkpoints)
    curve_seconds = time.perf_counter() - t0
    curve_mmd = [distance(x) for x in curve]
    case = f"{name} (d={dim}, n={n})"
    rows = []
    for levels, (x, stop, seconds, train_seconds, info, net) in results.items():
        mean_length = float(stop.lengths.mean())
        value = distance(x)
        needed, below = None, 0
        for steps, d in zip(checkpoints, curve_mmd, strict=True):
            if d <= value:
                needed = steps
                break
            below = steps
        if needed and needed > below + 1:  # the grid brackets it
            saving = f"{1 - mean_length / (below + 1):.0%} to {1 - mean_length / needed:.0%}"
            needed_text = f"{below + 1}-{needed}"
        elif needed:
            saving, needed_text = f"{1 - mean_length / needed:.0%}", f"{needed}"
        else:
            saving = f"> {1 - mean_length / checkpoints[-1]:.0%} (not reached)"
            needed_text = f"> {checkpoints[-1]}"
        mode_error, entropy = _mode_metrics(target, x)
        label = "one level" if levels == 1 else f"multilevel, L = {levels}"
        rows.append(Row(case, f"learned stopping, {label} (MALA base)", {
            "forward length": f"{mean_length:.1f}",
            "truncated": f"{float(stop.truncated.mean()):.3f}",
            "MMD² (search h)": f"{value:.4f}", "MMD² (median h)": f"{distance(x, bandwidth):.2e}",
            "Sinkhorn": f"{_sinkhorn(x[:_EVAL], reference):.3f}",
            "mode error": f"{mode_error:.3f}",
            "mode entropy": "-" if entropy is None else f"{entropy:.3f}",
            "fixed steps for equal MMD²": needed_text, "steps saved": saving,
            "train (s)": f"{train_seconds:.1f}"}, seconds))
        met = needed is not None and mean_length <= 0.7 * (below + 1)
        log_z = float(jnp.sum(net.log_z))
        notes.append(
            f"{case}, {label}: MMD² {value:.4f} in {mean_length:.1f} mean steps "
            f"({float(stop.truncated.mean()):.1%} truncated at {max_steps} per level); "
            f"fixed-length MALA needs {needed_text} — goal (≥ 30% fewer steps) "
            f"{'met' if met else 'missed'}; training: {_TRAIN_STEPS[size]} Adam steps, final "
            f"loss {float(info.losses[-100:].mean()):.3g}, nonfinite {bool(info.nonfinite)}, "
            f"log Z {log_z:+.3f} (exact 0).")
    for levels, length in sorted(set((lv, lengths[lv]) for lv in lengths)):
        x_fixed = curve[checkpoints.index(length)]
        mode_error, entropy = _mode_metrics(target, x_fixed)
        rows.append(Row(case, f"fixed-length MALA, L = {length}", {
            "forward length": length, "truncated": "-",
            "MMD² (search h)": f"{distance(x_fixed):.4f}",
            "MMD² (median h)": f"{distance(x_fixed, bandwidth):.2e}",
            "Sinkhorn": f"{_sinkhorn(x_fixed[:_EVAL], reference):.3f}",
            "mode error": f"{mode_error:.3f}",
            "mode entropy": "-" if entropy is None else f"{entropy:.3f}"},
            curve_seconds if levels == 1 else None, peer=True))
    if size != "quick":
        what, grid, horizon = _BOUNDS[name]
        grid_logpi = _well_logpi if name == "ManyWell" else _grid_logpi(target)
        bound, bound_ml, matched, tv_matched, tv_needed = _exact_rule_bound(
            grid_logpi, grid(), step_size, init_std, horizon, 2)
        at_matched = (f"fixed length {matched} is at TV {tv_matched:.3f}" if tv_matched is not None
                      else f"fixed length {matched} is past the {horizon}-step search")
        notes.append(
            f"{name}, exact rule on a discretised MALA ({what}, p₀ = N(0, {init_std:g}²)): σ* "
            f"ends exactly at π in E[L*] = {bound:.1f} mean steps with one level and "
            f"{bound_ml:.1f} with two; {at_matched}; fixed length needs "
            f"{tv_needed if tv_needed else f'> {horizon}'} steps for TV 0.01.")
    return rows, notes


def _stopping_table(size):
    rows, notes = [], []
    problems = [("GMM9", GMM9(), 0.3, 5.0, 400, 1.0)]
    if size != "quick":
        problems.append(("ManyWell", ManyWell(dim=32), 0.005, 3.0, 400, None))
    for name, target, step, std, cap, search_h in problems:
        r, note = _stopping_rows(size, name, target, step, std, cap, search_h)
        rows += r
        notes += note
    return BenchTable(
        "Learned stopping (one level; the paper's multilevel scheme) vs fixed-length MALA at "
        "matched mean length, on the paper's GMM9 and ManyWell-32", rows,
        notes + ["Time columns: the stopped batch (compile included) and, on the first "
                 "fixed-length row, the whole fixed-length scan used for the equal-MMD² search; "
                 "training time separate."])


# The defaults study: train_stopping at its defaults against fixed-length MALA at equal cost, on
# three small targets with exact draws, over seeds (quality only).
_STUDY_SEEDS = {"quick": 2, "full": 5, "gpu": 5}
_STUDY_CHAINS = 2048
_STUDY_INIT_STD = 3.0
_STUDY_CAP = 2000


def _study_targets():
    """(name, logdensity, exact sampler, MALA step size): a banana, a correlated Gaussian and a
    two-mode mixture, all in d = 2, none of them the paper's."""
    banana = Banana(b=0.5, a=1.0, sigma1=1.0, sigma2=1.0)
    cov = jnp.array([[1.0, 1.2], [1.2, 4.0]])  # correlation 0.6, scales 1 and 2
    mean = jnp.array([0.5, -1.0])
    chol = jnp.linalg.cholesky(cov)
    precision = jnp.linalg.inv(cov)

    log_norm = math.log(2 * math.pi) + 0.5 * math.log(float(jnp.linalg.det(cov)))

    def gauss_logpi(x):  # normalised, as is every target here (log Z = 0)
        u = x - mean
        return -0.5 * u @ precision @ u - log_norm

    def gauss_sample(key, n):
        return mean + jax.random.normal(key, (n, 2)) @ chol.T

    centres, std = jnp.array([[-1.5, 0.0], [1.5, 0.0]]), 0.7

    def mixture_logpi(x):
        return (jax.nn.logsumexp(-0.5 * jnp.sum((x - centres) ** 2, axis=1) / std**2)
                - math.log(2 * 2 * math.pi * std**2))

    def mixture_sample(key, n):
        k1, k2 = jax.random.split(key)
        side = jax.random.bernoulli(k1, 0.5, (n,)).astype(jnp.int32)
        return centres[side] + std * jax.random.normal(k2, (n, 2))

    return [("banana (b = 0.5, σ₁ = σ₂ = 1)", banana.logdensity, banana.sample, 0.1),
            ("correlated Gaussian (ρ = 0.6, sd 1 / 2)", gauss_logpi, gauss_sample, 0.3),
            ("two-mode mixture (±1.5, sd 0.7)", mixture_logpi, mixture_sample, 0.2)]


def _energy(x, y):
    return float(energy_distance(x, y)[0])


def study_defaults(size: str = "full"):
    """Per target and seed: train_stopping at its defaults (2 000 Adam steps at 1e-2, pool 50,
    batch 256, 64 x 2 MLP) from 512 draws of p₀ = N(0, 3²I), then 2 048 stopped chains; against
    fixed-length MALA from the same starts at the learned mean length (equal moves) and at twice
    it (equal density evaluations: a stopped move also evaluates σ, i.e. log p₀ and log π̃);
    energy distance to 2 048 exact draws, beside the floor (two exact samples). Returns
    ``{target: {column: (seeds,) values}}``."""
    out = {}
    for name, logpi, sampler, step_size in _study_targets():
        def logp0(x):  # normalised, as train_stopping's docs ask
            return (-0.5 * jnp.sum(x * x) / _STUDY_INIT_STD**2
                    - math.log(2 * math.pi * _STUDY_INIT_STD**2))

        kernel = mala(logpi, step_size=step_size)
        cols = {k: [] for k in ("length", "truncated", "learned", "fixed (equal moves)",
                                "fixed (equal evaluations)", "floor", "final loss")}
        for seed in range(_STUDY_SEEDS[size]):
            keys = jax.random.split(jax.random.key(1000 + seed), 6)
            x0 = _STUDY_INIT_STD * jax.random.normal(keys[0], (_STUDY_CHAINS, 2))
            net, info = train_stopping(keys[1], kernel, logpi, logp0, x0[:512])
            wrapped = adaptive_stop(kernel, net, max_steps=_STUDY_CAP)
            x, stop = sample_until_stopped(keys[2], wrapped, x0)
            reference = sampler(keys[3], _STUDY_CHAINS)
            length = max(int(round(float(stop.lengths.mean()))), 1)
            marks = sorted({length, 2 * length})
            curve = _fixed_mala_curve(keys[4], logpi, step_size, x0, marks)
            cols["length"].append(float(stop.lengths.mean()))
            cols["truncated"].append(float(stop.truncated.mean()))
            cols["learned"].append(_energy(x, reference))
            cols["fixed (equal moves)"].append(_energy(curve[marks.index(length)], reference))
            cols["fixed (equal evaluations)"].append(
                _energy(curve[marks.index(2 * length)], reference))
            cols["floor"].append(_energy(sampler(keys[5], _STUDY_CHAINS), reference))
            cols["final loss"].append(float(info.losses[-100:].mean()))
        out[name] = {k: np.asarray(v) for k, v in cols.items()}
    return out


def _mean_se(v):
    se = float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
    return f"{float(np.mean(v)):.4f} ± {se:.4f}"


def _study_table(size):
    results = study_defaults(size)
    rows = []
    for name, cols in results.items():
        diff = cols["learned"] - cols["fixed (equal moves)"]
        rows.append(Row(name, "train_stopping defaults vs fixed-length MALA", {
            "mean length": f"{cols['length'].mean():.1f}",
            "truncated": f"{cols['truncated'].mean():.3f}",
            "energy: learned": _mean_se(cols["learned"]),
            "fixed, equal moves": _mean_se(cols["fixed (equal moves)"]),
            "fixed, equal evaluations": _mean_se(cols["fixed (equal evaluations)"]),
            "learned − fixed (moves)": _mean_se(diff),
            "floor (exact draws)": _mean_se(cols["floor"])}))
    return BenchTable(
        f"Learned stopping at train_stopping's defaults vs fixed-length MALA at equal cost "
        f"({_STUDY_SEEDS[size]} seeds, mean ± se; energy distance to {_STUDY_CHAINS} exact draws)",
        rows, ["p₀ = N(0, 3²I), 512 training starts, 2 048 chains, cap 2 000 moves. Equal moves: "
               "fixed length round(mean L); equal evaluations: 2 round(mean L) (σ costs a "
               "log p₀ and a log π̃ evaluation per visit). Training (2 000 steps x 256 states x 2 "
               "moves) is not counted. Floor: energy distance between two exact samples."])


def run(size: str) -> list[BenchTable]:
    return [_stopping_table(size), _study_table(size)]
