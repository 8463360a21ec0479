"""ETD (entropic transport descent) vs BlackJAX SVGD / MALA / NUTS, on the same inputs.

1. Variance collapse on N(0, I_d), 100 particles: DAMV (ideal 1), energy distance to exact
   samples, wall time; ETD (score) and ETD (score-free) vs SVGD (RBF + median heuristic, Adam).
2. Mixtures (2-D 4 modes, 10-D 5 modes on a ring): modes hit, energy distance, wall time, and the
   time ETD needs to reach SVGD's final energy distance (goal: at most a third of SVGD's time).
3. Bayesian logistic regression (bundled breast-cancer data): test log-likelihood and accuracy
   against a NUTS reference (BlackJAX window adaptation).
4. DW-4: interatomic-distance distribution (1-D W1) and mean energy against long MALA chains.

The speed of the transport step (per-iteration time on the reference code's configurations, the
parts of one step, the preconditioners' overhead, warm starts and memory) is in
``bench_etd_speed.py``.

Times are one call after compilation (these runs are too long to repeat).
"""

from __future__ import annotations

import csv
import importlib.resources
import time

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row

import jaxsample
from jaxsample.diagnostics import damv, energy_distance
from jaxsample.particles import Mutation, laplace_preconditioner, svgd
from jaxsample.particles.preconditioners import Ensemble
from jaxsample.targets import BayesianLogisticRegression, DoubleWell4, GaussianMixture

NUM_PARTICLES = 100
# the paper's plain step (no mutation, fixed steps, no weight guard): the rows that compare with
# the authors' code or measure the transport step run it
PAPER_STEP = dict(mutation=Mutation(steps=0), min_weight_ess=0.0)
# the paper's plain step: no MALA mutation, no weight guard and no preconditioner (PAPER_STEP
# keeps the default whitening, which bench_etd_speed's timings are taken with)
PLAIN_STEP = dict(PAPER_STEP, preconditioner=None)


def timed(fn, *args):
    compiled = jax.jit(fn).lower(*args).compile()
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return time.perf_counter() - t0, out


