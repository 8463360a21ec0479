"""Tests of jaxsample.kernels.hazard: the SHS invariants (paper notes §4), the Bernoulli baseline.

Statistical checks use fixed seeds and a z = 5 bound on the Monte Carlo standard error, or a
chi-square test at p = 1e-4.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxsample.kernels import hazard

Z = 5.0
NUM_POSITIONS = 100_000
# a fixed hazard path with steps above 1 (multiple crossings); total 3.37, frac 0.37
PATH = np.array([0.05, 0.6, 1.4, 0.02, 0.3, 0.0, 0.9, 0.1])
# a path with every step <= 1, for per-step and consecutive-step frequencies
SMALL_PATH = np.array([0.3, 0.8, 0.45, 0.05, 0.9, 0.6, 0.25])


def _run_stratified(phase, path, dtype):
    """Crossings per step, shape (S, n), for a fixed path shared by all positions."""

    def step(phase, delta):
        n, phase = hazard.stratified_jumps(phase, jnp.full(phase.shape, delta, dtype))
        return phase, n

    _, crossings = jax.lax.scan(step, phase, jnp.asarray(path, dtype))
    return crossings


def _z_ok(frequency, prob, n):
    se = np.sqrt(max(prob * (1 - prob), 1e-12) / n)
    return abs(frequency - prob) <= Z * se + 1e-12


def test_two_point_count_mean_and_variance(dtype):
    phase = hazard.init_phase(jax.random.key(0), (NUM_POSITIONS,), dtype)
    assert phase.dtype == dtype
    crossings = _run_stratified(phase, PATH, dtype)
    assert crossings.dtype == dtype
    count = np.asarray(crossings.sum(axis=0), dtype=np.float64)
    total = float(np.sum(np.asarray(jnp.asarray(PATH, dtype), dtype=np.float64)))
    lo, frac = np.floor(total), total - np.floor(total)
    # J in {floor(Λ), ceil(Λ)} exactly
    assert set(np.unique(count)) <= {lo, lo + 1}
    # P(J = ceil Λ) = frac(Λ): binomial z-test; E[J] = Λ and Var[J] = f(1 − f) follow for a
    # two-point count, and are checked with the same standard error
    p_hat = float(np.mean(count == lo + 1))
    assert _z_ok(p_hat, frac, NUM_POSITIONS)
    assert abs(count.mean() - total) <= Z * np.sqrt(frac * (1 - frac) / NUM_POSITIONS)
    var_se = np.sqrt(frac * (1 - frac) * (1 - 2 * frac) ** 2 / NUM_POSITIONS) + 1 / NUM_POSITIONS
    assert abs(count.var() - frac * (1 - frac)) <= Z * var_se
    assert count.var() <= 0.25


def test_per_step_and_consecutive_jump_probabilities(dtype):
    phase = hazard.init_phase(jax.random.key(1), (NUM_POSITIONS,), dtype)
    jumped = np.asarray(_run_stratified(phase, SMALL_PATH, dtype)) >= 1
    deltas = np.asarray(jnp.asarray(SMALL_PATH, dtype), dtype=np.float64)
    for k, delta in enumerate(deltas):
        assert _z_ok(jumped[k].mean(), delta, NUM_POSITIONS), (k, jumped[k].mean(), delta)
    for k in range(len(deltas) - 1):
        both = float(np.mean(jumped[k] & jumped[k + 1]))
        assert _z_ok(both, max(0.0, deltas[k] + deltas[k + 1] - 1.0), NUM_POSITIONS), k


def test_phase_stays_in_unit_interval_and_float32_is_exact_over_long_paths():
    # 10^4 steps of 0.12345: Λ ≈ 1234.5. The fractional form keeps every count in {floor, ceil};
    # an accumulated float32 mass would have an ulp of ~1e-4 here and drift.
    delta = np.float32(0.12345)
    num_steps, n = 10_000, 1_000
    phase0 = hazard.init_phase(jax.random.key(2), (n,), jnp.float32)

    def step(carry, _):
        phase, count = carry
        crossings, phase = hazard.stratified_jumps(phase, jnp.full((n,), delta))
        return (phase, count + crossings), (jnp.min(phase), jnp.max(phase))

    (phase, count), (lows, highs) = jax.lax.scan(
        step, (phase0, jnp.zeros(n, jnp.float32)), None, length=num_steps
    )
    assert float(lows.min()) >= 0.0 and float(highs.max()) < 1.0
    total = num_steps * float(delta)
    assert set(np.unique(np.asarray(count))) <= {np.floor(total), np.floor(total) + 1}


def test_nonfinite_mass_keeps_the_phase_and_shows_in_the_count(dtype):
    phase = jnp.asarray([0.25, 0.5, 0.75], dtype)
    mass = jnp.asarray([jnp.inf, jnp.nan, 0.5], dtype)
    crossings, new_phase = hazard.stratified_jumps(phase, mass)
    assert np.isposinf(crossings[0]) and np.isnan(crossings[1]) and crossings[2] == 1
    np.testing.assert_allclose(new_phase, np.asarray([0.25, 0.5, 0.25]), atol=1e-6)
    assert new_phase.dtype == dtype


def test_stratified_under_jit_and_vmap_matches_eager():
    phase = hazard.init_phase(jax.random.key(3), (4, 5))
    mass = jax.random.uniform(jax.random.key(4), (4, 5)) * 3
    eager = hazard.stratified_jumps(phase, mass)
    jitted = jax.jit(hazard.stratified_jumps)(phase, mass)
    mapped = jax.vmap(hazard.stratified_jumps)(phase, mass)
    for a, b, c in zip(eager, jitted, mapped, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_bernoulli_count_is_poisson_binomial(dtype):
    probs = SMALL_PATH
    keys = jax.random.split(jax.random.key(5), len(probs))
    jumped = jnp.stack([
        hazard.bernoulli_jumps(k, jnp.full((NUM_POSITIONS,), p, dtype))
        for k, p in zip(keys, probs, strict=True)
    ])
    assert jumped.dtype == jnp.bool_
    for k, p in enumerate(probs):
        assert _z_ok(float(jumped[k].mean()), p, NUM_POSITIONS)
    count = np.asarray(jumped.sum(axis=0))
    # exact Poisson-binomial pmf by convolution; chi-square goodness of fit at p = 1e-4
    pmf = np.array([1.0])
    for p in probs:
        pmf = np.convolve(pmf, [1 - p, p])
    observed = np.bincount(count, minlength=pmf.size)
    expected = pmf * NUM_POSITIONS
    keep = expected >= 5  # the tail bins are merged into one
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-4
    # the variance Σ p(1 − p) is far above SHS's f(1 − f) <= 1/4
    pb_var = float(np.sum(probs * (1 - probs)))
    assert pb_var > 1.0
    # z-test on the unbiased sample variance, with its exact variance
    # Var(s²) = μ4/n − σ⁴(n − 3)/(n(n − 1)), μ4 the exact fourth central moment of the pmf
    support = np.arange(pmf.size)
    pb_mean = float(pmf @ support)
    np.testing.assert_allclose(float(pmf @ (support - pb_mean) ** 2), pb_var, rtol=1e-12)
    mu4 = float(pmf @ (support - pb_mean) ** 4)
    n = NUM_POSITIONS
    var_se = np.sqrt(mu4 / n - pb_var**2 * (n - 3) / (n * (n - 1)))
    assert abs(count.var(ddof=1) - pb_var) <= Z * var_se


def test_bernoulli_edge_probabilities():
    out = hazard.bernoulli_jumps(jax.random.key(6), jnp.asarray([0.0, -1.0, jnp.nan, 1.0, 2.0]))
    assert out.tolist() == [False, False, False, True, True]


def test_allocate_phases_gives_largest_phases_to_priority_positions(dtype):
    phase = hazard.init_phase(jax.random.key(7), (3, 10), dtype)
    priority = jax.random.bernoulli(jax.random.key(8), 0.3, (3, 10))
    out = hazard.allocate_phases(phase, priority)
    assert out.dtype == dtype and out.shape == phase.shape
    np.testing.assert_array_equal(np.sort(out, axis=-1), np.sort(phase, axis=-1))
    for row_out, row_pri in zip(np.asarray(out), np.asarray(priority), strict=True):
        if row_pri.any() and (~row_pri).any():
            assert row_out[row_pri].min() >= row_out[~row_pri].max()
        # within each group, phases are in decreasing position order
        assert np.all(np.diff(row_out[row_pri]) <= 0) and np.all(np.diff(row_out[~row_pri]) <= 0)


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="jump_mass"):
        hazard.stratified_jumps(jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError, match="priority"):
        hazard.allocate_phases(jnp.zeros(3), jnp.zeros(4, bool))
