"""Mode-weight error across a growing barrier: local samplers against non-local ones.

Tilted double well V = h(x² − 1)² + 0.25 h x at T = 1 as h grows, every chain/particle starting in
the lighter (right) well: |w_left − exact| at equal density(+gradient) evaluations per chain for
MALA, annealed Langevin (ULA, T from 5 to 1, geometric), BlackJAX SVGD, ETD, parallel tempering
(4 rungs) and BlackJAX tempered SMC, beside the exact SQRA gap, the Kramers rate and the MFPT in
MALA steps. (Split from the learned-stopping bench, ``bench_stopping.py``, so each re-runs alone.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row

import jaxsample
from jaxsample.diagnostics.mixing import fp_generator, kramers_rate, mfpt, rate_matrix, spectral_gap
from jaxsample.mcmc import mala, parallel_tempering
from jaxsample.targets import TiltedDoubleWell

_CHAINS = {"quick": 256, "full": 2048, "gpu": 65536}
_BUDGETS = {"quick": (64,), "full": (64, 256, 1024), "gpu": (256, 1024, 4096)}
_BARRIERS = {"quick": (2.0,), "full": (2.0, 4.0, 6.0), "gpu": (2.0, 4.0, 6.0)}
# particle systems (SVGD, ETD, SMC) interact: N² work per step; quick skips them (CPU budget)
_PARTICLES = {"quick": 0, "full": 256, "gpu": 1024}


def _fixed_mala(key, logdensity, step_size, x0, length):
    alg = mala(logdensity, step_size=step_size)

    @jax.jit
    def go(key, x0):
        def chain(k, x):
            state, _ = jaxsample.run(k, alg, alg.init(x), max(length, 1))
            return state.position
        return jax.vmap(chain)(jax.random.split(key, x0.shape[0]), x0)

    return go(key, x0) if length > 0 else x0


def _annealed_langevin(key, logdensity, x0, budget, step_size):
    temperatures = jnp.geomspace(5.0, 1.0, budget)

    def chain(k, x):
        def body(x, inputs):
            temperature, kk = inputs
            grad = jax.grad(logdensity)(x) / temperature
            return x + step_size * grad + jnp.sqrt(2 * step_size) * jax.random.normal(
                kk, x.shape), None
        x, _ = jax.lax.scan(body, x, (temperatures, jax.random.split(k, budget)))
        return x

    return jax.jit(jax.vmap(chain))(jax.random.split(key, x0.shape[0]), x0)


def _tempered_smc(key, logdensity, x0, budget):
    import blackjax

    num_mcmc = 4
    steps = max(budget // num_mcmc, 1)

    def prior(x):
        return -0.5 * jnp.sum(((x - 1.0) / 2.0) ** 2)

    smc = blackjax.adaptive_tempered_smc(
        prior, logdensity, blackjax.mala.build_kernel(), blackjax.mala.init,
        {"step_size": jnp.array([0.05])}, blackjax.smc.resampling.systematic, 0.5,
        num_mcmc_steps=num_mcmc)
    # prior N(1, 2²) covers both wells; the tempering path carries mass across
    state = smc.init(1.0 + 2.0 * jax.random.normal(jax.random.key(7), x0.shape))

    def body(carry, k):
        state = carry
        state, _ = smc.step(k, state)
        return state, state.tempering_param

    state, lam = jax.jit(lambda k, s: jax.lax.scan(body, s, jax.random.split(k, steps)))(key,
                                                                                          state)
    return state.particles, float(lam[-1])


def _double_well_rows(size):
    rows, notes = [], []
    n = min(_CHAINS[size], 4096)
    step_size = 0.02
    for barrier in _BARRIERS[size]:
        target = TiltedDoubleWell(barrier=barrier, tilt=0.25 * barrier, temperature=1.0)
        exact_left = float(target.mode_weights[0])
        grid = np.linspace(-3.0, 3.0, 700)
        dx = grid[1] - grid[0]
        with jax.enable_x64(True):
            v = target._potential_np(grid)
            gap = float(spectral_gap(*fp_generator(v, 1.0, dx)[0])[0][0])
            h_min = target.hessians[1]
            k_right = float(kramers_rate(target._potential_np(target.minima[1]),
                                         target._potential_np(target.saddle), h_min,
                                         target.hessians[2], 1.0)[0])
            start_idx = int(np.argmin(np.abs(grid - target.minima[1])))
            tau = float(mfpt(rate_matrix(v, 1.0, dx)[0], grid <= target.minima[0])[0][start_idx])
        case = (f"h = {barrier:g} (w_left = {exact_left:.3f}; gap {gap:.2e}, "
                f"k = {k_right:.1e}, MFPT {tau / step_size:.0f} MALA steps)")
        logpi = target.logdensity
        x0 = target.minima[1] + 0.1 * jax.random.normal(jax.random.key(1), (n, 1))
        errors, smc_lambda = {}, {}
        m = _PARTICLES[size]
        for budget in _BUDGETS[size]:
            results = {}

            def err(x, target=target, exact_left=exact_left):
                return abs(float(jnp.mean(x[:, 0] < target.saddle)) - exact_left)

            results["MALA"] = err(_fixed_mala(jax.random.key(2), logpi, step_size, x0, budget))
            results["annealed Langevin"] = err(_annealed_langevin(
                jax.random.key(3), logpi, x0, budget, step_size))
            if m:
                from jaxsample.particles import svgd
                results["SVGD (BlackJAX)"] = err(jax.jit(lambda x, b=budget, f=logpi: svgd(
                    f, x, num_steps=b, learning_rate=0.05)[0])(x0[:m]))
                proposals = 8
                alg = jaxsample.etd(logpi, score_fn=jax.grad(logpi), num_proposals=proposals)
                state, _ = jaxsample.run(jax.random.key(4), alg, alg.init(x0[:m]),
                                         max(budget // (proposals + 1), 1))
                results["ETD (M = 8)"] = err(state.positions)
            rungs = 4
            pt = parallel_tempering(logpi, inverse_temperatures=np.geomspace(1.0, 0.1, rungs),
                                    step_size=step_size)
            pt_steps = max(budget // rungs, 1)

            @jax.jit
            def pt_run(keys, x0, pt=pt, pt_steps=pt_steps):
                def chain(k, x):
                    state, _ = jaxsample.run(k, pt, pt.init(x), pt_steps)
                    return state.position[0]
                return jax.vmap(chain)(keys, x0)

            results["parallel tempering (4 rungs)"] = err(pt_run(
                jax.random.split(jax.random.key(5), n), x0))
            if m:
                particles, lam = _tempered_smc(jax.random.key(6), logpi, x0[:m], budget)
                results["tempered SMC (BlackJAX)"] = err(particles)
                smc_lambda[budget] = lam
            for method, value in results.items():
                errors.setdefault(method, []).append(value)
        for method, values in errors.items():
            rows.append(Row(case, method, {f"err @ {b}": f"{e:.3f}" for b, e in
                                           zip(_BUDGETS[size], values, strict=True)},
                            peer=method == "MALA"))
        local = [min(v) for m, v in errors.items()
                 if m.startswith(("MALA", "annealed", "SVGD"))]
        nonlocal_best = min(min(v) for m, v in errors.items() if m.startswith(("ETD", "parallel")))
        final = {m: v[-1] for m, v in errors.items()}
        best_local_final = min(final[m] for m in final if m.startswith(("MALA", "annealed",
                                                                         "SVGD")))
        best_nonlocal_final = min(final[m] for m in final if m.startswith(("ETD", "parallel")))
        if smc_lambda:
            notes.append(f"h = {barrier:g}: tempered SMC reached λ = "
                         + ", ".join(f"{v:.2f} @ {b}" for b, v in smc_lambda.items())
                         + " (λ < 1: the tempering path did not finish within the budget).")
        notes.append(f"h = {barrier:g}: at the largest budget the best non-local error "
                     f"(ETD / PT) is {best_nonlocal_final:.3f} vs the best local "
                     f"{best_local_final:.3f} — goal "
                     f"{'met' if best_nonlocal_final < best_local_final else 'missed'} "
                     f"(best over budgets: {nonlocal_best:.3f} vs {min(local):.3f}).")
    return rows, notes


def _double_well_table(size):
    rows, notes = _double_well_rows(size)
    return BenchTable(
        "Tilted double well at T = 1, all chains starting in the lighter well: |w_left − exact| "
        "at equal density evaluations per chain (budget = evaluations; ETD pays M + 1 per step, "
        "PT one per rung)", rows,
        notes + ["Local methods (MALA, annealed Langevin, SVGD) cannot move mass faster than "
                 "the gap allows; the MFPT column gives the scale in MALA steps (step 0.02)."])


def run(size: str) -> list[BenchTable]:
    return [_double_well_table(size)]
