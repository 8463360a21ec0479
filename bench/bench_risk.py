"""Repeated-sampling risk: SABER ASR@1000 forecasts from 200 attempts, exact Best-of-N, GPD fits.

1. **SABER.** Synthetic "models" of 300 prompts, 200 attempts each (success probabilities θ_i of
   the model's prompts). Well specified: θ_i ~ Beta(α, β), α ~ U(0.05, 0.6), β ~ U(1, 30).
   Misspecified: a two-Beta mixture (hard and easy prompts), zero inflation (π₀ ~ U(0.2, 0.5)),
   and log-uniform θ on [1e-5, 1e-1] (heavy mass near 0). Predictors of ASR@1000 from the 200
   attempts: SABER population / conditional / anchored (beta-binomial MLE; anchored also with a
   zero-inflated fit) against plug-in θ̂ = c/n, carry-forward of the observed ASR@200 and a
   power-law fit of log(1 − ASR@k) on log k over the unbiased pass@k curve. MAE in percentage
   points over the models, against three labelled targets: *prompts* = mean_i[1 − (1 − θ_i)^1000]
   (these prompts, from the true θ; the issue's target), *realised* = the fraction of these
   prompts broken within 1000 attempts, the observed 200 counted (800 more simulated), and
   *population* = E[1 − (1 − θ)^1000] under the generator (a new prompt).
2. **Best-of-N.** p = 0.3 and the reward pairs (A) N(1, 1.2²) vs N(0, 1), (B) N(1, 1) vs N(0, 1),
   (C) N(1, 1) vs N(0, 1.5²), (D) shifted exponentials with survival ratio 1 : 3. Quadrature
   (``bon_accuracy``) against an adaptive x-space reference (SciPy ``quad``, float64) and against
   Monte Carlo by class maxima (``bon_simulate``, 10⁷ draws at full size), with times.
3. **GPD fits.** ``kernels.extremes.gpd_fit`` (vmapped over data sets) against
   ``scipy.stats.genpareto.fit(floc=0)`` (pyextremes' MLE model calls the same SciPy fit).

All in float64.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.special
import scipy.stats
from harness import BenchTable, Row, time_fn

from jaxsample import risk
from jaxsample.kernels import extremes

N_OBSERVED, N_TARGET, NUM_PROMPTS = 200, 1000, 300


# ----------------------------------------------------------------------------------------------
# SABER


def _generate(kind, num_models, rng):
    """θ of shape (models, prompts) and the population ASR@1000 of each model's generator."""
    theta = np.empty((num_models, NUM_PROMPTS))
    population = np.empty(num_models)

    def beta_asr(a, b):
        return -np.expm1(scipy.special.betaln(a, b + N_TARGET) - scipy.special.betaln(a, b))

    for i in range(num_models):
        if kind == "well-specified":
            a, b = rng.uniform(0.05, 0.6), rng.uniform(1, 30)
            theta[i] = rng.beta(a, b, NUM_PROMPTS)
            population[i] = beta_asr(a, b)
        elif kind == "Beta mixture":
            a1, b1 = rng.uniform(0.05, 0.3), rng.uniform(20, 60)
            a2, b2 = rng.uniform(0.5, 2.0), rng.uniform(1, 5)
            easy = rng.random(NUM_PROMPTS) < 0.5
            theta[i] = np.where(easy, rng.beta(a2, b2, NUM_PROMPTS), rng.beta(a1, b1, NUM_PROMPTS))
            population[i] = 0.5 * (beta_asr(a1, b1) + beta_asr(a2, b2))
        elif kind == "zero-inflated":
            a, b, pi0 = rng.uniform(0.05, 0.6), rng.uniform(1, 30), rng.uniform(0.2, 0.5)
            theta[i] = rng.beta(a, b, NUM_PROMPTS) * (rng.random(NUM_PROMPTS) >= pi0)
            population[i] = (1 - pi0) * beta_asr(a, b)
        else:  # log-uniform on [1e-5, 1e-1]
            theta[i] = 10.0 ** rng.uniform(-5, -1, NUM_PROMPTS)
            grid = 10.0 ** np.linspace(-5, -1, 20001)
            population[i] = np.mean(-np.expm1(N_TARGET * np.log1p(-grid)))
    return theta, population


