"""Eight schools from a NumPyro model: ETD and BlackJAX NUTS side by side, ArviZ out.

The non-centred eight-schools model (Rubin 1981) is written once in NumPyro;
``jaxsample.interop.from_numpyro`` turns it into a log-density over the unconstrained space (a
dict of sample sites), a start and ``constrain``. BlackJAX NUTS runs on the dict directly through
``jaxsample.run``; ETD runs on the same density. Both posteriors go to ArviZ
(``to_inference_data``): a summary table, a forest plot, and posterior means and sds compared
within their Monte Carlo errors (NUTS: ArviZ's ESS-based MCSE; ETD: the spread over independent
particle systems).

    python examples/numpyro_eight_schools.py --out examples/out/numpyro_eight_schools.png
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import blackjax
import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import numpyro
import numpyro.distributions as dist

import jaxsample
from jaxsample.interop import from_numpyro, to_inference_data

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # ArviZ announces its refactor on import
    import arviz as az

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools(sigma, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", len(sigma)):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def run_nuts(bridge, key, num_chains, num_draws):
    # diagonal inverse mass from the prior scales (mu ~ N(0, 5^2); the rest ~ unit scale), in
    # the order of the flattened dict (mu, tau, theta_tilde)
    nuts = blackjax.nuts(bridge.logdensity_fn, 0.7, jnp.array([10.0] + [1.0] * 9))

    def chain(k):
        k_warm, k_draw = jax.random.split(k)
        state, _ = jaxsample.run(k_warm, nuts, nuts.init(bridge.position), num_draws // 2)
        return jaxsample.run(k_draw, nuts, state, num_draws,
                             transform=lambda s, i: (s.position, i.acceptance_rate))[1]

    return jax.jit(jax.vmap(chain))(jax.random.split(key, num_chains))


def run_etd(bridge, key, num_systems, num_particles, num_steps):
    # ETD takes the model's dict of sites directly (particles along each leaf's leading axis)
    alg = jaxsample.etd(bridge.logdensity_fn, score_fn="autodiff")

    def system(k):
        k_init, k_run = jax.random.split(k)
        leaves, treedef = jax.tree.flatten(bridge.position)
        keys = jax.random.split(k_init, len(leaves))
        x0 = jax.tree.unflatten(treedef, [
            leaf + jax.random.normal(kk, (num_particles, *jnp.shape(leaf)), leaf.dtype)
            for kk, leaf in zip(keys, leaves, strict=True)])
        state, _ = jaxsample.run(k_run, alg, alg.init(x0), num_steps)
        return state.positions

    return jax.jit(jax.vmap(system))(jax.random.split(key, num_systems))


def summaries(draws):
    """mu, tau and theta (J = 8) per chain or per system: ``(groups, draws)`` leaves."""
    return {"mu": draws["mu"], "tau": draws["tau"], "theta": draws["theta"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4, help="NUTS chains")
    parser.add_argument("--draws", type=int, default=1000, help="NUTS draws per chain")
    parser.add_argument("--systems", type=int, default=8, help="independent ETD systems")
    parser.add_argument("--particles", type=int, default=128, help="particles per ETD system")
    parser.add_argument("--steps", type=int, default=150, help="ETD steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/numpyro_eight_schools.png"))
    args = parser.parse_args()

    bridge = from_numpyro(eight_schools, SIGMA, y=Y)
    key_nuts, key_etd = jax.random.split(jax.random.key(args.seed))

    t0 = time.perf_counter()
    nuts_draws, acceptance = jax.block_until_ready(
        run_nuts(bridge, key_nuts, args.chains, args.draws))
    nuts_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    etd_draws = jax.block_until_ready(
        run_etd(bridge, key_etd, args.systems, args.particles, args.steps))
    etd_seconds = time.perf_counter() - t0
    print(f"NUTS: {args.chains} chains x {args.draws} draws, mean acceptance "
          f"{float(acceptance.mean()):.2f}, {nuts_seconds:.1f}s (with compilation)")
    print(f"ETD:  {args.systems} systems x {args.particles} particles x {args.steps} steps, "
          f"{etd_seconds:.1f}s (with compilation)")

    nuts = to_inference_data(summaries(bridge.constrain(nuts_draws)))
    # every ETD system is one "chain" of particles (leaves: systems x particles)
    etd = to_inference_data(summaries(bridge.constrain(etd_draws)))
    print("\nNUTS posterior (ArviZ summary):")
    print(az.summary(nuts, var_names=["mu", "tau"], kind="stats").to_string())
    print("\nETD posterior (ArviZ summary):")
    print(az.summary(etd, var_names=["mu", "tau"], kind="stats").to_string())

    # Monte Carlo errors: NUTS from ArviZ's ESS-based MCSE; ETD from the spread of the
    # per-system estimates over the independent systems (sd / sqrt(systems))
    print("\n  quantity           ETD            NUTS        z")
    worst = 0.0
    for name, pick in [("mu", lambda d: d["mu"]), ("tau", lambda d: d["tau"]),
                       ("theta[0]", lambda d: d["theta"][..., 0])]:
        for stat in ("mean", "sd"):
            etd_values = np.asarray(pick(bridge.constrain(etd_draws)))
            per_system = etd_values.mean(axis=1) if stat == "mean" else etd_values.std(axis=1)
            etd_value = float(etd_values.mean() if stat == "mean" else etd_values.std())
            etd_error = float(per_system.std(ddof=1) / np.sqrt(args.systems))
            nuts_idata = to_inference_data({"v": pick(bridge.constrain(nuts_draws))})
            nuts_values = np.asarray(nuts_idata.posterior["v"])
            nuts_value = float(nuts_values.mean() if stat == "mean" else nuts_values.std())
            nuts_error = float(az.mcse(nuts_idata, method=stat)["v"])
            z = (etd_value - nuts_value) / np.hypot(etd_error, nuts_error)
            worst = max(worst, abs(z))
            label = f"{stat}({name})"
            print(f"  {label:<14} {etd_value:6.2f} ± {etd_error:4.2f}   {nuts_value:6.2f} ± "
                  f"{nuts_error:4.2f}   {z:+5.1f}")
    print(f"largest |z| = {worst:.1f} (± is one Monte Carlo standard error; |z| < 3 agrees)")

    axes = az.plot_forest([etd, nuts], model_names=["ETD", "NUTS"], var_names=["mu", "tau",
                                                                               "theta"],
                          combined=True, figsize=(7, 6))
    axes[0].set_title("Eight schools: ETD vs NUTS (94% HDI)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plt.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
