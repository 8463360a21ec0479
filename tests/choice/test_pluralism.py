"""Tests of jaxsample.choice.pluralism: attribution coverage, symmetry, identifiability, metrics.

Statistical checks use exact binomial bounds at a stated two-sided p-value (``P_VALUE``), with
fixed seeds; the dtype/jit/vmap/bad-input checks live in the contract registry.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from jaxsample import choice, datasets

P_VALUE = 1e-3
NUM_AGENTS, NUM_DILEMMAS, BETA = 30, 150, 3.0


def _binomial_interval(num_trials, prob):
    """Counts outside this interval have two-sided probability below ``P_VALUE``."""
    low = scipy.stats.binom.ppf(P_VALUE / 2, num_trials, prob)
    high = scipy.stats.binom.isf(P_VALUE / 2, num_trials, prob)
    return low, high


def _panel(design="random", seed=0):
    # planted weights from NumPy: the panel's own Dirichlet draw is its doctest's business
    weights = np.random.default_rng(seed).dirichlet(np.full(4, 4.0), NUM_AGENTS)
    return datasets.synthetic_panel(jax.random.key(seed), num_agents=NUM_AGENTS,
                                    num_dilemmas=NUM_DILEMMAS, decisiveness=BETA, design=design,
                                    weights=jnp.asarray(weights, jnp.float32))


def _fits(panel, keys, l2):
    """Bootstrap fits of every agent (keys) or Laplace fits (keys None): one compilation each."""
    fits = []
    for m in range(NUM_AGENTS):
        if keys is None:
            fits.append(choice.fit_value_priorities(panel.choices[m], panel.option_features,
                                                    l2=l2, level=0.9))
        else:
            fits.append(choice.bootstrap_value_priorities(
                keys[m], panel.choices[m], panel.option_features, l2=l2, num_resamples=100,
                level=0.9))
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *fits)


def test_bootstrap_and_laplace_intervals_cover_planted_priorities():
    # 30 planted agents × 4 principles; the intervals are at level 0.9. Indicators of different
    # principles of one agent are dependent, so the binomial bound (p = 1e-3 two-sided) is a
    # guide; the agents themselves are independent.
    panel = _panel()
    theta = np.asarray(panel.weights * BETA)
    boot_theta, boot = _fits(panel, jax.random.split(jax.random.key(1), NUM_AGENTS), 0.01)
    laplace_theta, laplace = _fits(panel, None, 0.01)
    assert bool(jnp.all(boot.solver.converged)) and bool(jnp.all(laplace.solver.converged))
    assert not bool(jnp.any(boot.nonfinite))
    assert np.all(np.asarray(boot.design_rank) == 4)
    np.testing.assert_allclose(boot_theta, laplace_theta)  # the same point estimate
    # w = θ/β and β = Σθ beside the estimate
    scaled = np.asarray(laplace.weights) * np.asarray(laplace.decisiveness)[:, None]
    np.testing.assert_allclose(scaled, laplace_theta, rtol=1e-5)
    low, high = _binomial_interval(theta.size, 0.9)
    for info in (boot, laplace):
        covered = (np.asarray(info.lower) <= theta) & (theta <= np.asarray(info.upper))
        assert low <= covered.sum() <= high, (covered.sum(), low, high)
    # the two interval kinds estimate the same spread (bootstrap sd vs inverse Hessian)
    ratio = np.asarray(boot.standard_error) / np.asarray(laplace.standard_error)
    assert 0.8 < np.median(ratio) < 1.25, np.median(ratio)


def test_swapping_option_order_leaves_the_fit_unchanged():
    # the likelihood is exactly invariant; the two solver paths agree to the solver's accuracy
    # (float32, tolerance 1e-4 on the steps: a few 1e-3 on θ)
    panel = _panel()
    theta, info = choice.fit_value_priorities(panel.choices[0], panel.option_features, l2=0.01,
                                              level=0.9)
    swapped, info_s = choice.fit_value_priorities(
        1 - panel.choices[0], panel.option_features[:, ::-1], l2=0.01, level=0.9)
    np.testing.assert_allclose(swapped, theta, rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(info_s.log_likelihood, info.log_likelihood, rtol=1e-5)
    np.testing.assert_allclose(info_s.standard_error, info.standard_error, rtol=1e-3)


def test_contrast_design_identifies_only_contrasts():
    panel = _panel("contrast", seed=2)
    theta, info = choice.fit_value_priorities(panel.choices[0], panel.option_features, l2=0.01,
                                              level=0.9)
    assert int(info.design_rank) == 3
    # θ and θ + c·1 give the same choice law; the penalty picks the minimum-norm θ (Σθ = 0)
    probs, law = choice.choice_probabilities(theta, panel.option_features)
    shifted, _ = choice.choice_probabilities(theta + 5.0, panel.option_features)
    np.testing.assert_allclose(np.exp(np.asarray(law.log_probabilities)), probs, rtol=1e-6)
    np.testing.assert_allclose(shifted, probs, rtol=1e-5, atol=1e-6)
    assert abs(float(jnp.sum(theta))) < 1e-3
    planted = np.asarray(panel.weights[0] * BETA)
    contrast_error = np.asarray(theta - theta[0]) - (planted - planted[0])
    assert np.all(np.abs(contrast_error) < 4 * np.sqrt(2) * np.asarray(info.standard_error))


def test_separable_choices_give_a_finite_fit_that_reproduces_them():
    panel = _panel()
    theta_true = jnp.asarray([0.05, 0.45, 0.25, 0.25], jnp.float32) * 200.0
    probs, _ = choice.choice_probabilities(theta_true, panel.option_features)
    decisive = jnp.abs(probs[:, 0] - 0.5) > 0.49  # ties (identical options) excluded
    chosen = jnp.argmax(probs, axis=-1)
    theta, info = choice.fit_value_priorities(chosen, panel.option_features, l2=0.01,
                                              level=0.9)
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    fitted = jnp.argmax(choice.choice_probabilities(theta, panel.option_features)[0], axis=-1)
    assert bool(jnp.all((fitted == chosen) | ~decisive))


def test_decision_entropy_vanishes_as_decisiveness_grows_except_on_ties():
    panel = _panel()
    features = panel.option_features
    tie = np.asarray(jnp.all(features[:, 0] == features[:, 1], axis=-1))
    assert 0 < tie.sum() < NUM_DILEMMAS  # identical options occur with probability 3⁻⁴
    w = panel.weights[0]
    entropy = np.stack([np.asarray(choice.decision_entropy(
        choice.sample_choices(jax.random.key(3), beta * w, features, num_samples=64)[0],
        dtype=jnp.float32)[0]) for beta in (1.0, 30.0, 1e4)])
    means = entropy[:, ~tie].mean(axis=1)
    assert means[0] > means[1] > means[2] == 0.0, means
    # ties are fair coins at every β: p̂ ~ Bin(64, ½)/64, so h(p̂) ≥ h(½ ± 0.2) except with
    # probability < 1e-3 per dilemma and β
    floor = -(0.3 * np.log2(0.3) + 0.7 * np.log2(0.7))
    assert np.all(entropy[:, tie] >= floor)
    # the model-implied entropy decreases monotonically to 0 off ties
    betas = jnp.asarray([1.0, 10.0, 100.0, 1e4])
    implied = choice.choice_probabilities(betas[:, None] * w[None, :], features)[0][..., 0]
    h = -(implied * jnp.log2(implied) + (1 - implied) * jnp.log2(1 - implied))
    h = np.asarray(jnp.nan_to_num(h))[:, ~tie]
    assert np.all(np.diff(h, axis=0) <= 1e-6) and h[-1].max() < 1e-3


def test_pluralism_gap_of_a_deterministic_model_against_its_panel():
    panel = _panel()
    model, _ = choice.sample_choices(jax.random.key(4), 1e4 * panel.weights[0],
                                     panel.option_features, num_samples=64)
    gap, info = choice.pluralism_gap(model, panel.choices, dtype=jnp.float32)
    panel_fraction = np.mean(np.asarray(panel.choices) == 0, axis=0)
    model_fraction = np.mean(np.asarray(model) == 0, axis=0)
    np.testing.assert_allclose(gap, np.abs(panel_fraction - model_fraction), atol=1e-6)
    np.testing.assert_allclose(np.asarray(info.panel_frequencies)[:, 0], panel_fraction,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(info.model_frequencies)[:, 0], model_fraction,
                               atol=1e-6)
    # a model that copies the panel's law has gap 0
    np.testing.assert_allclose(choice.pluralism_gap(panel.choices, panel.choices,
                                                    dtype=jnp.float32)[0], 0.0, atol=1e-6)


def test_panel_percentile_converges_to_the_dirichlet_marginal():
    # w ~ Dir(4, 4, 4, 4) has marginals Beta(4, 12); the empirical CDF of M draws is within
    # 4.5 binomial standard errors of it
    rng = np.random.default_rng(0)
    num = 20_000
    panel = jnp.asarray(rng.dirichlet(np.full(4, 4.0), num), jnp.float32)
    grid = np.array([0.05, 0.1, 0.25, 0.4], np.float32)
    values = jnp.asarray(np.stack([grid] * 4, axis=1))
    percentile, info = choice.panel_percentile(values, panel)
    percentile = np.asarray(percentile)
    np.testing.assert_allclose(np.asarray(info.panel_median), np.median(np.asarray(panel), 0),
                               rtol=1e-6)
    cdf = scipy.stats.beta(4, 12).cdf(grid)[:, None]
    assert np.all(np.abs(percentile - cdf) <= 4.5 * np.sqrt(cdf * (1 - cdf) / num))
    assert np.all(np.diff(percentile, axis=0) >= 0)


def test_a_fit_cut_short_is_reported_under_jit_and_warned_eagerly():
    import pytest

    panel = _panel()
    choices, features = panel.choices[0], panel.option_features
    # one BFGS step from θ = 0 cannot meet the Cauchy criterion (changes below 1e-4)
    _, info = jax.jit(lambda c: choice.fit_value_priorities(c, features, max_iterations=1))(
        choices)
    assert not bool(info.solver.converged)
    with pytest.warns(RuntimeWarning, match="fit_value_priorities' BFGS fit did not succeed"):
        choice.fit_value_priorities(choices, features, max_iterations=1)
    key = jax.random.key(2)
    _, info = jax.jit(lambda k, c: choice.bootstrap_value_priorities(
        k, c, features, num_resamples=4, max_iterations=1))(key, choices)
    assert not bool(info.solver.converged)
    with pytest.warns(RuntimeWarning, match="bootstrap_value_priorities' BFGS fits"):
        choice.bootstrap_value_priorities(key, choices, features, num_resamples=4,
                                          max_iterations=1)