def _power_law(successes):
    """log(1 − ASR@k) = a + b log k fitted on the unbiased curve, extrapolated to 1000."""
    ks = np.unique(np.round(np.geomspace(1, N_OBSERVED, 12)))
    curve = np.asarray(jax.vmap(
        lambda c: risk.unbiased_asr_at_k(c, N_OBSERVED, jnp.asarray(ks))[0])(
        jnp.asarray(successes, jnp.float64)))
    survival = np.clip(1 - curve, 1e-12, 1)
    x = np.log(ks)
    design = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(design, np.log(survival).T, rcond=None)
    return 1 - np.exp(coef[0] + coef[1] * math.log(N_TARGET))


def _saber_predictions(successes):
    """SABER predictions for every model (one vmap over models) and the fit time."""
    c = jnp.asarray(successes, jnp.float64)

    def predict(c_model, zero_inflated):
        fit, info = risk.fit_beta_binomial(c_model, float(N_OBSERVED),
                                           zero_inflated=zero_inflated, max_trials=N_OBSERVED)
        return (risk.asr_at_n(N_TARGET, fit.alpha, fit.beta, fit.pi0)[0],
                risk.asr_conditional(N_TARGET, c_model, float(N_OBSERVED), fit.alpha, fit.beta,
                                     fit.pi0)[0],
                risk.asr_anchored(N_TARGET, c_model, float(N_OBSERVED), fit.alpha, fit.beta,
                                  fit.pi0)[0],
                info.solver.converged)

    plain = jax.jit(jax.vmap(lambda x: predict(x, False)))
    inflated = jax.jit(jax.vmap(lambda x: predict(x, True)))
    seconds, out = time_fn(plain, c, repeats=2)
    _, out_zi = time_fn(inflated, c, repeats=1)
    return seconds, [np.asarray(v) for v in out], [np.asarray(v) for v in out_zi]


def _saber_table(size):
    num_models = 8 if size == "quick" else 40
    kinds = (["well-specified", "zero-inflated"] if size == "quick" else
             ["well-specified", "Beta mixture", "zero-inflated", "log-uniform θ"])
    rows, notes, headline = [], [], {}
    for kind in kinds:
        rng = np.random.default_rng({"well-specified": 0, "Beta mixture": 1,
                                     "zero-inflated": 2}.get(kind, 3))
        theta, population = _generate(kind, num_models, rng)
        successes = rng.binomial(N_OBSERVED, theta)
        more = rng.binomial(N_TARGET - N_OBSERVED, theta)
        targets = {
            "prompts": np.mean(-np.expm1(N_TARGET * np.log1p(-theta)), axis=1),
            "realised": np.mean((successes > 0) | (more > 0), axis=1),
            "population": population,
        }
        seconds, (pop, cond, anch, conv), (_, _, anch_zi, conv_zi) = _saber_predictions(
            successes)
        t0 = time.perf_counter()
        with np.errstate(divide="ignore"):   # θ̂ = 1: log1p(-1) = -inf, ASR 1 (exact)
            plug = np.mean(-np.expm1(N_TARGET * np.log1p(-successes / N_OBSERVED)), axis=1)
        carry = np.mean(successes > 0, axis=1)
        baseline_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        power = _power_law(successes)
        power_seconds = time.perf_counter() - t0
        predictors = [
            ("SABER population", pop, seconds),
            ("SABER conditional (1000 fresh)", cond, None),
            ("SABER anchored", anch, None),
            ("SABER anchored, zero-inflated fit", anch_zi, None),
            ("plug-in θ̂ = c/n", plug, baseline_seconds),
            ("carry-forward ASR@200", carry, None),
            ("power law on pass@k", power, power_seconds),
        ]
        for name, prediction, secs in predictors:
            metrics = {f"MAE vs {t} (pp)": 100 * float(np.mean(np.abs(prediction - v)))
                       for t, v in targets.items()}
            rows.append(Row(kind, name, metrics, seconds=secs, peer=name.startswith("plug")))
            if kind == "well-specified":
                headline[name] = metrics["MAE vs prompts (pp)"]
        if not (np.all(conv) and np.all(conv_zi)):
            notes.append(f"{kind}: {int(np.sum(~conv))} plain and {int(np.sum(~conv_zi))} "
                         "zero-inflated fits did not converge")
    anchored = headline["SABER anchored"]
    baselines = {k: v for k, v in headline.items() if not k.startswith("SABER")}
    best_name = min(baselines, key=baselines.get)
    met = anchored <= 1.5 and anchored < min(baselines.values())
    notes = [
        f"{num_models} models × {NUM_PROMPTS} prompts × {N_OBSERVED} attempts; targets are "
        "labelled in the columns (prompts = mean_i[1 − (1 − θ_i)^1000] from the true θ, the "
        "issue's target; realised = broken within 1000 attempts with the observed 200 counted; "
        "population = a new prompt).",
        f"Goal (well-specified, prompts target): anchored SABER MAE <= 1.5 pp and below every "
        f"baseline: {'met' if met else 'MISSED'} — anchored {anchored:.2f} pp, best baseline "
        f"{best_name} {baselines[best_name]:.2f} pp (the paper reports 1.44 vs 6.58; an "
        "external reference only).",
        "SABER time: one jit of the vmapped fit + three estimators over all models (after "
        "compilation); the speed-up column compares with the plug-in's NumPy time and is not a "
        "quality ratio.",
        *notes,
    ]
    return BenchTable("SABER: MAE of ASR@1000 predicted from 200 attempts", rows, notes)


