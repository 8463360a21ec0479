"""Tests specific to the guidance engine: exact oracles, TAG, DPS, NDTM, fibers, bad values.

dtype preservation, jit == eager, vmap over keys, traced hyper-parameters and bad input are in the
contract entries (tests/contract/diffusion_guidance.py).

One problem serves most tests so that compilations are shared: a 4-component Gaussian mixture in
d = 8 with anisotropic covariances, N = 20 steps, B = 256 samples, the linear schedule.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats

from jaxsample.diagnostics import mmd
from jaxsample.diffusion import guidance
from jaxsample.kernels import guidance as kernels

DIM, NUM_COMPONENTS, NUM_STEPS, BATCH = 8, 4, 20, 256
SCHEDULE = guidance.VPSchedule("linear")
GRID = guidance.time_grid(NUM_STEPS, jnp.float32)


def _mixture():
    rng = np.random.default_rng(1)
    means = rng.normal(size=(NUM_COMPONENTS, DIM))
    root = rng.normal(size=(NUM_COMPONENTS, DIM, DIM)) / np.sqrt(DIM)
    cov = 0.1 * root @ np.swapaxes(root, 1, 2) + 0.05 * np.eye(DIM)
    weights = np.array([0.3, 0.3, 0.2, 0.2])
    return guidance.GaussianMixturePrior(*(jnp.asarray(a, jnp.float32)
                                           for a in (weights, means, cov)))


PRIOR = _mixture()
# stationary data: N(0, I) is every marginal of the VP process (same shapes as PRIOR: one compile)
STATIONARY = guidance.GaussianMixturePrior(
    jnp.full(NUM_COMPONENTS, 0.25, jnp.float32), jnp.zeros((NUM_COMPONENTS, DIM), jnp.float32),
    jnp.ones(NUM_COMPONENTS, jnp.float32))
PROJECTION = np.eye(2, DIM, dtype=np.float32)                       # φ(x) = x[:2]
QUERY = 0.5 * (PRIOR.means[0] + PRIOR.means[1])                     # the fiber crosses 0 and 1
FIBER = PRIOR.condition_linear(jnp.asarray(PROJECTION), jnp.asarray(PROJECTION) @ QUERY)
X_T = jax.random.normal(jax.random.key(1), (BATCH, DIM))


def _features(x):
    return x[:2]


COST = guidance.fiber_cost(_features, QUERY)


@functools.cache
def _exact_fiber_draws(num=4096):
    return FIBER.sample(jax.random.key(5), num)


# ------------------------------------------------------------------------------- oracles


def test_schedules_end_points_and_table():
    t = jnp.array([0.0, 0.5, 1.0], jnp.float32)
    for schedule in (guidance.VPSchedule("linear"), guidance.VPSchedule("cosine")):
        alpha = np.asarray(schedule.alpha_bar(t))
        assert alpha[0] == 1.0 and np.all(np.diff(alpha) < 0) and 0 < alpha[-1] < 1e-3
    np.testing.assert_allclose(guidance.VPSchedule("linear").alpha_bar(t)[-1],
                               np.exp(-(0.1 + 0.5 * 19.9)), rtol=1e-5)
    table = guidance.VPSchedule("table", alpha_bar=[0.9, 0.5, 0.1])
    np.testing.assert_allclose(table.alpha_bar(jnp.array([1 / 3, 0.5, 1.0], jnp.float32)),
                               [0.9, np.sqrt(0.9 * 0.5), 0.1], rtol=1e-5)


def test_gmm_score_and_eps_closed_forms(x64):
    prior = guidance.GaussianMixturePrior(*(jnp.asarray(np.asarray(a), jnp.float64) for a in (
        jnp.exp(PRIOR.log_weights), PRIOR.means, PRIOR.covariances)))
    x = jnp.asarray(np.random.default_rng(0).normal(size=DIM))
    t = jnp.float64(0.3)
    score, grad, log_prob, eps = jax.jit(lambda x, t: (
        prior.score(x, SCHEDULE, t), jax.grad(prior.log_prob)(x, SCHEDULE, t),
        prior.log_prob(x, SCHEDULE, t), prior.eps(x, SCHEDULE, t)))(x, t)
    np.testing.assert_allclose(score, grad, rtol=1e-10)
    np.testing.assert_allclose(eps, -np.sqrt(1 - SCHEDULE.alpha_bar(t)) * score, rtol=1e-12)
    # the density itself against scipy
    alpha = float(SCHEDULE.alpha_bar(t))
    dens = sum(np.exp(lw) * scipy.stats.multivariate_normal(
        np.sqrt(alpha) * m, alpha * c + (1 - alpha) * np.eye(DIM)).pdf(np.asarray(x))
        for lw, m, c in zip(np.asarray(prior.log_weights), np.asarray(prior.means),
                            np.asarray(prior.covariances), strict=True))
    assert float(log_prob) == pytest.approx(np.log(dens), rel=1e-10)


def test_time_linked_score_is_grad_of_exact_time_logits(x64):
    x = jnp.asarray(np.random.default_rng(0).normal(size=DIM))
    grid = guidance.time_grid(NUM_STEPS, jnp.float64)
    indices = jnp.array([0, 7, NUM_STEPS - 1])

    @jax.jit
    def evaluate(x):
        logits = lambda y: PRIOR.time_logits(y, SCHEDULE, grid)              # noqa: E731
        jacobian = jax.jacobian(lambda y: jax.nn.log_softmax(logits(y)))(x)   # (T, d)
        closed = jax.vmap(lambda i: PRIOR.time_linked_score(x, SCHEDULE, grid, i))(indices)
        return jacobian, closed, jnp.exp(PRIOR.time_log_posterior(x, SCHEDULE, grid))

    jacobian, closed, posterior = evaluate(x)
    np.testing.assert_allclose(closed, jacobian[indices], rtol=1e-9, atol=1e-9)
    # Σ_τ p(τ | x) ∇ log p(τ | x) = ∇ Σ_τ p(τ | x) = 0
    scale = float(jnp.max(jnp.abs(jacobian)))
    np.testing.assert_allclose(posterior @ jacobian, np.zeros(DIM), atol=1e-12 * scale)


def test_linear_fiber_law_matches_gaussian_conditioning():
    """condition_linear: draws satisfy Ax = y; weights and means against a float64 computation."""
    draws = np.asarray(_exact_fiber_draws())
    np.testing.assert_allclose(draws[:, :2], np.broadcast_to(np.asarray(QUERY[:2]), (4096, 2)),
                               atol=1e-5)
    a, y = PROJECTION.astype(np.float64), PROJECTION @ np.asarray(QUERY, np.float64)
    log_w = []
    for k in range(NUM_COMPONENTS):
        m, c = np.asarray(PRIOR.means[k], np.float64), np.asarray(PRIOR.covariances[k], np.float64)
        s = a @ c @ a.T
        log_w.append(np.asarray(PRIOR.log_weights[k], np.float64)
                     + scipy.stats.multivariate_normal(a @ m, s).logpdf(y))
        np.testing.assert_allclose(FIBER.means[k], m + c @ a.T @ np.linalg.solve(s, y - a @ m),
                                   rtol=1e-4, atol=1e-5)
    weights = np.exp(np.array(log_w) - scipy.special.logsumexp(log_w))
    np.testing.assert_allclose(np.exp(FIBER.log_weights), weights, atol=1e-5)
    assert weights[0] > 0.2 and weights[1] > 0.2      # the fiber crosses components 0 and 1


def test_learned_time_predictor_approaches_the_exact_one():
    """Cross-entropy training shrinks KL(exact ‖ learned); no predictor beats the Bayes one.

    Both KL estimates use the same 2048 (τ, x_τ) pairs; each is a mean of non-negative terms, so
    the comparison is paired; the exact posterior's own KL is 0 by construction.
    """
    grid = guidance.time_grid(10, jnp.float32)
    data = PRIOR.sample(jax.random.key(0), 4096)
    untrained = guidance.TimePredictor(jax.random.key(1), DIM, 10, width=16)
    trained, info = guidance.train_time_predictor(jax.random.key(2), untrained, data,
                                                  SCHEDULE, grid, num_steps=400,
                                                  batch_size=128, learning_rate=3e-3)
    losses = info.losses
    assert losses.shape == (400,) and float(losses[-100:].mean()) < float(losses[:20].mean())
    assert not bool(info.nonfinite)
    # any optax optimizer: Adam at the same rate, given as a transformation, is the same fit
    same, same_info = guidance.train_time_predictor(jax.random.key(2), untrained, data, SCHEDULE,
                                                    grid, num_steps=400, batch_size=128,
                                                    optimizer=optax.adam(3e-3))
    np.testing.assert_allclose(same_info.losses, losses, rtol=1e-5, atol=1e-6)
    kl_before, _ = guidance.time_posterior_kl(jax.random.key(3), PRIOR, untrained, SCHEDULE, grid,
                                              num_samples=2048)
    kl_after, se = guidance.time_posterior_kl(jax.random.key(3), PRIOR, trained, SCHEDULE, grid,
                                              num_samples=2048)
    assert float(kl_after) < 0.5 * float(kl_before)
    assert float(kl_after) > -3 * float(se)          # KL ≥ 0: the exact posterior is optimal


# -------------------------------------------------------------------------------- samplers


@functools.cache
def _sampler(kind):
    eps = PRIOR.eps_model(SCHEDULE)
    tag_terms = lambda prior, omega: [guidance.tag(                       # noqa: E731
        prior.time_predictor(SCHEDULE, GRID), omega)]
    if kind == "base":
        return jax.jit(lambda key, x, eta, prior: guidance.sample(
            key, prior.eps_model(SCHEDULE), SCHEDULE, x, num_steps=NUM_STEPS,
            solver=guidance.DDIM(eta)))
    if kind == "tag-off":
        return jax.jit(lambda key, x, eta, prior: guidance.sample(
            key, prior.eps_model(SCHEDULE), SCHEDULE, x, num_steps=NUM_STEPS,
            solver=guidance.DDIM(eta), guidance=tag_terms(prior, 0.0)))
    if kind == "tag":
        return jax.jit(lambda key, x, eta, prior, omega: guidance.sample(
            key, prior.eps_model(SCHEDULE), SCHEDULE, x, num_steps=NUM_STEPS,
            solver=guidance.DDIM(eta), guidance=tag_terms(prior, omega)))
    if kind == "ndtm":
        return jax.jit(lambda key, x, eta, weight: guidance.sample(
            key, eps, SCHEDULE, x, num_steps=NUM_STEPS, solver=guidance.NDTM(
                COST, eta=eta, terminal_weight=weight, learning_rate=0.1,
                learning_rate_schedule="constant")))
    raise KeyError(kind)


def test_tag_omega_zero_and_ndtm_without_cost_are_bitwise_ddim():
    key, eta = jax.random.key(3), jnp.float32(0.5)
    x0, info = _sampler("base")(key, X_T, eta, PRIOR)
    tag_x0, tag_info = _sampler("tag-off")(key, X_T, eta, PRIOR)
    np.testing.assert_array_equal(np.asarray(tag_x0), np.asarray(x0))
    assert tag_info.time_gap.shape == (NUM_STEPS, BATCH, 1) and float(tag_info.time_gap.max()) > 0
    np.testing.assert_array_equal(np.asarray(tag_info.guidance_norm), 0)
    ndtm_x0, ndtm_info = _sampler("ndtm")(key, X_T, eta, jnp.float32(0.0))
    np.testing.assert_array_equal(np.asarray(ndtm_x0), np.asarray(x0))
    np.testing.assert_array_equal(np.asarray(ndtm_info.control_norm), 0)
    assert int(ndtm_info.num_eps_evals) == NUM_STEPS * 6 and int(ndtm_info.num_vjps) == 100
    assert not bool(info.nonfinite.any() | ndtm_info.nonfinite.any())


def test_tag_is_the_base_sampler_on_stationary_data():
    """N(0, I) data: every p_t is N(0, I), p(τ | x) is uniform, the TAG field is 0 for every ω."""
    key, eta = jax.random.key(4), jnp.float32(1.0)
    x0, _ = _sampler("base")(key, X_T, eta, STATIONARY)
    for omega in (0.5, 4.0):
        tagged, info = _sampler("tag")(key, X_T, eta, STATIONARY, jnp.float32(omega))
        np.testing.assert_allclose(tagged, x0, rtol=1e-5, atol=1e-5)
        assert float(info.guidance_norm.max()) < 1e-4


def test_tag_reduces_the_time_gap_after_an_off_manifold_perturbation():
    """x_T = 1.6·ξ has the wrong norm for every time; TAG (ω = 1) lowers the mean time gap.

    Paired per-sample trajectory-mean gaps (same key and start for ω = 0 and ω = 1), one-sided
    z-test at z = 4 on B = 256 pairs; the exact Bayes time posterior, d = 8.
    """
    key, eta = jax.random.key(6), jnp.float32(0.0)
    start = 1.6 * X_T
    _, off = _sampler("tag-off")(key, start, eta, PRIOR)
    _, on = _sampler("tag")(key, start, eta, PRIOR, jnp.float32(1.0))
    diff = np.asarray(off.time_gap.mean(axis=(0, 2)) - on.time_gap.mean(axis=(0, 2)))
    assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(BATCH)
    # the unperturbed start is closer to the manifold than the perturbed one
    _, clean = _sampler("tag-off")(key, X_T, eta, PRIOR)
    assert float(clean.time_gap.mean()) < float(off.time_gap.mean())


def test_ddpm_posterior_variance_is_ddim_eta_one():
    key = jax.random.key(7)
    x0, _ = _sampler("base")(key, X_T, jnp.float32(1.0), PRIOR)
    ddpm, info = guidance.sample(key, PRIOR.eps_model(SCHEDULE), SCHEDULE, X_T,
                                 num_steps=NUM_STEPS, solver=guidance.DDPM())
    np.testing.assert_allclose(ddpm, x0, rtol=2e-3, atol=2e-3)
    assert int(info.num_eps_evals) == NUM_STEPS and int(info.num_vjps) == 0


def _label_counts(x):
    responsibilities = jax.vmap(lambda y: PRIOR.component_log_posterior(
        y, SCHEDULE, jnp.float32(1e-4)))(x)
    return np.bincount(np.asarray(jnp.argmax(responsibilities, axis=1)),
                       minlength=NUM_COMPONENTS)


def _permutation_pvalue(x, y, num_permutations=200, bandwidth=1.0):
    z = jnp.concatenate([x, y])
    stat, _ = mmd(x, y, bandwidth)

    def one(key):
        shuffled = z[jax.random.permutation(key, z.shape[0])]
        return mmd(shuffled[:x.shape[0]], shuffled[x.shape[0]:], bandwidth)[0]

    null = jax.lax.map(jax.jit(one), jax.random.split(jax.random.key(0), num_permutations))
    return float(stat), float((1 + jnp.sum(null >= stat)) / (1 + num_permutations))


def test_exact_fiber_guidance_samples_the_exact_conditional_mixture():
    """Prior score + the exact likelihood term ∇ log p_t(Ax₀ = y | x) samples the fiber law.

    The likelihood term is classifier guidance with log p_t^fiber(x) − log p_t(x) (the fiber law
    is a mixture, :meth:`condition_linear`). MMD permutation test (200 permutations) against exact
    draws at p > 0.001; component labels (argmax of the prior's responsibilities) against the
    exact draws' frequencies by a chi-square test at p > 0.001.
    """
    def likelihood(x, t):
        return FIBER.log_prob(x, SCHEDULE, t) - PRIOR.log_prob(x, SCHEDULE, t)

    x0, info = guidance.sample(jax.random.key(8), PRIOR.eps_model(SCHEDULE), SCHEDULE, X_T,
                               num_steps=NUM_STEPS, solver=guidance.DDIM(1.0),
                               guidance=guidance.classifier_guidance(likelihood, 1.0))
    assert not bool(info.nonfinite.any())
    np.testing.assert_allclose(x0[:, :2], np.broadcast_to(QUERY[:2], (BATCH, 2)), atol=1e-3)
    exact = _exact_fiber_draws()
    _, pvalue = _permutation_pvalue(x0, exact[:BATCH])
    assert pvalue > 1e-3
    expected = _label_counts(exact) / exact.shape[0] * BATCH
    observed = _label_counts(x0)
    keep = expected > 0.5
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    assert scipy.stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3, (observed, expected)


def test_ndtm_fiber_residual_shrinks_as_the_terminal_weight_grows():
    """Mean residual ‖Ax₀ − y‖ at w_term = 0.2, 1, 5 (same key): strictly decreasing, each step
    by more than 4 standard errors of the paired per-sample differences; NDTM lands nearer the
    exact fiber law (MMD) than the unguided prior does.

    (Adam moves each coordinate by about λ per inner step whatever the cost's scale, so far
    larger w_term stop helping once the residual is at the optimiser's resolution.)"""
    key, eta = jax.random.key(9), jnp.float32(1.0)
    residuals, samples = [], []
    for weight in (0.2, 1.0, 5.0):
        x0, info = _sampler("ndtm")(key, X_T, eta, jnp.float32(weight))
        assert not bool(info.nonfinite.any())
        residuals.append(np.sqrt(np.asarray(info.final_cost)))
        samples.append(x0)
    for coarse, fine in zip(residuals, residuals[1:], strict=False):
        diff = coarse - fine
        assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(BATCH)
    exact = _exact_fiber_draws()[:BATCH]
    unguided, _ = _sampler("base")(key, X_T, eta, PRIOR)
    assert float(mmd(samples[-1], exact, 1.0)[0]) < 0.5 * float(mmd(unguided, exact, 1.0)[0])


def test_dps_moves_towards_the_fiber():
    term = guidance.fiber_guidance(_features, QUERY, 0.1)
    x0, info = guidance.sample(jax.random.key(10), PRIOR.eps_model(SCHEDULE), SCHEDULE,
                               X_T, num_steps=NUM_STEPS, solver=guidance.DDIM(1.0),
                               guidance=term)
    unguided, _ = _sampler("base")(jax.random.key(10), X_T, jnp.float32(1.0), PRIOR)
    residual = lambda x: np.linalg.norm(np.asarray(x)[:, :2] - np.asarray(QUERY[:2]), axis=1)  # noqa: E731
    assert np.median(residual(x0)) < 0.5 * np.median(residual(unguided))
    assert int(info.num_vjps) == NUM_STEPS and float(info.guidance_norm.min()) > 0


def test_ndtm_weights_are_squared_step_coefficients(x64):
    alpha_t, alpha_s, eta = jnp.float64(0.3), jnp.float64(0.6), jnp.float64(0.4)
    noise = jnp.zeros(())
    ddim_x = jax.grad(lambda x: kernels.ddim_update(x, 0.2, alpha_t, alpha_s, eta, noise))(1.0)
    ddim_e = jax.grad(lambda e: kernels.ddim_update(1.0, e, alpha_t, alpha_s, eta, noise))(0.2)
    w_score, w_control = kernels.ndtm_weights("ddim", "ddim", alpha_t, alpha_s, eta)
    np.testing.assert_allclose([w_score, w_control], [ddim_e**2, ddim_x**2], rtol=1e-12)
    ddpm_x = jax.grad(lambda x: kernels.ddpm_update(x, 0.2, alpha_t, alpha_s, noise,
                                                    "posterior", False))(1.0)
    ddpm_e = jax.grad(lambda e: kernels.ddpm_update(1.0, e, alpha_t, alpha_s, noise,
                                                    "posterior", False))(0.2)
    w_score, w_control = kernels.ndtm_weights("ddpm", "ddpm", alpha_t, alpha_s, eta)
    np.testing.assert_allclose([w_score, w_control], [ddpm_e**2, ddpm_x**2], rtol=1e-12)


# --------------------------------------------------------------------------- bad values


def test_nonfinite_predictions_and_costs_are_flagged_not_propagated():
    """A NaN prediction freezes only its sample for that step (flagged); a NaN cost drops every
    control gradient, so u stays 0 and NDTM returns the DDIM samples (to the round-off of another
    compilation), all flagged."""
    small = X_T[:16]

    def broken_eps(x, t):
        eps = PRIOR.eps(x, SCHEDULE, t)
        return jnp.where(x[0] > 0.5, jnp.full_like(eps, jnp.nan), eps)

    x0, info = guidance.sample(jax.random.key(0), broken_eps, SCHEDULE, small,
                               num_steps=NUM_STEPS)
    assert bool(jnp.all(jnp.isfinite(x0)))
    assert bool(info.nonfinite.any()) and not bool(info.nonfinite.all())

    key, eta = jax.random.key(11), jnp.float32(0.5)
    x0, info = guidance.sample(key, PRIOR.eps_model(SCHEDULE), SCHEDULE, X_T,
                               num_steps=NUM_STEPS,
                               solver=guidance.NDTM(lambda x: jnp.nan * COST(x), eta=eta))
    base, _ = _sampler("base")(key, X_T, eta, PRIOR)
    np.testing.assert_allclose(x0, base, rtol=1e-5, atol=1e-5)
    assert bool(info.nonfinite.all()) and float(info.control_norm.max()) == 0


def test_chunked_batch_equals_dense_and_bounds_memory():
    """Blocks of 48 (ragged: 256 = 5·48 + 16) equal the dense batch; at B = 8192 blocks of 256
    cut the compiled temporary memory by more than 2×."""
    def run(key, x, eta, chunk_size):
        return guidance.sample(key, PRIOR.eps_model(SCHEDULE), SCHEDULE, x, num_steps=NUM_STEPS,
                               solver=guidance.DDIM(eta), chunk_size=chunk_size)[0]

    key, eta = jax.random.key(12), jnp.float32(0.5)
    dense, _ = _sampler("base")(key, X_T, eta, PRIOR)
    np.testing.assert_allclose(run(key, X_T, eta, 48), dense, rtol=1e-5, atol=1e-5)
    big = jax.ShapeDtypeStruct((8192, DIM), jnp.float32)

    def temp_bytes(chunk_size):
        compiled = jax.jit(lambda x: run(key, x, eta, chunk_size)).lower(big).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    assert temp_bytes(256) < 0.5 * temp_bytes(None)
