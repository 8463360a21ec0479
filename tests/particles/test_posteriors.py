"""Benchmark posteriors (bench/posteriors.py) and their references: finite densities, dtypes,
closed forms, reference quality, and the comparison's metrics."""

import doctest
import math
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import bench_posteriors  # noqa: E402
import posteriors  # noqa: E402

import jaxsample  # noqa: E402

Z = 5.0  # z for Monte Carlo checks (two-sided p ≈ 6e-7 per statistic)
# smallest ESS (of the means and of the squared deviations) a NUTS reference must reach: 4000,
# and 2000 for the d = 501 item-response model, whose run is kept under 10 minutes on 2 cores
# (its standard errors, stored with it, carry what that costs)
MIN_ESS = {"item_response": 2000}


@pytest.mark.parametrize("name", posteriors.NAMES)
def test_logdensity_finite_with_dtype(name, dtype):
    post = posteriors.get(name)
    hash(post.logdensity_fn)  # the bench passes it to jax.jit as a static argument
    reference = posteriors.load_reference(post)
    x = post.init_fn(jax.random.key(0), 3)
    assert x.shape == (3, post.dim)
    points = jnp.concatenate([x, jnp.asarray(reference["mean"])[None]]).astype(dtype)
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(post.logdensity_fn)))(points)
    assert values.shape == (4,) and values.dtype == dtype and grads.dtype == dtype
    assert bool(jnp.all(jnp.isfinite(values))) and bool(jnp.all(jnp.isfinite(grads)))


@pytest.mark.parametrize("name", posteriors.NAMES)
def test_reference_quality(name):
    """Every reference is small and its arrays have the posterior's shapes; NUTS ones have ESS
    >= MIN_ESS and R-hat < 1.01 per coordinate and standard errors consistent with them; exact
    ones hold the law's moments; moments-only ones hold no draws and stay under 100 kB."""
    post = posteriors.get(name)
    path = posteriors.REFERENCES / post.reference_file
    assert path.stat().st_size < (2**20 if post.reference_draws else 100_000)
    ref = posteriors.load_reference(post)
    for field in ("mean", "sd", "mean_se", "sd_se") + (("ess", "ess_sd", "rhat")
                                                        if post.exact is None else ()):
        assert ref[field].shape == (post.dim,), field
    if post.reference_draws:
        assert ref["draws"].shape == (bench_posteriors.REFERENCE_DRAWS, post.dim)
    else:
        assert "draws" not in ref
    if post.reference_from is not None:
        assert str(ref["reference_from"]) == post.reference_from[0]
    if post.exact is None:
        assert str(ref["method"]) == "nuts"
        min_ess = MIN_ESS.get(name, 4000)
        assert ref["ess"].min() >= min_ess and ref["ess_sd"].min() >= min_ess
        assert ref["rhat"].max() < 1.01
        assert int(ref["num_divergent"]) <= 1e-3 * int(ref["num_chains"]) * int(ref["num_draws"])
        np.testing.assert_allclose(ref["mean_se"], ref["sd"] / np.sqrt(ref["ess"]))
        assert int(ref["num_gradient_evals"]) > int(ref["num_gradient_evals_sampling"]) > 0
    else:
        assert str(ref["method"]) == "exact"
        np.testing.assert_allclose(ref["mean"], np.asarray(post.exact.mean), atol=1e-6)
        np.testing.assert_allclose(ref["sd"], np.sqrt(np.diag(np.asarray(post.exact.cov))),
                                   rtol=1e-6)


@pytest.mark.parametrize("name", ["banana", "neals_funnel", "ill_conditioned_gaussian",
                                  "brownian_bridge_missing"])
def test_exact_law_matches_the_density(name, x64):
    """Stein's identities tie the log-density to the law the reference is drawn from: for
    X ~ π, E[∇log π(X)] = 0 and E[∇log π(X) Xᵀ] = −I. z-tests on 20 000 exact draws."""
    post = posteriors.get(name)
    n = 20_000
    x = jnp.asarray(post.exact.sample(jax.random.key(1), n), jnp.float64)
    score = np.asarray(jax.jit(jax.vmap(jax.grad(post.logdensity_fn)))(x))
    x = np.asarray(x)
    assert np.all(np.abs(score.mean(0)) <= Z * score.std(0) / math.sqrt(n))
    cross = score.T @ x / n  # E[s xᵀ] and its standard error, without the (n, d, d) products
    cross_se = np.sqrt(np.maximum(np.square(score).T @ np.square(x) / n - cross**2, 0) / n)
    assert np.all(np.abs(cross + np.eye(post.dim)) <= Z * cross_se + 1e-8)