def _bootstrap_table(size):
    """All models' bootstrap intervals in one call (the "gpu" size)."""
    on_cpu = jax.default_backend() == "cpu"
    num_models = 40
    num_resamples = 1000 if not on_cpu else 10
    rng = np.random.default_rng(5)
    theta, _ = _generate("well-specified", num_models, rng)
    successes = jnp.asarray(rng.binomial(N_OBSERVED, theta), jnp.float64)
    keys = jax.random.split(jax.random.key(0), num_models)

    @jax.jit
    def intervals(keys, successes):
        return jax.vmap(lambda k, c: risk.bootstrap_asr(
            k, N_TARGET, c, float(N_OBSERVED), num_resamples=num_resamples,
            max_trials=N_OBSERVED))(keys, successes)

    seconds, (out, out_info) = time_fn(intervals, keys, successes, repeats=1)
    targets = np.mean(-np.expm1(N_TARGET * np.log1p(-theta)), axis=1)
    covered = np.mean((np.asarray(out.lower) <= targets) & (targets <= np.asarray(out.upper)))
    fits = num_models * (num_resamples + 1)
    rows = [Row("40 models", f"bootstrap_asr, {num_resamples} resamples each",
                {"fits": fits, "fits/s": fits / seconds, "95% coverage of prompts target":
                 float(covered), "mean width (pp)": 100 * float(np.mean(out.upper - out.lower)),
                 "converged": float(np.mean(out_info.converged_fraction))}, seconds=seconds)]
    notes = ["One jit: vmap over models of (fit + vmap over resamples of fits)."]
    if on_cpu:
        notes.append(f"Run on CPU at {num_resamples} resamples per model (1000 on an "
                     "accelerator).")
    return BenchTable("SABER bootstrap: every model's interval in one vmapped call", rows, notes)


# ----------------------------------------------------------------------------------------------
# Best-of-N


_CASES = {
    "A: N(1,1.2²) vs N(0,1)": (risk.Normal(1.0, 1.2), risk.Normal(0.0, 1.0),
                               scipy.stats.norm(1, 1.2), scipy.stats.norm(0, 1), (-20, 30)),
    "B: N(1,1) vs N(0,1)": (risk.Normal(1.0, 1.0), risk.Normal(0.0, 1.0),
                            scipy.stats.norm(1, 1), scipy.stats.norm(0, 1), (-20, 30)),
    "C: N(1,1) vs N(0,1.5²)": (risk.Normal(1.0, 1.0), risk.Normal(0.0, 1.5),
                               scipy.stats.norm(1, 1), scipy.stats.norm(0, 1.5), (-20, 30)),
    "D: exponentials 1:3": (risk.GPD(0.0, 1.0, 0.0), risk.GPD(math.log(3.0), 1.0, 0.0),
                            scipy.stats.expon(0, 1), scipy.stats.expon(math.log(3.0), 1),
                            (0, 60)),
}


