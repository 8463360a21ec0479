"""Tests of jaxsample.kernels.hazard: SHS invariants (paper notes §4), Bernoulli, the Weyl rules.

Every law is checked on a fixed path of masses or probabilities, where the maths gives it exactly.
Statistical checks use fixed seeds and a z = 5 bound on the Monte Carlo standard error, or a
chi-square test at p = 1e-4.
"""

import jax
import jax.numpy as jnp
import numpy as np
from _stats import chisquare_pvalue
from scipy import stats

from jaxsample.kernels import hazard

Z = 5.0
P_VALUE = 1e-4
NUM_POSITIONS = 100_000
# a fixed hazard path with steps above 1 (multiple crossings); total 3.37, frac 0.37
PATH = np.array([0.05, 0.6, 1.4, 0.02, 0.3, 0.0, 0.9, 0.1])
# a path with every step <= 1, for per-step and consecutive-step frequencies
SMALL_PATH = np.array([0.3, 0.8, 0.45, 0.05, 0.9, 0.6, 0.25])
# the Weyl rules: rows x positions, probabilities varying along the path and the positions
ROWS, WIDTH = 20_000, 8
WEYL_PROBS = SMALL_PATH[:, None] * np.linspace(0.4, 1.0, WIDTH)[None, :]  # (steps, positions)


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


def _poisson_binomial(probs):
    pmf = np.array([1.0])
    for p in probs:
        pmf = np.convolve(pmf, [1 - p, p])
    return pmf


def _chisquare_ok(counts, probs):
    return chisquare_pvalue(counts, probs) > P_VALUE


def _weyl_row_count_pmf(probs):
    """Exact law of #{i : frac(V + i/φ) < p_i}, V ~ U[0, 1): constant between breakpoints."""
    offsets = np.mod(np.arange(probs.size) * (np.sqrt(5) - 1) / 2, 1.0)
    cuts = np.unique(np.concatenate([[0.0, 1.0], np.mod(-offsets, 1.0),
                                     np.mod(probs - offsets, 1.0)]))
    mids = (cuts[:-1] + cuts[1:]) / 2
    counts = (np.mod(mids[:, None] + offsets[None, :], 1.0) < probs[None, :]).sum(axis=1)
    return np.bincount(counts, weights=np.diff(cuts), minlength=probs.size + 1)


def _assert_poisson_binomial(count, probs):
    """Count ~ Poisson-binomial(probs): chi-square on the pmf, z-test on the sample variance."""
    pmf = _poisson_binomial(probs)
    assert _chisquare_ok(np.bincount(count, minlength=pmf.size)[:pmf.size], pmf)
    support = np.arange(pmf.size)
    mean = float(pmf @ support)
    var = float(pmf @ (support - mean) ** 2)
    np.testing.assert_allclose(var, float(np.sum(probs * (1 - probs))), rtol=1e-12)
    # Var(s²) = μ4/n − σ⁴(n − 3)/(n(n − 1)), μ4 the exact fourth central moment of the pmf
    mu4, n = float(pmf @ (support - mean) ** 4), count.size
    var_se = np.sqrt(mu4 / n - var**2 * (n - 3) / (n * (n - 1)))
    assert abs(count.var(ddof=1) - var) <= Z * var_se


# -- systematic (SHS) ----------------------------------------------------------------------------


def test_two_point_count_mean_and_variance():
    dtype = jnp.float32
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


def test_per_step_and_consecutive_jump_probabilities():
    phase = hazard.init_phase(jax.random.key(1), (NUM_POSITIONS,), jnp.float32)
    jumped = np.asarray(_run_stratified(phase, SMALL_PATH, jnp.float32)) >= 1
    deltas = np.asarray(jnp.asarray(SMALL_PATH, jnp.float32), dtype=np.float64)
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