def test_banana_moments_by_monte_carlo(x64):
    """Means 0 and sd (10, √201) against 200 000 direct draws (z-tests on means and variances)."""
    post = posteriors.get("banana")
    rng = np.random.default_rng(0)
    x1 = 10.0 * rng.standard_normal(200_000)
    x = np.stack([x1, 0.1 * (x1**2 - 100.0) + rng.standard_normal(len(x1))], axis=1)
    ref = posteriors.load_reference(post)
    np.testing.assert_allclose(ref["sd"], [10.0, math.sqrt(201.0)], rtol=1e-6)
    mean_se = x.std(0) / math.sqrt(len(x))
    assert np.all(np.abs(x.mean(0) - ref["mean"]) <= Z * mean_se)
    sq = np.square(x - x.mean(0))
    assert np.all(np.abs(sq.mean(0) - ref["sd"]**2) <= Z * sq.std(0) / math.sqrt(len(x)))


def test_funnel_sd_formula():
    """Var x_k = E[e^v] for v ~ N(0, 9), by Gauss-Hermite quadrature: e^{9/2}."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    mean_exp_v = np.sum(weights * np.exp(3.0 * nodes)) / math.sqrt(2 * math.pi)
    ref = posteriors.load_reference(posteriors.get("neals_funnel"))
    np.testing.assert_allclose(ref["sd"], [3.0] + [math.sqrt(mean_exp_v)] * 9, rtol=1e-6)


def test_ill_conditioned_gaussian_spectrum(x64):
    """−∇² log π = Σ⁻¹ with Σ's eigenvalues log-spaced over [1e-2, 1e2]."""
    post = posteriors.get("ill_conditioned_gaussian")
    hessian = np.asarray(jax.jit(jax.hessian(post.logdensity_fn))(jnp.zeros(post.dim)))
    eigenvalues = np.sort(1.0 / np.linalg.eigvalsh(-hessian))
    np.testing.assert_allclose(eigenvalues, np.logspace(-2, 2, post.dim), rtol=1e-4)


def test_brownian_bridge_posterior_is_the_gaussian(x64):
    """The model's gradient vanishes at the exact mean and its Hessian is −Σ⁻¹ (a Gaussian
    posterior); the middle (unobserved) steps are the least certain."""
    post = posteriors.get("brownian_bridge_missing")
    mean = jnp.asarray(post.exact.mean, jnp.float64)
    # one program for both (an eager grad compiles each primitive on its own)
    grad, hessian = (np.asarray(a) for a in jax.jit(
        lambda x: (jax.grad(post.logdensity_fn)(x), jax.hessian(post.logdensity_fn)(x)))(mean))
    np.testing.assert_allclose(grad, 0.0, atol=1e-3)
    np.testing.assert_allclose(np.linalg.inv(-hessian), np.asarray(post.exact.cov, np.float64),
                               rtol=1e-4, atol=1e-7)
    sd = np.sqrt(np.diag(np.asarray(post.exact.cov)))
    assert sd[10:20].min() > sd[:10].max() and sd[10:20].min() > sd[20:].max()


def test_eight_schools_centred_is_the_noncentred_law(x64):
    """theta = mu + tau theta_std maps one form onto the other, so pointwise log p_c(mu, log tau,
    theta) = log p_nc(mu, log tau, (theta - mu) / tau) - 8 log tau (the Jacobian), and the
    reference's map sends (mu, log tau, theta_std) to (mu, log tau, theta)."""
    centred, noncentred = (posteriors.get(n) for n in ("eight_schools_centred",
                                                       "eight_schools_noncentred"))
    assert centred.reference_from[0] == noncentred.name
    x = np.random.default_rng(0).normal(0.0, [5.0, 1.5] + [10.0] * 8, size=(50, 10))
    mu, log_tau = x[:, :1], x[:, 1:2]
    x_std = np.concatenate([mu, log_tau, (x[:, 2:] - mu) / np.exp(log_tau)], axis=1)
    np.testing.assert_allclose(centred.reference_from[1](x_std), x, rtol=1e-12, atol=1e-12)
    log_p_c, log_p_nc = (np.asarray(jax.jit(jax.vmap(post.logdensity_fn))(jnp.asarray(points)))
                         for post, points in ((centred, x), (noncentred, x_std)))
    np.testing.assert_allclose(log_p_c, log_p_nc - 8.0 * x[:, 1], rtol=1e-12)