def _reference(n, p, correct, incorrect, lo, hi):
    def integrand(x):
        log_g = np.logaddexp(np.log(p) + correct.logcdf(x), np.log1p(-p) + incorrect.logcdf(x))
        return np.exp(np.log(n) + np.log(p) + correct.logpdf(x) + (n - 1) * log_g)
    return scipy.integrate.quad(integrand, lo, hi, limit=500, epsabs=1e-13, epsrel=1e-12)[0]


def _interleaved(quad, quad_args, sim, sim_args, *, quad_calls=15):
    """Quadrature and Monte Carlo timed in one interleaved sequence (quadrature calls before and
    after the one Monte Carlo run), so a change of load between them shows in both.

    The quadrature's time is the minimum over its ``2·quad_calls`` calls: it is deterministic
    and milliseconds long, so its minimum is its cost and slower calls measure the host's load
    (a median of three read 88 ms instead of 9 ms on a loaded host, the 987x of a previous
    run). The Monte Carlo, seconds long, runs once.
    """
    out = jax.block_until_ready(quad(*quad_args))  # compiled on the first call of a case
    times = []
    for _ in range(quad_calls):
        t0 = time.perf_counter()
        jax.block_until_ready(quad(*quad_args))
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    sim_out = jax.block_until_ready(sim(*sim_args))
    sim_seconds = time.perf_counter() - t0
    for _ in range(quad_calls):
        t0 = time.perf_counter()
        jax.block_until_ready(quad(*quad_args))
        times.append(time.perf_counter() - t0)
    return min(times), out, sim_seconds, sim_out


def _bon_table(size):
    p = 0.3
    ns = [1, 16, 256, 4096] if size == "quick" else [1, 16, 256, 4096, 10**6]
    num_trials = 10**5 if size == "quick" else 10**7
    cases = list(_CASES.items())[:2] if size == "quick" else list(_CASES.items())
    rows, worst_ref, worst_z, ratios = [], 0.0, 0.0, []
    key = jax.random.key(0)
    for name, (correct, incorrect, ref_c, ref_w, (lo, hi)) in cases:
        quad_one = jax.jit(lambda n, c=correct, w=incorrect: risk.bon_accuracy(n, p, c, w)[0])
        sim = jax.jit(lambda k, n, c=correct, w=incorrect: risk.bon_simulate(
            k, n, p, c, w, num_trials=num_trials))
        # N and the key are traced: one compilation per case, ahead of the timed calls (the
        # Monte Carlo then runs once per N, not twice)
        sim = sim.lower(key, jnp.asarray(1.0)).compile()
        for i, n in enumerate(ns):
            n_arr = jnp.asarray(float(n))
            q_seconds, acc, mc_seconds, (mc, info) = _interleaved(
                quad_one, (n_arr,), sim, (jax.random.fold_in(key, i), n_arr))
            acc = float(acc)
            se = float(info.standard_error)
            z = (float(mc) - acc) / se
            ref = _reference(n, p, ref_c, ref_w, lo, hi) if n <= 4096 else float("nan")
            if n <= 4096:
                worst_ref = max(worst_ref, abs(acc - ref))
            worst_z = max(worst_z, abs(z))
            ratios.append(mc_seconds / q_seconds)
            rows.append(Row(f"{name}, N={n:g}", "bon_accuracy (quadrature)",
                            {"accuracy": acc, "|quad − ref|": abs(acc - ref),
                             "|quad − MC|": abs(float(mc) - acc), "MC se": se, "z": z},
                            seconds=q_seconds))
            rows.append(Row(f"{name}, N={n:g}", f"bon_simulate ({num_trials:.0e} maxima)",
                            {"accuracy": float(mc)}, seconds=mc_seconds, peer=True))
    notes = [
        f"Quadrature vs the adaptive SciPy reference (N <= 4096): max error {worst_ref:.1e} "
        f"(goal 1e-6: {'met' if worst_ref < 1e-6 else 'MISSED'}). At N = 1e6 the x-space "
        "reference is not evaluated (SciPy's quad does not resolve the narrow peak).",
        f"Against {num_trials:.0e}-draw Monte Carlo: max |z| = {worst_z:.2f}. A Monte Carlo of "
        f"{num_trials:.0e} draws has a standard error of ~1.5e-4 here, so it can confirm the "
        "quadrature only to ~5e-4, not to 1e-6: the 1e-6 claim rests on the reference column.",
        f"Speed: Monte Carlo / quadrature time ratio min {min(ratios):.0f}x, median "
        f"{float(np.median(ratios)):.0f}x (goal >= 1000x: "
        f"{'met' if min(ratios) >= 1000 else 'MISSED' if size != 'quick' else 'quick size'}). "
        "Timed interleaved in one process: the quadrature's minimum over 30 calls around the "
        "one Monte Carlo run. The ratio scales with the Monte Carlo's trial count (its cost is "
        "linear in it: binomial counts and two inversions per trial) and is bounded below by "
        f"it: at {num_trials:.0e} trials the Monte Carlo's standard error (~1e-4) is still "
        "four orders of magnitude above the quadrature's error (the reference column), so at "
        "equal accuracy the ratio is far larger. "
        "The MC peer already draws each class's maximum by inversion (cost independent of N); "
        "drawing all N rewards would be N times slower still.",
        "No roofline applies: both are latency-bound special-function evaluations (log Φ, "
        "Φ⁻¹) inside small loops.",
    ]
    return BenchTable("Best-of-N: exact quadrature vs reference and Monte Carlo (p = 0.3)", rows,
                      notes)