def etd_run(alg, x0, key, num_steps, keep_every):
    """Final state, info trace, and positions every ``keep_every`` steps."""

    def fn(k, x):
        def chunk(state, k):
            state, info = jaxsample.run(k, alg, state, keep_every)
            return state, (state.positions, info)

        keys = jax.random.split(k, num_steps // keep_every)
        state, (path, info) = jax.lax.scan(chunk, alg.init(x), keys)
        return state, path, info

    return timed(fn, key, x0)


def _svgd_run(logdensity_fn, x0, num_steps, learning_rate, keep_every):
    """BlackJAX SVGD (jaxsample.particles.svgd), particles every ``keep_every`` steps."""
    return timed(lambda x: svgd(logdensity_fn, x, num_steps=num_steps,
                                 learning_rate=learning_rate, keep_every=keep_every)[0], x0)


def _damv_systems(alg, key, d, num_steps, num_systems):
    """DAMV after ``num_steps`` of ``num_systems`` independent systems (init N(0, 4I))."""

    def one(k):
        k0, k1 = jax.random.split(k)
        state, _ = jaxsample.run(k1, alg, alg.init(2.0 * jax.random.normal(k0, (NUM_PARTICLES, d))),
                                 num_steps)
        return damv(state.positions)[0]

    keys = jax.random.split(jax.random.fold_in(key, 1), num_systems)
    return np.asarray(jax.jit(jax.vmap(one))(keys), np.float64)


def _se(values):
    """Standard error of the mean over independent systems (NaN for one)."""
    return values.std(ddof=1) / len(values)**0.5 if len(values) > 1 else float("nan")


def _variance_collapse(quick):
    dims = (50,) if quick else (2, 10, 25, 50, 100)
    etd_steps, svgd_steps = (30, 150) if quick else (100, 500)
    num_systems = 1 if quick else 8  # quick (CI): the timed system only
    at50 = {}
    rows = []
    for d in dims:
        case = f"N(0, I_{d})"
        key = jax.random.fold_in(jax.random.key(0), d)
        k_init, k_ref, k_run = jax.random.split(key, 3)
        x0 = 2.0 * jax.random.normal(k_init, (NUM_PARTICLES, d))
        reference = jax.random.normal(k_ref, (1000, d))

        def logdensity(x):
            return -0.5 * jnp.sum(x**2)

        seconds, path = _svgd_run(logdensity, x0, svgd_steps, 0.05, svgd_steps)
        rows.append(Row(case, "BlackJAX SVGD", {
            "DAMV": float(damv(path[-1])[0]),
            "energy dist.": float(energy_distance(path[-1], reference)[0]),
            "distinct": NUM_PARTICLES, "steps": svgd_steps}, seconds, peer=True))
        variants = [("ETD (score)", jax.grad(logdensity), {}),
                    ("ETD (score-free)", None, {}),
                    ("ETD (score, paper step)", jax.grad(logdensity), PLAIN_STEP)]
        if d == 50 and not quick:
            variants.append(("ETD (score, defaults without preconditioner)",
                             jax.grad(logdensity), dict(preconditioner=None)))
        for name, score, extra in variants[:1] if quick else variants:
            alg = jaxsample.etd(logdensity, score_fn=score, **extra)
            seconds, (state, _, info) = etd_run(alg, x0, k_run, etd_steps, etd_steps)
            systems = (np.asarray([damv(state.positions)[0]], np.float64) if quick else
                       _damv_systems(alg, key, d, etd_steps, num_systems))
            rows.append(Row(case, name, {
                "DAMV": float(damv(state.positions)[0]),
                f"DAMV ({num_systems} systems)": f"{systems.mean():.3f} ± {_se(systems):.3f}",
                "energy dist.": float(energy_distance(state.positions, reference)[0]),
                "distinct": int(info.num_distinct[-1, -1]), "steps": etd_steps}, seconds))
            if d == 50:
                at50[name] = systems
    by = {(r.case, r.method): r.metrics["DAMV"] for r in rows}
    svgd50 = by.get(("N(0, I_50)", "BlackJAX SVGD"))

    def reading(name):
        values = at50[name]
        verdict = "met" if values.mean() >= 0.9 and svgd50 < 0.9 else "missed"
        return (f"{name}: {verdict}, {values.mean():.3f} ± {_se(values):.3f} over "
                f"{num_systems} independent systems (per system {values.min():.3f}-"
                f"{values.max():.3f})")

    return BenchTable(
        "ETD: variance collapse on N(0, I_d), 100 particles, init N(0, 4I)",
        rows,
        notes=[f"Goal DAMV >= 0.9 at d = 50 where SVGD is far below (SVGD {svgd50:.3f}): "
               + "; ".join(reading(name) for name in at50 if name != "ETD (score-free)")
               + ".",
               "'DAMV' is the timed system's (one seed); a single system's DAMV has sd "
               "~0.07 at d = 50 across seeds, so one seed cannot decide a 0.9 goal: the goal "
               "is read from the mean over independent systems (± its standard error).",
               "ETD defaults: M = 25, eps = 0.1, alpha = 0.5, balanced, categorical, ensemble "
               "whitening, 2 MALA mutation steps, weight guard 0.1 N; the paper step drops the "
               "last three. SVGD: RBF, "
               "median heuristic, Adam lr 0.05. 'distinct': distinct proposals taken at the last "
               "step. Score-free ETD keeps the spread but its mean drifts in high d (see energy "
               "distance): random-walk proposals are too local there."],
    )


def _ring_mixture(num_modes, dim, separation):
    radius = separation / (2 * np.sin(np.pi / num_modes))
    angles = 2 * np.pi * np.arange(num_modes) / num_modes
    means = np.zeros((num_modes, dim), np.float32)
    means[:, 0], means[:, 1] = radius * np.cos(angles), radius * np.sin(angles)
    return GaussianMixture(jnp.asarray(means), 1.0)


def fast_logdensity(target):
    """``target.logdensity`` in closed form for an isotropic mixture (same values to
    round-off). When the committed results were measured, ``GaussianMixture.logdensity`` did one
    triangular solve per component and point (48 ms for the 2 500 proposals of one ETD step on the
    2-D mixture against 0.4 ms here); it now multiplies by a stored ``L⁻¹`` (about 2.6 ms), and
    this isotropic form stays the cheaper one. SVGD and ETD both get this function."""
    means = target.means
    sd = jnp.sqrt(target.covs[:, 0, 0])
    log_w = jnp.log(target.weights) - target.dim * jnp.log(sd) - 0.5 * target.dim * np.log(
        2 * np.pi)

    def logdensity(x):
        sq = jnp.sum(jnp.square(x[None, :] - means.astype(x.dtype)), axis=1)
        return jax.nn.logsumexp(log_w.astype(x.dtype) - 0.5 * sq / jnp.square(sd).astype(x.dtype))

    return logdensity


def _mixtures(quick):
    etd_steps, svgd_steps, every = (40, 200, 2) if quick else (100, 500, 2)
    cases = [
        ("2-D, 4 modes", GaussianMixture(
            jnp.array([[3.0, 3.0], [3.0, -3.0], [-3.0, 3.0], [-3.0, -3.0]]), 1.0), 5.0, {}),
        ("10-D, 5 modes (ring)", _ring_mixture(5, 10, 6.0), 3.0, {}),
    ][:1 if quick else 2]
    rows, notes = [], []
    for case, target, init_scale, extra in cases:
        key = jax.random.key(1)
        k_init, k_ref, k_run = jax.random.split(key, 3)
        x0 = init_scale * jax.random.normal(k_init, (NUM_PARTICLES, target.dim))
        reference = target.sample(k_ref, 1000)

        def coverage(x, target=target):
            counts = np.bincount(np.asarray(target.nearest_mode(x)),
                                 minlength=target.num_components)
            return f"{int((counts > 0).sum())}/{target.num_components} (min {counts.min()})"

        logdensity = fast_logdensity(target)
        svgd_seconds, path = _svgd_run(logdensity, x0, svgd_steps, 0.1, svgd_steps)
        svgd_ed = float(energy_distance(path[-1], reference)[0])
        rows.append(Row(case, "BlackJAX SVGD", {
            "modes hit": coverage(path[-1]), "energy dist.": svgd_ed, "steps": svgd_steps,
            "time to SVGD's e.d. (s)": None}, svgd_seconds, peer=True))
        variants = [("ETD (score)", jax.grad(logdensity)), ("ETD (score-free)", None)]
        for name, score in variants[:1] if quick else variants:
            alg = jaxsample.etd(logdensity, score_fn=score, **extra)
            seconds, (state, path, _) = etd_run(alg, x0, k_run, etd_steps, every)
            dists = [float(energy_distance(x, reference)[0]) for x in path]
            reached = next((i for i, v in enumerate(dists) if v <= svgd_ed), None)
            to_reach = None if reached is None else seconds * (reached + 1) / len(dists)
            rows.append(Row(case, name, {
                "modes hit": coverage(state.positions), "energy dist.": dists[-1],
                "steps": etd_steps, "time to SVGD's e.d. (s)": to_reach}, seconds))
            if score is not None:
                ok = to_reach is not None and to_reach <= svgd_seconds / 3
                notes.append(
                    f"{case}: ETD (score) reaches SVGD's final energy distance {svgd_ed:.4f} in "
                    f"{'never' if to_reach is None else f'{to_reach:.2f}s'} vs SVGD "
                    f"{svgd_seconds:.2f}s: goal (<= 1/3) {'met' if ok else 'missed'}.")
    notes.append(f"Energy distance against 1000 exact samples; ETD checked every {every} steps "
                 "(time to SVGD's e.d. = total time x the fraction of steps taken). Both "
                 "samplers evaluate the mixture in closed form (see fast_logdensity: the "
                 "target class's batched triangular solves were ~70% of an ETD step in a "
                 "fresh process).")
    return BenchTable("ETD: multimodal mixtures, 100 particles", rows, notes=notes)


def _nuts_reference(target, key, num_warmup, num_samples, num_chains):
    def one_chain(key):
        k_warm, k_run = jax.random.split(key)
        warmup = blackjax.window_adaptation(blackjax.nuts, target.logdensity)
        (state, params), _ = warmup.run(k_warm, jnp.zeros(target.dim), num_warmup)
        nuts = blackjax.nuts(target.logdensity, **params)

        def body(state, k):
            state, _ = nuts.step(k, state)
            return state, state.position

        _, draws = jax.lax.scan(body, state, jax.random.split(k_run, num_samples))
        return draws

    return timed(lambda k: jax.vmap(one_chain)(jax.random.split(k, num_chains)), key)


def german_credit(*, test_fraction: float = 0.2, seed: int = 0, prior_var: float = 25.0):
    """Bundled Statlog German credit (OpenML credit-g, ordinal-encoded), standardised with
    training statistics, plus an intercept: ``dim = 21`` (same split rule as breast cancer)."""
    source = importlib.resources.files("jaxsample") / "data" / "german_credit.csv"
    with source.open() as f:
        data = np.asarray(list(csv.reader(f))[1:], dtype=np.float64)
    features, labels = data[:, :-1], data[:, -1]
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(round(test_fraction * len(labels)))
    test, train = order[:n_test], order[n_test:]
    mu, sd = features[train].mean(0), features[train].std(0)

    def design(idx):
        return np.concatenate([np.ones((len(idx), 1)), (features[idx] - mu) / sd], axis=1)

    as_f32 = lambda a: jnp.asarray(a, jnp.float32)
    return BayesianLogisticRegression(as_f32(design(train)), as_f32(labels[train]),
                                      as_f32(design(test)), as_f32(labels[test]),
                                      prior_var=prior_var)


def _mala_run(logdensity_fn, x0, num_steps, step_size):
    mala = blackjax.mala(logdensity_fn, step_size)

    def fn(key, x):
        def body(states, k):
            states, _ = jax.vmap(mala.step)(jax.random.split(k, x.shape[0]), states)
            return states, None

        states, _ = jax.lax.scan(body, jax.vmap(mala.init)(x), jax.random.split(key, num_steps))
        return states.position

    return timed(fn, jax.random.key(9), x0)


def _logistic(quick):
    sets = [("breast cancer (d = 31)", BayesianLogisticRegression.breast_cancer())]
    if not quick:
        sets.append(("German credit (d = 21)", german_credit()))
    etd_steps, svgd_steps = (40, 300) if quick else (300, 1000)
    warmup, draws, chains = (100, 100, 1) if quick else (500, 1000, 2)
    rows, notes = [], []
    for case, target in sets:
        key = jax.random.key(2)
        k_nuts, k_init, k_run = jax.random.split(key, 3)
        fit, _ = laplace_preconditioner(target.logdensity, jnp.zeros(target.dim))
        if quick:  # CI size: the Laplace fit stands in for NUTS (its compilation dominated)
            nuts_mean, nuts_sd = fit.mode, jnp.sqrt(jnp.sum(jnp.square(fit.chol), axis=1))
        else:
            nuts_seconds, nuts_draws = _nuts_reference(target, k_nuts, warmup, draws, chains)
            nuts_draws = nuts_draws.reshape(-1, target.dim)
            nuts_mean, nuts_sd = nuts_draws.mean(0), nuts_draws.std(0)

        def metrics(samples, target=target, nuts_mean=nuts_mean, nuts_sd=nuts_sd):
            ll, acc = target.predictive_metrics(samples)
            return {"test log-lik.": float(ll), "test acc.": float(acc),
                    "mean err / post. sd": float(jnp.mean(jnp.abs(samples.mean(0) - nuts_mean)
                                                          / nuts_sd)),
                    "sd ratio": float(jnp.mean(samples.std(0) / nuts_sd)),
                    "sd ratio range": f"{float(jnp.min(samples.std(0) / nuts_sd)):.2f}-"
                                      f"{float(jnp.max(samples.std(0) / nuts_sd)):.2f}"}

        if not quick:
            rows.append(Row(case, f"NUTS reference ({chains}x{draws})", metrics(nuts_draws),
                            nuts_seconds))
        x0 = 0.1 * jax.random.normal(k_init, (NUM_PARTICLES, target.dim))
        if not quick:
            seconds, path = _svgd_run(target.logdensity, x0, svgd_steps, 0.01, svgd_steps)
            rows.append(Row(case, f"BlackJAX SVGD ({svgd_steps} steps)", metrics(path[-1]),
                            seconds, peer=True))
            seconds, mala_x = _mala_run(target.logdensity, x0, 5 * etd_steps, 1e-3)
            rows.append(Row(case, f"BlackJAX MALA (100 chains x {5 * etd_steps}, h 1e-3)",
                            metrics(mala_x), seconds))
        variants = [("ETD, no preconditioner (alpha 0.01)", dict(proposal_step=0.01)),
                    ("ETD, Laplace (alpha 0.5)", dict(preconditioner=fit.chol)),
                    ("ETD, ensemble (alpha 0.5, EMA 0.9)", dict(preconditioner="ensemble")),
                    ("ETD, ensemble without EMA (alpha 0.5)",
                     dict(preconditioner=Ensemble(ema=0.0))),
                    ("ETD, diagonal (alpha 0.5)", dict(preconditioner="diagonal"))]
        if quick:
            variants = variants[1:2]
        for name, kwargs in variants:
            alg = jaxsample.etd(target.logdensity, score_fn=jax.grad(target.logdensity),
                                **kwargs)
            seconds, (state, _, info) = etd_run(alg, x0, k_run, etd_steps, etd_steps)
            m = metrics(state.positions)
            m["weight ESS"] = float(info.weight_ess[-1].mean())
            m["distinct"] = int(info.num_distinct[-1, -1])
            rows.append(Row(case, name, m, seconds))
            ok = 0.8 <= m["sd ratio"] <= 1.25 and m["mean err / post. sd"] <= 0.3
            notes.append(f"{case}, {name}: sd ratio {m['sd ratio']:.2f}, mean error "
                         f"{m['mean err / post. sd']:.2f} sd: goal (sd ratio in [0.8, 1.25], "
                         f"mean error <= 0.3) {'met' if ok else 'missed'}.")
    if quick:
        notes.append("Quick (CI) size: the Laplace fit (mode, sd) stands in for the NUTS "
                     "reference, so the goal check is not the full-size one.")
    notes.append(f"ETD {etd_steps} steps, N = 100, M = 25, eps = 0.1, init N(0, 0.01 I); the "
                 "Laplace factor comes from laplace_preconditioner (BFGS + jax.hessian); SVGD "
                 f"{svgd_steps} steps (Adam lr 0.01); NUTS: BlackJAX window adaptation, {chains} "
                 f"chain(s), {warmup} + {draws}. sd ratio: mean over weights of particle sd / "
                 "NUTS sd (range: min-max over weights).")
    return BenchTable("ETD: Bayesian logistic regression, 100 particles (peer: SVGD)", rows,
                      notes=notes)


def _w1_distances(target, a, b):
    da = jnp.sort(jax.vmap(target.interatomic_distances)(a).ravel())
    db = jnp.sort(jax.vmap(target.interatomic_distances)(b).ravel())
    q = jnp.linspace(0.0, 1.0, 512)
    return float(jnp.mean(jnp.abs(jnp.quantile(da, q) - jnp.quantile(db, q))))


def _dw4(quick):
    target = DoubleWell4()
    etd_steps, mala_steps, mala_chains = (50, 1000, 200) if quick else (200, 5000, 500)
    key = jax.random.key(3)
    k_init, k_mala, k_run, k_ref_init = jax.random.split(key, 4)
    x0 = 2.0 * jax.random.normal(k_init, (NUM_PARTICLES, 8))
    mala = blackjax.mala(target.logdensity, 0.01)

    def reference(k, x):
        def body(states, k):
            states, info = jax.vmap(mala.step)(jax.random.split(k, x.shape[0]), states)
            return states, info.is_accepted.mean()

        states, accepted = jax.lax.scan(body, jax.vmap(mala.init)(x),
                                        jax.random.split(k, mala_steps))
        return states.position, accepted.mean()

    ref_x0 = 2.0 * jax.random.normal(k_ref_init, (mala_chains, 8))
    mala_seconds, (ref, acceptance) = timed(reference, k_mala, ref_x0)
    mean_energy = lambda x: float(jnp.mean(jax.vmap(target.energy)(x)))
    rows = [Row("DW-4 (d = 8)", f"MALA reference ({mala_chains} chains x {mala_steps})",
                {"W1 distances": 0.0, "mean energy": mean_energy(ref)}, mala_seconds, peer=True)]
    _, svgd_path = _svgd_run(target.logdensity, x0, 5 * etd_steps, 0.05, 5 * etd_steps)
    rows.append(Row(rows[0].case, "BlackJAX SVGD", {
        "W1 distances": _w1_distances(target, svgd_path[-1], ref),
        "mean energy": mean_energy(svgd_path[-1])}, None))
    variants = [("ETD (score, alpha 0.05)", dict(proposal_step=0.05)),
                ("ETD (score-free, alpha 0.05)", dict(proposal_step=0.05, score=False))]
    for name, kwargs in variants[:1] if quick else variants:
        score = None if kwargs.pop("score", True) is False else jax.grad(target.logdensity)
        alg = jaxsample.etd(target.logdensity, score_fn=score, **kwargs)
        seconds, (state, _, _) = etd_run(alg, x0, k_run, etd_steps, etd_steps)
        rows.append(Row(rows[0].case, name, {
            "W1 distances": _w1_distances(target, state.positions, ref),
            "mean energy": mean_energy(state.positions)}, seconds))
    return BenchTable(
        "ETD: DW-4 Boltzmann target, 100 particles",
        rows,
        notes=[f"W1 between the pooled interatomic-distance distributions and the MALA "
               f"reference's (step 0.01, acceptance {float(acceptance):.2f}). ETD {etd_steps} "
               f"steps; SVGD {5 * etd_steps} steps (Adam lr 0.05), time not compared.",
               "A mean energy below the reference's means the ensemble sits too deep in the "
               "wells (under-dispersed)."],
    )


def run(size: str) -> list[BenchTable]:
    """``"quick"``: CI sizes; ``"full"``: this CPU; ``"gpu"``: full, with the N = 20 000, M = 10
    chunked balanced and Gibbs steps both timed."""
    quick = size == "quick"
    tables = [_variance_collapse(quick), _logistic(quick)]
    if not quick:
        tables += [_mixtures(quick), _dw4(quick)]
    return tables