def test_eight_schools_centred_reference_agrees_with_noncentred_draws():
    """The non-centred reference's 1000 thinned draws, mapped to centred coordinates, have the
    centred reference's means and sds: z-tests at Z on each coordinate's mean and variance,
    treating the thinned draws (1 in 40 of four long chains) as independent; and ``evaluate``
    reads them as calibrated. Both files come from the same NUTS run, so this checks the
    mapping and its bookkeeping (the transform, the moments of the mapped chains), not NUTS:
    an independent run agreed with it when it was made (bench/references/README.md)."""
    centred = posteriors.get("eight_schools_centred")
    ref = posteriors.load_reference(centred)
    draws = np.asarray(posteriors.load_reference(posteriors.get("eight_schools_noncentred"))
                       ["draws"], np.float64)
    x = centred.reference_from[1](draws)
    n = len(x)
    assert np.all(np.abs(x.mean(0) - ref["mean"]) <= Z * ref["sd"] / math.sqrt(n))
    sq = np.square(x - ref["mean"])
    assert np.all(np.abs(sq.mean(0) - ref["sd"]**2) <= Z * sq.std(0) / math.sqrt(n))
    m = bench_posteriors.evaluate(x, centred, ref)
    assert 0.9 <= m["sd_ratio"] <= 1.1 and m["mean_bias2"] <= Z**2 / n


def test_item_response_matches_numpy(x64):
    """The log-density at a random point equals a direct NumPy sum over the observed pairs of
    y log σ(z) + (1 − y) log(1 − σ(z)), z = α_s − β_q + δ, plus the Gaussian log-priors; the
    synthetic data are the pinned draw (a change in NumPy's streams would show here)."""
    post = posteriors.get("item_response")
    data = posteriors.item_response_data()
    student, question, y = data["student"], data["question"], data["correct"]
    assert post.dim == 501 and len(y) == 20050 and int(y.sum()) == 14616
    assert len(np.unique(student * 100 + question)) == len(y)  # each pair at most once
    x = np.random.default_rng(1).normal(0.0, 0.7, post.dim)
    delta, alpha, beta = x[0], x[1:401], x[401:]
    p = 1.0 / (1.0 + np.exp(-(alpha[student] - beta[question] + delta)))
    log_prior = (-0.5 * (delta - 0.75)**2 - 0.5 * np.sum(x[1:]**2)
                 - 0.5 * post.dim * math.log(2 * math.pi))
    expected = np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)) + log_prior
    value = float(jax.jit(post.logdensity_fn)(jnp.asarray(x)))
    assert value == pytest.approx(expected, rel=1e-12)


def test_evaluate_metrics():
    """Draws standardised to the reference moments give sd ratio 1 and zero bias; a duplicated
    row counts once; a constant shift of one reference sd in every coordinate gives bias² 1."""
    post = posteriors.get("banana")
    ref = posteriors.load_reference(post)
    z = np.random.default_rng(0).standard_normal((50, 2))
    z = (z - z.mean(0)) / z.std(0)
    x = ref["mean"] + ref["sd"] * z
    m = bench_posteriors.evaluate(np.concatenate([x, x[:1]]), post, ref)
    assert m["distinct"] == 50 and m["nonfinite"] == 0
    m = bench_posteriors.evaluate(x, post, ref)
    assert m["sd_ratio"] == pytest.approx(1.0) and m["mean_bias2"] == pytest.approx(0.0, abs=1e-20)
    shifted = bench_posteriors.evaluate(x + ref["sd"], post, ref)
    assert shifted["mean_bias2"] == pytest.approx(1.0)
    assert shifted["energy"] > m["energy"]
    broken = bench_posteriors.evaluate(np.concatenate([x, np.full((3, 2), np.nan)]), post, ref)
    assert broken["nonfinite"] == 3 and broken["sd_ratio"] == pytest.approx(1.0)
    moments_only = {k: v for k, v in ref.items() if k != "draws"}  # as item_response's
    m_no_draws = bench_posteriors.evaluate(x, post, moments_only)
    assert m_no_draws["energy"] is None
    assert m_no_draws == {**m, "energy": None}


@pytest.mark.parametrize("moves", [0, 2])
def test_etd_cost_counts_the_calls_etd_makes(moves):
    """The bench's evaluation count equals the rows ETD's compiled run hands to the density and
    the score, counted by callbacks inside them (batched, so each call reports its rows)."""
    from jaxsample.particles import Mutation

    counts = {"density": 0, "gradient": 0}

    def bump(name, rows):
        jax.debug.callback(lambda: counts.__setitem__(name, counts[name] + rows))

    def logdensity(x):
        bump("density", x.shape[0])
        return -0.5 * jnp.sum(x**2, axis=1)

    def score(x):
        bump("gradient", x.shape[0])
        return -x

    alg = jaxsample.etd(logdensity, score_fn=score, batched=True, num_proposals=5,
                        mutation=Mutation(steps=moves))
    state = alg.init(jax.random.normal(jax.random.key(0), (12, 2)))
    jax.effects_barrier()
    counts.update(density=0, gradient=0)
    jax.block_until_ready(jaxsample.run(jax.random.key(1), alg, state, 4))
    jax.effects_barrier()
    expected = bench_posteriors.etd_cost(12, 4, num_proposals=5, mutation=Mutation(steps=moves))
    assert counts == {"density": expected["density_evals"],
                      "gradient": expected["gradient_evals"]}


def test_docstring_example():
    assert doctest.testmod(posteriors).failed == 0
