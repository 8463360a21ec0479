"""Spherical linear BO vs GP-based BO (BoTorch; a small exact GP in JAX), random search and CMA-ES.

Synthetic latent-design objectives on the sphere S^{D−1} (the direction of a latent z):
``linear``: f(u) = cos(u, a) + ε; ``nonlinear``: f(u) = cos(u, a) + 0.3·sin(3·cos(u, b)) + ε,
ε ~ N(0, 0.01²), a and b random; the optimum of both is ≈ 1 (linear) / ≈ 1.3 (nonlinear). Every
method starts from 10 uniform random directions and has the same evaluation budget. Per-iteration
time is the wall time of one ask + evaluate + tell after compilation (for the JAX methods all
seeds run vmapped at once, so their time is that of one iteration of every seed together: a
conservative figure beside the single-run peers).

Peers: BoTorch (``SingleTaskGP`` + ``LogExpectedImprovement``, ``fit_gpytorch_mll``, its standard
``optimize_acqf`` with 10 restarts from 512 raw samples, in the box [−1, 1]^D (``Normalize``d to
the unit cube, outcomes standardised by the model's default) with the objective
evaluated at x/‖x‖) and ``cma`` (CMA-ES on x, evaluated at x/‖x‖); both are in the ``bench`` extra
and skipped with a note when absent.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row

from jaxsample.decision import SphericalLinearBO
from jaxsample.decision.baselines import gp_ucb_run
from jaxsample.kernels import sphere

NOISE = 0.01
NUM_INITIAL = 10
CONFIG = {
    # dims, budget, seeds, objectives, BoTorch (runs: dim, budget, seeds; timing dims at N)
    "quick": dict(dims=(32,), budget=40, seeds=2, objectives=("nonlinear",),
                  botorch_runs=None, botorch_timing=()),
    "full": dict(dims=(64, 256), budget=200, seeds=10, objectives=("linear", "nonlinear"),
                 botorch_runs=(64, 50, 2), botorch_timing=(64, 256)),
    "gpu": dict(dims=(1024,), budget=200, seeds=10, objectives=("nonlinear",),
                botorch_runs=None, botorch_timing=()),
}


def _directions(dim, seed=0):
    rng = np.random.default_rng(1000 + dim + seed)
    a, b = rng.normal(size=(2, dim))
    return a / np.linalg.norm(a), b / np.linalg.norm(b)


def _objective(kind, dim, dtype=jnp.float32):
    a, b = (jnp.asarray(v, dtype) for v in _directions(dim))
    weight = 0.0 if kind == "linear" else 0.3

    def f(x):
        u = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
        return u @ a + weight * jnp.sin(3 * (u @ b))

    return f


def _with_noise(f, dim):
    """f + deterministic pseudo-noise of sd ≈ NOISE (a fast oscillation of the point)."""
    c = jnp.asarray(np.random.default_rng(7).normal(size=dim), jnp.float32)

    def g(x):
        return f(x) + NOISE * math.sqrt(2) * jnp.sin(1e4 * (x @ c))

    return g


def _numpy_objective(kind, dim, rng):
    a, b = _directions(dim)
    weight = 0.0 if kind == "linear" else 0.3

    def f(x):
        x = np.atleast_2d(x)
        u = x / np.linalg.norm(x, axis=-1, keepdims=True)
        return u @ a + weight * np.sin(3 * (u @ b)) + NOISE * rng.normal(size=len(u))

    return f


def _spherical(kind, dim, budget, seeds, trust_region):
    f = _objective(kind, dim)
    bo = SphericalLinearBO(dim, prior_scale=dim**-0.5, noise=0.1)
    iterations = budget - NUM_INITIAL

    objective = _with_noise(f, dim)

    def one(key):
        key_init, key_run = jax.random.split(key)
        x0 = sphere.uniform(key_init, (NUM_INITIAL,), dim)
        state = bo.tell(bo.init(jnp.float32), x0, objective(x0))
        _, trace = bo.run(key_run, objective, state, iterations, trust_region=trust_region,
                          refit_every=10)
        # best-so-far of the noise-free value at the evaluated points
        return jnp.concatenate([f(x0), f(trace.points[:, 0])])

    keys = jax.random.split(jax.random.key(dim), seeds)
    compiled = jax.jit(jax.vmap(one)).lower(keys).compile()
    t0 = time.perf_counter()
    values = np.asarray(compiled(keys))
    seconds = (time.perf_counter() - t0) / iterations
    return values, seconds


def _gp(kind, dim, budget, seeds):
    f = _objective(kind, dim)
    iterations = budget - NUM_INITIAL

    def one(key):
        values = gp_ucb_run(key, _with_noise(f, dim), dim, iterations, num_initial=NUM_INITIAL,
                            num_candidates=1024)
        return values  # noisy values (the GP keeps no points): within ±0.014 of f

    keys = jax.random.split(jax.random.key(dim + 1), seeds)
    compiled = jax.jit(jax.vmap(one)).lower(keys).compile()
    t0 = time.perf_counter()
    values = np.asarray(compiled(keys))
    return values, (time.perf_counter() - t0) / iterations


def _random(kind, dim, budget, seeds):
    f = _objective(kind, dim)
    x = sphere.uniform(jax.random.key(dim + 2), (seeds * budget,), dim)
    return np.asarray(f(x)).reshape(seeds, budget), None


def _cma(kind, dim, budget, seeds):
    import cma

    a, b = _directions(dim)
    weight = 0.0 if kind == "linear" else 0.3
    curves, seconds = [], 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        noisy = _numpy_objective(kind, dim, rng)
        es = cma.CMAEvolutionStrategy(rng.normal(size=dim) / math.sqrt(dim), 0.3,
                                      {"seed": seed + 1, "verbose": -9})
        values = []
        t0 = time.perf_counter()
        while len(values) < budget:
            xs = es.ask()
            ys = noisy(np.asarray(xs))
            es.tell(xs, list(-ys))  # cma minimises
            u = np.asarray(xs) / np.linalg.norm(xs, axis=1, keepdims=True)
            values.extend(u @ a + weight * np.sin(3 * (u @ b)))
        seconds += (time.perf_counter() - t0) / len(values)
        curves.append(values[:budget])
    return np.asarray(curves), seconds / seeds


def _botorch_available():
    try:
        import botorch  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _botorch_step(train_x, train_y, dim):
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.input import Normalize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    bounds = torch.stack([-torch.ones(dim, dtype=train_x.dtype),
                          torch.ones(dim, dtype=train_x.dtype)])
    model = SingleTaskGP(train_x, train_y, input_transform=Normalize(d=dim, bounds=bounds))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    acq = LogExpectedImprovement(model, best_f=train_y.max())
    candidate, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=10, raw_samples=512)
    return candidate


def _botorch_run(kind, dim, budget, seeds):
    import torch

    a, b = _directions(dim)
    weight = 0.0 if kind == "linear" else 0.3
    curves, times = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        noisy = _numpy_objective(kind, dim, rng)
        x = rng.normal(size=(NUM_INITIAL, dim))
        x = x / np.abs(x).max(axis=1, keepdims=True)  # in the box, any direction
        y = noisy(x)
        torch.manual_seed(seed)
        while len(x) < budget:
            t0 = time.perf_counter()
            candidate = _botorch_step(torch.tensor(x), torch.tensor(y)[:, None], dim)
            times.append(time.perf_counter() - t0)
            new = candidate.detach().numpy()
            x = np.concatenate([x, new])
            y = np.concatenate([y, noisy(new)])
        u = x / np.linalg.norm(x, axis=1, keepdims=True)
        curves.append(u @ a + weight * np.sin(3 * (u @ b)))
    return np.asarray(curves), float(np.median(times))


def _botorch_time_at(dim, n, repeats=1):
    import torch

    rng = np.random.default_rng(dim)
    noisy = _numpy_objective("nonlinear", dim, rng)
    x = rng.uniform(-1, 1, size=(n, dim))
    y = noisy(x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _botorch_step(torch.tensor(x), torch.tensor(y)[:, None], dim)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _ts_time_at(dim, n, trust_region):
    """Seconds of one ask + tell of the spherical model holding n observations (one run)."""
    bo = SphericalLinearBO(dim, prior_scale=dim**-0.5, noise=0.1)
    f = _objective("nonlinear", dim)
    x = sphere.uniform(jax.random.key(0), (n,), dim)
    state = bo.tell(bo.init(jnp.float32), x, f(x))
    reps = 50
    _, trace = bo.run(jax.random.key(1), f, state, reps, trust_region=trust_region,
                      refit_every=0)
    jax.block_until_ready(trace)
    t0 = time.perf_counter()
    jax.block_until_ready(bo.run(jax.random.key(2), f, state, reps, trust_region=trust_region,
                                 refit_every=0))
    return (time.perf_counter() - t0) / reps


def _batch_table(dim, batch):
    """gpu size: one batch ask of ``batch`` Thompson points and one batch tell, D = ``dim``."""
    bo = SphericalLinearBO(dim, prior_scale=dim**-0.5, noise=0.1)
    f = _objective("nonlinear", dim)
    x = sphere.uniform(jax.random.key(0), (batch,), dim)
    state = bo.tell(bo.init(jnp.float32), x, f(x))
    rows = []
    for name, fn in (("ask (TS, batch)", lambda k: bo.ask(k, state, batch_size=batch)),
                     ("ask (TS + cap, batch)",
                      lambda k: bo.ask(k, state, batch_size=batch, trust_region=0.3)),
                     ("tell (batch of rank-one updates)",
                      lambda k: bo.tell(state, x, f(x)).mean)):
        jax.block_until_ready(fn(jax.random.key(1)))
        t0 = time.perf_counter()
        jax.block_until_ready(fn(jax.random.key(2)))
        seconds = time.perf_counter() - t0
        rows.append(Row(case=f"D = {dim}, q = {batch}", method=name, seconds=seconds,
                        metrics={"points/s": f"{batch / seconds:.3g}"}))
    return BenchTable(f"Batch ask/tell, D = {dim}, q = {batch}", rows,
                      ["TS batch asks are one (q×D)·(D×D) product and a normalisation; the "
                       "batch tell is q sequential O(D²) rank-one updates (a scan)."])


def _summary(values):
    best = np.max(values, axis=1)
    return best.mean(), best.std(ddof=1) / math.sqrt(len(best)) if len(best) > 1 else 0.0


def run(size: str) -> list[BenchTable]:
    config = CONFIG[size]
    tables, notes_global = [], []
    have_cma = True
    try:
        import cma  # noqa: F401
    except ImportError:
        have_cma = False
    have_botorch = _botorch_available()
    for dim in config["dims"]:
        budget, seeds = config["budget"], config["seeds"]
        for kind in config["objectives"]:
            rows, results = [], {}
            args = (kind, dim, budget, seeds)
            methods = [("spherical-linear TS", lambda a: _spherical(*a, False)),
                       ("spherical-linear TS + cap", lambda a: _spherical(*a, True)),
                       ("exact GP-UCB (JAX)", _gp),
                       ("random", _random)]
            if have_cma:
                methods.append(("CMA-ES (cma)", _cma))
            for name, fn in methods:
                values, seconds = fn(*args) if fn in (_gp, _random, _cma) else fn(args)
                results[name] = (values, seconds)
                mean, se = _summary(values)
                rows.append(Row(case=f"D = {dim}, {kind}", method=name, seconds=seconds,
                                peer=name == "exact GP-UCB (JAX)",
                                metrics={"best found (mean ± se)": f"{mean:.3f} ± {se:.3f}"}))
            notes = [f"budget {budget} evaluations ({NUM_INITIAL} random first), {seeds} "
                     "seeds; time: seconds per iteration (JAX rows: all seeds vmapped)"]
            if not have_cma:
                notes.append("CMA-ES skipped: `cma` is not installed (pip install cma)")
            tables.append(BenchTable(f"Best found and time per iteration, D = {dim}, {kind}",
                                     rows, notes))
    runs = config["botorch_runs"]
    if runs or config["botorch_timing"]:
        if not have_botorch:
            notes_global.append("BoTorch skipped: torch/botorch are not installed (the `bench` "
                                "extra, with a CPU torch wheel)")
            tables.append(BenchTable("BoTorch (skipped)", [], notes_global))
        else:
            rows = []
            for dim in config["botorch_timing"]:
                n = 200
                t_bt = _botorch_time_at(dim, n)
                rows.append(Row(case=f"D = {dim}, N = {n}", method="BoTorch GP + LogEI",
                                seconds=t_bt, peer=True, metrics={}))
                for tr in (False, True):
                    rows.append(Row(case=f"D = {dim}, N = {n}",
                                    method="spherical-linear TS" + (" + cap" if tr else ""),
                                    seconds=_ts_time_at(dim, n, tr), metrics={}))
            tables.append(BenchTable("Time per iteration at N = 200 observations", rows,
                                     ["one ask + tell; BoTorch: GP fit + optimize_acqf "
                                      "(one step); spherical: one iteration of a compiled "
                                      "loop (mean of 50), refit off"]))
            if runs:
                dim, budget, seeds = runs
                rows = []
                for kind in ("linear", "nonlinear"):
                    values, seconds = _botorch_run(kind, dim, budget, seeds)
                    mean, se = _summary(values)
                    rows.append(Row(case=f"D = {dim}, {kind}", method="BoTorch GP + LogEI",
                                    seconds=seconds, peer=True,
                                    metrics={"best found (mean ± se)": f"{mean:.3f} ± {se:.3f}"}))
                    for tr in (False, True):
                        values, seconds = _spherical(kind, dim, budget, seeds, tr)
                        mean, se = _summary(values)
                        rows.append(Row(case=f"D = {dim}, {kind}",
                                        method="spherical-linear TS" + (" + cap" if tr else ""),
                                        seconds=seconds,
                                        metrics={"best found (mean ± se)":
                                                 f"{mean:.3f} ± {se:.3f}"}))
                tables.append(BenchTable(f"Beside BoTorch: budget {budget}, {seeds} seeds",
                                         rows, [f"budget {budget} ({NUM_INITIAL} random first): "
                                                "reduced from 200 × 10 seeds because one BoTorch "
                                                "step costs tens of CPU-seconds at N = 60 and "
                                                "minutes at N = 200 on this CPU (a run of 200 "
                                                "iterations would take hours); time: median "
                                                "seconds per iteration"]))
    if size == "gpu":
        tables.append(_batch_table(1024, 1024))
    return tables