def test_nonfinite_mass_keeps_the_phase_and_shows_in_the_count():
    dtype = jnp.float32
    phase = jnp.asarray([0.25, 0.5, 0.75], dtype)
    mass = jnp.asarray([jnp.inf, jnp.nan, 0.5], dtype)
    crossings, new_phase = hazard.stratified_jumps(phase, mass)
    assert np.isposinf(crossings[0]) and np.isnan(crossings[1]) and crossings[2] == 1
    np.testing.assert_allclose(new_phase, np.asarray([0.25, 0.5, 0.25]), atol=1e-6)
    assert new_phase.dtype == dtype


# -- Bernoulli -----------------------------------------------------------------------------------


def test_bernoulli_count_is_poisson_binomial():
    probs = SMALL_PATH
    keys = jax.random.split(jax.random.key(5), len(probs))
    jumped = jnp.stack([
        hazard.bernoulli_jumps(k, jnp.full((NUM_POSITIONS,), p, jnp.float32))
        for k, p in zip(keys, probs, strict=True)
    ])
    assert jumped.dtype == jnp.bool_
    for k, p in enumerate(probs):
        assert _z_ok(float(jumped[k].mean()), p, NUM_POSITIONS)
    # the variance Σ p(1 − p) is far above SHS's f(1 − f) <= 1/4
    assert float(np.sum(probs * (1 - probs))) > 1.0
    _assert_poisson_binomial(np.asarray(jumped.sum(axis=0)), probs)
    out = hazard.bernoulli_jumps(jax.random.key(6), jnp.asarray([0.0, -1.0, jnp.nan, 1.0, 2.0]))
    assert out.tolist() == [False, False, False, True, True]


# -- Weyl ----------------------------------------------------------------------------------------


def _weyl_run(rule, dtype, window_length=None):
    """Jumps (steps, ROWS, WIDTH) on the fixed probability path WEYL_PROBS, one key per step."""
    probs = jnp.asarray(WEYL_PROBS, dtype)

    def step(phase, inputs):
        index, p = inputs
        key = jax.random.fold_in(jax.random.key(11), index)
        p = jnp.broadcast_to(p, (ROWS, WIDTH))
        if rule == "weyl":
            return phase, hazard.weyl_jumps(key, p)
        jump, crossings, phase = hazard.weyl_window_jumps(
            key, phase, p, index % window_length == 0)
        assert crossings.dtype == dtype
        return phase, jump

    _, jumped = jax.lax.scan(step, jnp.zeros((ROWS, WIDTH), dtype),
                             (jnp.arange(len(WEYL_PROBS)), probs))
    return np.asarray(jumped)


def test_weyl_uniforms_are_uniform_and_coupled_by_the_golden_rotation(x64):
    dtype = jnp.float64
    u = hazard.weyl_uniforms(jax.random.key(10), (ROWS, WIDTH), dtype)
    assert u.dtype == dtype and u.shape == (ROWS, WIDTH)
    values = np.asarray(u, np.float64)
    assert values.min() >= 0.0 and values.max() < 1.0
    for i in (0, WIDTH - 1):  # each entry is U[0, 1): Kolmogorov–Smirnov at p = 1e-4
        assert stats.kstest(values[:, i], "uniform").pvalue > P_VALUE
    # entry i of a row is frac(u_0 + i/φ) exactly
    expected = np.mod(values[:, :1] + np.arange(WIDTH) * (np.sqrt(5) - 1) / 2, 1.0)
    gap = np.abs(values - expected)
    np.testing.assert_array_less(np.minimum(gap, 1 - gap), 1e-12)