def _gpd_table(size):
    num_sets = 10 if size == "quick" else 100
    size_each = 1000
    rng = np.random.default_rng(7)
    rows, notes = [], []
    fit_all = jax.jit(jax.vmap(extremes.gpd_fit))
    for shape in (-0.3, 0.0, 0.3, 1.0):
        data = scipy.stats.genpareto.rvs(shape, scale=2.0, size=(num_sets, size_each),
                                         random_state=rng)
        seconds, ours = time_fn(fit_all, jnp.asarray(data), repeats=2)
        t0 = time.perf_counter()
        reference = [scipy.stats.genpareto.fit(row, floc=0) for row in data]
        scipy_seconds = time.perf_counter() - t0
        ll_ref = np.array([scipy.stats.genpareto.logpdf(row, c, 0, s).sum()
                           for row, (c, _, s) in zip(data, reference, strict=True)])
        gain = np.asarray(ours.log_likelihood) - ll_ref
        shape_gap = np.abs(np.asarray(ours.shape) - np.array([c for c, _, _ in reference]))
        err = np.asarray(ours.shape) - shape
        rows.append(Row(f"ξ = {shape:g}", "gpd_fit (vmapped)",
                        {"ΔlogL vs SciPy (min)": float(gain.min()),
                         "|Δξ| vs SciPy (max)": float(shape_gap.max()),
                         "ξ bias": float(err.mean()), "ξ rmse": float(np.sqrt(np.mean(err**2))),
                         "converged": float(np.mean(ours.solver.converged))},
                        seconds=seconds))
        rows.append(Row(f"ξ = {shape:g}", "scipy.stats.genpareto.fit (loop)", {},
                        seconds=scipy_seconds, peer=True))
    notes.append(f"{num_sets} data sets of {size_each} excesses per shape, scale 2; ΔlogL >= 0 "
                 "means our maximum is at least as high as SciPy's (Nelder–Mead).")
    notes.append("pyextremes would install (emcee + pyextremes) but its MLE model calls "
                 "scipy.stats.genpareto.fit, so SciPy is the peer.")
    return BenchTable("GPD peaks-over-threshold fits vs SciPy", rows, notes)


def run(size: str) -> list[BenchTable]:
    with jax.enable_x64(True):
        tables = [_saber_table(size), _bon_table(size), _gpd_table(size)]
        if size == "gpu":
            tables.insert(1, _bootstrap_table(size))
    return tables
