"""Bridges: BlackJAX algorithms through jaxsample.run, NumPyro models in, ArviZ out."""

import sys
import warnings
from typing import NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import jaxsample
from jaxsample.interop import from_numpyro, to_inference_data

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # ArviZ announces its refactor on import
    import arviz as az

_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _eight_schools(sigma, y=None):
    """Eight schools, non-centred (Rubin 1981; the parametrisation of the Stan and NumPyro docs)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", len(sigma)):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def _gaussian(p):
    return -0.5 * (jnp.sum(p["a"] ** 2) + p["b"] ** 2 / 4.0)


@pytest.mark.parametrize("make", [
    lambda: blackjax.mala(_gaussian, 0.5),
    lambda: blackjax.nuts(_gaussian, 0.8, jnp.array([1.0, 1.0, 4.0])),
], ids=["mala", "nuts"])
def test_run_accepts_blackjax_algorithms(make):
    alg = make()
    state = alg.init({"a": jnp.zeros(2), "b": jnp.zeros(())})
    state, (draws, info) = jaxsample.run(jax.random.key(0), alg, state, 2000,
                                         transform=lambda s, i: (s.position, i))
    assert draws["a"].shape == (2000, 2) and draws["b"].shape == (2000,)
    assert 0.3 < float(info.acceptance_rate.mean()) <= 1.0
    # loose moment check (the draws are correlated): the sd of b is 2, of a's coordinates 1
    assert 1.4 < float(draws["b"].std()) < 2.6 and 0.7 < float(draws["a"].std()) < 1.3


def test_run_names_what_an_algorithm_lacks():
    with pytest.raises(TypeError, match="without callable step"):
        jaxsample.run(jax.random.key(0), type("Half", (), {"init": lambda self, x: x})(),
                      jnp.zeros(2), 3)


def test_from_numpyro_gives_the_unconstrained_density_and_constrain():
    bridge = from_numpyro(_eight_schools, _SIGMA, y=_Y)
    assert sorted(bridge.position) == ["mu", "tau", "theta_tilde"]
    assert bridge.position["theta_tilde"].shape == (8,)
    # the density is NumPyro's: the priors, the likelihood and log|d tau / d log tau| = log tau
    z = {"mu": jnp.asarray(1.0), "tau": jnp.asarray(0.5), "theta_tilde": jnp.linspace(-1, 1, 8)}
    tau = np.exp(0.5)
    theta = 1.0 + tau * np.linspace(-1, 1, 8)
    expected = (dist.Normal(0.0, 5.0).log_prob(1.0) + dist.HalfCauchy(5.0).log_prob(tau) + 0.5
                + dist.Normal(0.0, 1.0).log_prob(np.linspace(-1, 1, 8)).sum()
                + dist.Normal(theta, _SIGMA).log_prob(_Y).sum())
    np.testing.assert_allclose(bridge.logdensity_fn(z), expected, rtol=1e-5)
    draws = jax.tree.map(lambda v: jnp.broadcast_to(v, (3, 5) + v.shape), z)
    constrained = bridge.constrain(draws)
    assert constrained["tau"].shape == (3, 5) and constrained["theta"].shape == (3, 5, 8)
    np.testing.assert_allclose(constrained["tau"], np.full((3, 5), tau), rtol=1e-6)
    np.testing.assert_allclose(constrained["theta"][1, 2], theta, rtol=1e-5)
    assert sorted(bridge.constrain(z)) == ["mu", "tau", "theta", "theta_tilde"]


def _chains(alg, position, num_steps, key, num_chains=4):
    def chain(k):
        return jaxsample.run(k, alg, alg.init(position), num_steps,
                             transform=lambda s, i: s.position)[1]

    return jax.jit(jax.vmap(chain))(jax.random.split(key, num_chains))


def _moments(bridge, draws):
    constrained = bridge.constrain(draws)
    idata = to_inference_data({"mu": constrained["mu"], "tau": constrained["tau"],
                               "theta_0": constrained["theta"][..., 0]})
    stats = {}
    for method in ("mean", "sd"):
        value = getattr(idata.posterior, "std" if method == "sd" else method)(dim=("chain", "draw"))
        error = az.mcse(idata, method=method)
        for name in ("mu", "tau", "theta_0"):
            stats[f"{method}({name})"] = (float(value[name]), float(error[name]))
    return stats


@pytest.mark.slow
def test_eight_schools_mala_agrees_with_nuts_within_monte_carlo_error():
    # MALA on the NumPyro bridge's pytree against BlackJAX NUTS (diagonal mass from the prior
    # scales), 4 chains each. Six z-scores (mean and sd of mu, tau, theta_0) with both runs'
    # ESS-based Monte Carlo standard errors; each |z| < 4 (two-sided p = 6e-5; family-wise
    # < 4e-4).
    bridge = from_numpyro(_eight_schools, _SIGMA, y=_Y)
    mala_draws = _chains(jaxsample.mcmc.mala(bridge.logdensity_fn, step_size=0.35),
                         bridge.position, 4000, jax.random.key(1))
    nuts = blackjax.nuts(bridge.logdensity_fn, 0.7, jnp.array([10.0] + [1.0] * 9))
    nuts_draws = _chains(nuts, bridge.position, 400, jax.random.key(2))
    ours, reference = _moments(bridge, mala_draws), _moments(bridge, nuts_draws)
    for name, (value, error) in ours.items():
        ref_value, ref_error = reference[name]
        z = (value - ref_value) / np.hypot(error, ref_error)
        assert abs(z) < 4, (name, value, ref_value, error, ref_error)
    # the known posterior (long runs): E[mu] ~ 4.4, E[tau] ~ 3.6
    assert abs(reference["mean(mu)"][0] - 4.4) < 1.0 and abs(reference["mean(tau)"][0] - 3.6) < 1.0


def test_to_inference_data_round_trips_names_and_shapes():
    trace = {"mu": jnp.zeros((3, 10)), "beta": {"w": jnp.ones((3, 10, 2))}}
    info = jaxsample.mcmc.MALAInfo(jnp.full((3, 10), 0.5), jnp.ones((3, 10), bool),
                                   jnp.zeros((3, 10), bool))
    idata = to_inference_data(trace, info=info)
    assert sorted(idata.posterior.data_vars) == ["beta.w", "mu"]
    assert idata.posterior["beta.w"].shape == (3, 10, 2)
    assert dict(idata.posterior.sizes)["chain"] == 3 and dict(idata.posterior.sizes)["draw"] == 10
    assert sorted(idata.sample_stats.data_vars) == ["acceptance_rate", "is_accepted", "nonfinite"]
    np.testing.assert_array_equal(idata.posterior["beta.w"].values, np.ones((3, 10, 2)))
    renamed = to_inference_data(trace, names=["w", "mu"])
    assert sorted(renamed.posterior.data_vars) == ["mu", "w"]
    assert to_inference_data(jnp.zeros((2, 5, 4))).posterior["x"].shape == (2, 5, 4)
    with pytest.raises(ValueError, match="one name per leaf"):
        to_inference_data(trace, names=["only"])
    with pytest.raises(ValueError, match=r"\(chain, draw, \.\.\.\)"):
        to_inference_data({"mu": jnp.zeros(5)})


class _CloudState(NamedTuple):
    positions: jax.Array
    f: jax.Array


def test_to_inference_data_reads_a_particle_cloud_as_one_chain():
    # any state with a `positions` field (ETDState, MMSOLDState) is a cloud
    state = _CloudState(jnp.arange(12.0).reshape(6, 2), jnp.zeros(6))
    idata = to_inference_data(state, info={"weight_ess": jnp.ones(7)})
    assert idata.posterior["x"].shape == (1, 6, 2)
    np.testing.assert_array_equal(idata.posterior["x"].values[0], np.arange(12.0).reshape(6, 2))
    assert dict(idata.sample_stats.sizes) == {"chain": 1, "step": 7}
    cloud = to_inference_data({"mu": jnp.zeros(6), "tau": jnp.ones((6, 3))}, particles=True)
    assert cloud.posterior["tau"].shape == (1, 6, 3) and cloud.posterior["mu"].shape == (1, 6)


def test_missing_optional_dependencies_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r"jaxsample\[interop\]"):
        to_inference_data(jnp.zeros((1, 2)))
    monkeypatch.setitem(sys.modules, "numpyro.infer.util", None)
    with pytest.raises(ImportError, match=r"jaxsample\[interop\]"):
        from_numpyro(_eight_schools, _SIGMA, y=_Y)
