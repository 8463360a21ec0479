"""Diagnostics against exact values, closed forms and the reference implementations."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from jaxsample import diagnostics

Z = 5.0  # two-sided z for Monte Carlo checks: a false alarm has probability ~6e-7 per check


def test_energy_distance_exact_and_chunked(dtype):
    x = jax.random.normal(jax.random.key(0), (37, 3), dtype)
    y = jax.random.normal(jax.random.key(1), (23, 3), dtype) + 0.5
    xn, yn = np.asarray(x, np.float64), np.asarray(y, np.float64)
    expected = 2 * cdist(xn, yn).mean() - cdist(xn, xn).mean() - cdist(yn, yn).mean()
    dense, info = diagnostics.energy_distance(x, y)
    chunked, _ = diagnostics.energy_distance(x, y, chunk_size=8)
    # squared distances use |a|² + |b|² - 2a·b (one matmul): relative round-off ~ 1e3·eps
    rtol = 1e-4 if dtype == jnp.float32 else 1e-9
    np.testing.assert_allclose(dense, expected, rtol=rtol)
    np.testing.assert_allclose(chunked, expected, rtol=rtol)
    assert dense.dtype == dtype and not bool(info.nonfinite)
    assert float(diagnostics.energy_distance(x, x)[0]) == pytest.approx(0.0, abs=1e-5)


def _abs_normal_mean(m, s):
    """E|Z| for Z ~ N(m, s²)."""
    return s * math.sqrt(2 / math.pi) * math.exp(-(m**2) / (2 * s**2)) + m * (
        1 - 2 * stats.norm.cdf(-m / s))


def test_energy_distance_expectation_matches_closed_form():
    # X ~ N(0,1), Y ~ N(mu,1) in 1-D. The V-statistic's expectation keeps the zero diagonal:
    # E[V] = 2E|X-Y| - (n-1)/n E|X-X'| - (m-1)/m E|Y-Y'|.
    mu, n, reps = 0.7, 200, 64
    e_xy = _abs_normal_mean(-mu, math.sqrt(2))
    e_xx = _abs_normal_mean(0.0, math.sqrt(2))
    expected = 2 * e_xy - 2 * (n - 1) / n * e_xx
    keys = jax.random.split(jax.random.key(2), reps)

    def one(key):
        kx, ky = jax.random.split(key)
        return diagnostics.energy_distance(jax.random.normal(kx, (n, 1)),
                                           jax.random.normal(ky, (n, 1)) + mu)[0]

    values = np.asarray(jax.vmap(one)(keys), np.float64)
    se = values.std(ddof=1) / math.sqrt(reps)
    assert abs(values.mean() - expected) < Z * se


def _gaussian_kernel_mean(m1, s1, m2, s2, h):
    """E k(X, Y), X ~ N(m1, s1² I), Y ~ N(m2, s2² I), k = exp(-|x-y|²/(2h²))."""
    d = m1.shape[0]
    var = s1**2 + s2**2
    return (1 + var / h**2) ** (-d / 2) * math.exp(-np.sum((m1 - m2) ** 2) / (2 * (h**2 + var)))


def test_mmd_unbiased_matches_closed_form():
    d, n, reps, h = 2, 150, 64, 1.3
    m1, m2 = np.zeros(d), np.array([0.5, -0.2])
    s1, s2 = 1.0, 1.2
    expected = (_gaussian_kernel_mean(m1, s1, m1, s1, h) + _gaussian_kernel_mean(m2, s2, m2, s2, h)
                - 2 * _gaussian_kernel_mean(m1, s1, m2, s2, h))

    def one(key):
        kx, ky = jax.random.split(key)
        x = s1 * jax.random.normal(kx, (n, d))
        y = jnp.asarray(m2, jnp.float32)[None, :] + s2 * jax.random.normal(ky, (n, d))
        return diagnostics.mmd(x, y, bandwidth=h)[0]

    values = np.asarray(jax.vmap(one)(jax.random.split(jax.random.key(5), reps)), np.float64)
    se = values.std(ddof=1) / math.sqrt(reps)
    assert abs(values.mean() - expected) < Z * se


def test_mmd_chunked_biased_and_median_bandwidth(x64):
    x = jax.random.normal(jax.random.key(0), (40, 3), jnp.float64)
    y = jax.random.normal(jax.random.key(1), (30, 3), jnp.float64) + 0.3
    h = 0.9
    kxx = np.exp(-cdist(x, x, "sqeuclidean") / (2 * h * h))
    kyy = np.exp(-cdist(y, y, "sqeuclidean") / (2 * h * h))
    kxy = np.exp(-cdist(x, y, "sqeuclidean") / (2 * h * h))
    biased = kxx.mean() + kyy.mean() - 2 * kxy.mean()
    np.testing.assert_allclose(diagnostics.mmd(x, y, h, unbiased=False, chunk_size=7)[0], biased,
                               rtol=1e-12)
    pooled = np.concatenate([x, y])
    median_h = np.median(cdist(pooled, pooled)[np.triu_indices(70, 1)])
    value, info = diagnostics.mmd(x, y)
    np.testing.assert_allclose(info.bandwidth, median_h, rtol=1e-12)
    np.testing.assert_allclose(value, diagnostics.mmd(x, y, median_h)[0], rtol=1e-10)


def test_sliced_wasserstein_1d_is_exact_w2(dtype):
    x = jax.random.normal(jax.random.key(0), (64, 1), dtype)
    y = 2 * jax.random.normal(jax.random.key(1), (64, 1), dtype) + 1
    exact = np.sqrt(np.mean((np.sort(x[:, 0]) - np.sort(y[:, 0])) ** 2))
    value, _ = diagnostics.sliced_wasserstein(jax.random.key(2), x, y, num_projections=3)
    np.testing.assert_allclose(value, exact, rtol=1e-5)
    assert value.dtype == dtype


def test_sliced_wasserstein_translation():
    # For y = x + c, SW_2² = E_θ (θ·c)² = |c|²/d; per direction u² = (θ·c)²/|c|² follows
    # Beta(1/2, (d-1)/2), with mean 1/d and variance 2(d-1)/(d²(d+2)).
    d, num_projections = 3, 4096
    c = jnp.array([1.0, -2.0, 0.5])
    x = jax.random.normal(jax.random.key(0), (50, d))
    sw, _ = diagnostics.sliced_wasserstein(jax.random.key(1), x, x + c[None, :],
                                           num_projections=num_projections)
    sw2 = float(sw) ** 2
    norm2 = float(jnp.sum(c * c))
    se = norm2 * math.sqrt(2 * (d - 1) / (d**2 * (d + 2)) / num_projections)
    assert abs(sw2 - norm2 / d) < Z * se


def test_sliced_wasserstein_unequal_sizes():
    x = jnp.zeros((10, 2))
    y = jnp.zeros((25, 2))
    assert float(diagnostics.sliced_wasserstein(jax.random.key(0), x, y)[0]) == 0.0


def test_damv():
    x = jnp.array([[0.0, 0.0], [2.0, 4.0]])
    value, info = diagnostics.damv(x)
    assert float(value) == pytest.approx((2.0 + 8.0) / 2)
    np.testing.assert_allclose(info.variance_ratio, [2.0, 8.0])
    assert float(diagnostics.damv(x, target_var=jnp.array([2.0, 8.0]))[0]) == pytest.approx(1.0)


def _ar1(phi, num_chains, num_draws, seed, offsets=None):
    rng = np.random.default_rng(seed)
    eps = rng.normal(size=(num_chains, num_draws))
    out = np.empty_like(eps)
    out[:, 0] = eps[:, 0] / math.sqrt(1 - phi**2)
    for t in range(1, num_draws):
        out[:, t] = phi * out[:, t - 1] + eps[:, t]
    if offsets is not None:
        out += np.asarray(offsets)[:, None]
    return out


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9, -0.3])
def test_ess_and_rhat_match_arviz(phi, x64):
    arviz = pytest.importorskip("arviz")
    chains = _ar1(phi, 4, 1001, seed=int(10 * phi) + 20, offsets=[0.0, 0.1, 0.0, -0.1])
    np.testing.assert_allclose(diagnostics.ess(jnp.asarray(chains))[0],
                               arviz.ess(chains, method="bulk"), rtol=2e-3)
    value, info = diagnostics.rhat(jnp.asarray(chains))
    np.testing.assert_allclose(value, arviz.rhat(chains, method="rank"), rtol=1e-6)
    np.testing.assert_allclose(value, max(float(info.bulk), float(info.tail)), rtol=1e-12)


def test_ess_ar1_theory():
    # ESS/N -> (1-phi)/(1+phi). The estimate's relative sd for these lengths is a few percent;
    # 15% is well over 4 of them.
    phi, chains = 0.8, _ar1(0.8, 4, 20000, seed=1)
    ess = float(diagnostics.ess(jnp.asarray(chains, jnp.float32))[0])
    assert ess / chains.size == pytest.approx((1 - phi) / (1 + phi), rel=0.15)


def test_rhat_flags_disagreeing_chains_and_vector_shapes():
    mixed = _ar1(0.5, 4, 1000, seed=3)
    stuck = _ar1(0.5, 4, 1000, seed=4, offsets=[0.0, 0.0, 3.0, 3.0])
    assert float(diagnostics.rhat(jnp.asarray(mixed, jnp.float32))[0]) < 1.01
    assert float(diagnostics.rhat(jnp.asarray(stuck, jnp.float32))[0]) > 1.5
    both = jnp.asarray(np.stack([mixed, stuck], axis=-1), jnp.float32)
    value, info = diagnostics.rhat(both)
    assert value.shape == info.bulk.shape == info.tail.shape == (2,)
    assert diagnostics.ess(both)[0].shape == (2,)


def test_nonfinite_inputs_are_flagged():
    # under jit the inputs cannot be checked: a NaN particle surfaces in the Info
    x = jnp.zeros((6, 2)).at[0, 0].set(jnp.nan)
    y = jnp.ones((5, 2))
    assert bool(jax.jit(diagnostics.energy_distance)(x, y)[1].nonfinite)
    assert bool(jax.jit(diagnostics.mmd)(x, y, 1.0)[1].nonfinite)
    assert bool(jax.jit(diagnostics.damv)(x)[1].nonfinite)
    assert bool(jax.jit(diagnostics.sliced_wasserstein)(jax.random.key(0), x, y)[1].nonfinite)
    chains = jnp.asarray(_ar1(0.3, 2, 20, seed=0), jnp.float32).at[0, 3].set(jnp.nan)
    assert bool(diagnostics.ess(chains)[1].nonfinite)
    assert bool(diagnostics.rhat(chains)[1].nonfinite)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: diagnostics.energy_distance(jnp.zeros(3), jnp.zeros((3, 1))), "x must have 2"),
        (lambda: diagnostics.energy_distance(jnp.zeros((3, 2)), jnp.zeros((3, 1))), "same dim"),
        (lambda: diagnostics.mmd(jnp.zeros((3, 2)), jnp.zeros((3, 2)), -1.0), "bandwidth"),
        (lambda: diagnostics.energy_distance(jnp.zeros((3, 2)), jnp.zeros((3, 2)), chunk_size=0),
         "chunk_size"),
        (lambda: diagnostics.sliced_wasserstein(jax.random.key(0), jnp.zeros((3, 2)),
                                                jnp.zeros((3, 2)), num_projections=0),
         "num_projections"),
        (lambda: diagnostics.damv(jnp.zeros((1, 2))), "x needs at least 2 rows"),
        (lambda: diagnostics.damv(jnp.zeros((3, 2)), jnp.array([1.0, -1.0])), "target_var"),
        (lambda: diagnostics.damv(jnp.zeros((3, 2)), jnp.ones(3)), "target_var"),
        (lambda: diagnostics.mmd(jnp.zeros((3, 2)), jnp.zeros((3, 2)), jnp.array(0.0)),
         "bandwidth"),
        (lambda: diagnostics.ess(jnp.zeros((2, 3))), "at least 4 draws"),
        (lambda: diagnostics.rhat(jnp.zeros(10)), "chains must have shape"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_mmd_of_identical_points_is_defined():
    x = jnp.ones((4, 2))
    assert float(diagnostics.mmd(x, x, unbiased=False)[0]) == 0.0


def test_dtype_mismatch_raises(x64):
    with pytest.raises(TypeError, match="same dtype"):
        diagnostics.energy_distance(jnp.zeros((3, 2), jnp.float32), jnp.zeros((3, 2), jnp.float64))