def test_weyl_rule_has_the_bernoulli_law_at_each_position():
    """Each position: independent coins across steps with P = p_k, so the count is exactly the
    Bernoulli rule's Poisson-binomial; the row total is stratified (variance far below)."""
    jumped = _weyl_run("weyl", jnp.float32)
    probs = np.asarray(jnp.asarray(WEYL_PROBS, jnp.float32), np.float64)
    for i in range(WIDTH):
        for k in range(len(probs)):
            assert _z_ok(jumped[k, :, i].mean(), probs[k, i], ROWS), (k, i)
        # independence across consecutive steps: P(both) = p_k p_{k+1}
        both = np.mean(jumped[:-1, :, i] & jumped[1:, :, i], axis=1)
        for k, freq in enumerate(both):
            assert _z_ok(freq, probs[k, i] * probs[k + 1, i], ROWS), (k, i)
        _assert_poisson_binomial(jumped[:, :, i].sum(axis=0), probs[:, i])
    # the coupling: per step, the number of jumps in a row has the exact law of
    # V -> #{i : frac(V + i/φ) < p_i}, far less spread than independent coins (Σ_i p(1 − p))
    for k in range(len(probs)):
        pmf = _weyl_row_count_pmf(probs[k])
        assert _chisquare_ok(np.bincount(jumped[k].sum(axis=1), minlength=WIDTH + 1), pmf), k
        support = np.arange(WIDTH + 1)
        exact_var = pmf @ support**2 - (pmf @ support) ** 2
        assert exact_var < np.sum(probs[k] * (1 - probs[k])), k


def test_weyl_window_rule_per_step_marginals_and_window_counts():
    """Per step: P(jump) = p_k at every position (exact). Per window: count in {⌊P_w⌋, ⌈P_w⌉},
    variance f(1 − f) <= 1/4 (+ Monte Carlo error); windows independent of each other."""
    window, dtype = 3, jnp.float32
    jumped = _weyl_run("weyl_window", dtype, window_length=window)
    probs = np.asarray(jnp.asarray(WEYL_PROBS, dtype), np.float64)
    for i in range(WIDTH):
        for k in range(len(probs)):
            assert _z_ok(jumped[k, :, i].mean(), probs[k, i], ROWS), (k, i)
    starts = range(0, len(probs), window)
    counts = [jumped[s:s + window].sum(axis=0).astype(np.float64) for s in starts]
    for s, count in zip(starts, counts, strict=True):
        mass = probs[s:s + window].sum(axis=0)  # (WIDTH,)
        lo = np.floor(mass)
        assert np.all((count == lo) | (count == lo + 1))
        frac = mass - lo
        for i in range(WIDTH):
            bound = frac[i] * (1 - frac[i])
            # a two-point count's sample variance has standard error <= sqrt(f(1 − f)/n)
            assert count[:, i].var() <= min(bound, 0.25) + Z * np.sqrt(bound / ROWS) + 1e-12
            assert abs(count[:, i].mean() - mass[i]) <= Z * np.sqrt(bound / ROWS) + 1e-12
    # windows redraw the phase: counts of consecutive windows are uncorrelated (z on Pearson r)
    for i in range(WIDTH):
        r = np.corrcoef(counts[0][:, i], counts[1][:, i])[0, 1]
        assert abs(r) <= Z / np.sqrt(ROWS), (i, r)


# -- phase allocation ----------------------------------------------------------------------------


def test_allocate_phases_gives_largest_phases_to_priority_positions():
    phase = hazard.init_phase(jax.random.key(7), (3, 10), jnp.float32)
    priority = jnp.asarray(np.random.default_rng(8).random((3, 10)) < 0.3)
    out = jax.jit(hazard.allocate_phases)(phase, priority)
    assert out.dtype == jnp.float32 and out.shape == phase.shape
    np.testing.assert_array_equal(np.sort(out, axis=-1), np.sort(phase, axis=-1))
    for row_out, row_pri in zip(np.asarray(out), np.asarray(priority), strict=True):
        if row_pri.any() and (~row_pri).any():
            assert row_out[row_pri].min() >= row_out[~row_pri].max()
        # within each group, phases are in decreasing position order
        assert np.all(np.diff(row_out[row_pri]) <= 0) and np.all(np.diff(row_out[~row_pri]) <= 0)
