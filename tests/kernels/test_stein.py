"""Exact identities and invariances of the Stein kernels (``jaxsample.kernels.stein``).

The statistical checks draw from a Gaussian target, where every Stein term has finite variance,
and bound each statistic at ``Z = 5`` standard errors (two-sided p ≈ 5.7e-7 per statistic): a
failure is a wrong identity, not bad luck.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxsample.kernels import stein

Z = 5.0

# A correlated Gaussian off the origin with unequal scales: N(MEAN, COV), COV = L Lᵀ.
MEAN = np.array([1.0, -2.0, 0.5, 3.0])
_CHOL = np.array([[1.0, 0.0, 0.0, 0.0],
                  [0.6, 0.5, 0.0, 0.0],
                  [-0.3, 0.2, 2.0, 0.0],
                  [0.1, -0.4, 0.3, 0.3]])
PRECISION = np.linalg.inv(_CHOL @ _CHOL.T)


def _gaussian_cloud(key, n, dtype):
    """``n`` exact draws of N(MEAN, COV) and their scores ``−P(x − MEAN)``."""
    mean = jnp.asarray(MEAN, dtype)[None]
    x = mean + jax.random.normal(key, (n, 4), dtype) @ jnp.asarray(_CHOL.T, dtype)
    return x, -(x - mean) @ jnp.asarray(PRECISION, dtype)


def test_linear_and_scaling_ratios_are_one_in_expectation(x64):
    """Both ratios are 1 under ``π`` (Stein's identity), up to a bias of order ``1/N`` from the
    centring and the fitted control variates (``−1/N`` exactly for the linear ratio of
    independent draws): at ``N = 200 000`` that is 5e-6, against a standard error near 3e-3.

    The standard errors are the batch-means estimate: the sd of the statistic over ``B = 25``
    disjoint batches of the sample divided by ``√B`` (independent of the kernel's own ``z``).
    Each of the 8 statistics must lie within ``Z`` of them (the error over this estimate is
    about Student-t with 24 df: ``P(|t| > 5) ≈ 4e-5`` per statistic)."""
    n, batches = 200_000, 25
    x, s = _gaussian_cloud(jax.random.key(0), n, jnp.float64)

    @jax.jit
    def both(x, s):
        return stein.linear_ratios(x, s), stein.scaling_ratios(x, s)[0]

    linear, scaling = both(x, s)
    per_batch = jax.vmap(both)(x.reshape(batches, -1, 4), s.reshape(batches, -1, 4))
    for full, parts in ((linear, per_batch[0]), (scaling, per_batch[1])):
        se = np.std(np.asarray(parts), axis=0, ddof=1) / np.sqrt(batches)
        assert np.all(np.abs(np.asarray(full) - 1) < Z * se), (np.asarray(full), se)
    # and the linear ratio is linear in the score: against a target twice as wide (the score
    # halved) the same cloud scores half of it
    assert np.allclose(np.asarray(both(x, 0.5 * s)[0]), 0.5 * np.asarray(linear), rtol=1e-12)


def _transform(x, s, shift, scale):
    """The cloud and scores under ``y = scale ∘ x + shift``, the target moved with it: the
    density of ``y`` is ``π((y − shift)/scale)/Π scale``, so by the chain rule its score at
    ``y`` is ``s(x)/scale``."""
    return x * scale[None] + shift[None], s / scale[None]


def test_scaling_ratios_invariant_to_translating_and_rescaling_cloud_and_target(x64):
    """Exact invariances: ``x_k s_k`` is unchanged by ``y = a ∘ x + b`` with the target moved
    along, the centring removes ``b``, and the fit's regressors only rescale (``s_j`` by
    ``1/a_j``, ``x_j A_j`` by ``a_j``; the ridge is relative to each regressor's own sum of
    squares, so it rescales with them), which rescales ``β`` to the same residual. Only
    float64 round-off is left: a relative 1e-10 (measured 4e-15 on the ratios)."""
    x, s = _gaussian_cloud(jax.random.key(1), 300, jnp.float64)
    shift = jnp.asarray([100.0, -50.0, 3.0, 0.0])
    scale = jnp.asarray([4.0, 0.25, 1.0, 2.5])
    ratios = jax.jit(stein.scaling_ratios)
    linear = jax.jit(stein.linear_ratios)
    ratio, z = ratios(x, s)
    for name, (y, t) in {"translated": _transform(x, s, shift, jnp.ones(4)),
                         "rescaled": _transform(x, s, jnp.zeros(4), scale),
                         "both": _transform(x, s, shift, scale)}.items():
        ratio_y, z_y = ratios(y, t)
        np.testing.assert_allclose(ratio_y, ratio, rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(z_y, z, rtol=1e-10, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(linear(y, t), linear(x, s), rtol=1e-10, err_msg=name)


def _all_kernels(x, s):
    """Every kernel of the module on one cloud: ``(linear, ratio, z, bias, flag)``."""
    ratio, z = stein.scaling_ratios(x, s)
    return (stein.linear_ratios(x, s), ratio, z, stein.score_bias(s),
            stein.outside_band(ratio, z, 0.5, 1.5, 0.01))


def test_dtype_is_preserved(dtype):
    x, s = _gaussian_cloud(jax.random.key(2), 64, dtype)

    linear, ratio, z, bias, flag = jax.jit(_all_kernels)(x, s)
    assert linear.dtype == ratio.dtype == z.dtype == bias.dtype == dtype
    assert linear.shape == ratio.shape == z.shape == (4,) and bias.shape == ()
    assert flag.dtype == jnp.bool_ and flag.shape == () and not bool(flag)
    assert np.all(np.isfinite(np.asarray(jnp.stack([linear, ratio, z]))))


def test_jit_equals_eager_and_vmap_equals_a_loop():
    keys = jax.random.split(jax.random.key(3), 3)
    clouds = [_gaussian_cloud(k, 50, jnp.float32) for k in keys]
    xs, ss = (jnp.stack(c) for c in zip(*clouds, strict=True))

    batched = jax.jit(jax.vmap(_all_kernels))(xs, ss)
    for i, (x, s) in enumerate(clouds):
        eager = _all_kernels(x, s)
        for got, want in zip(batched, eager, strict=True):
            # float32 sums reordered by the compiler: a few ulps of the terms' scale
            np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4)
    # the flag reduces over the last axis of any batch shape
    ratio, z = batched[1], batched[2]
    assert stein.outside_band(ratio, z, 0.5, 1.5, 0.01).shape == (3,)


def test_score_bias_is_zero_on_exact_draws_and_the_mean_bias_squared_off_centre(x64):
    """On ``N(μ, diag σ²)`` the scores ``s_k = −(x_k − μ_k)/σ_k²`` are independent Gaussians,
    so ``z_k² = t_k²·N/(N − 1)`` with ``t_k`` Student-t (``N − 1`` df), independent over the
    ``d`` coordinates.

    Exact draws: ``Σ_k z_k²`` is about ``χ²_d`` (at ``N = 2000`` its tail quantiles within a
    few tenths of a percent), so ``score_bias = max(mean z² − 1, 0)/N`` stays below
    ``(1.01·χ²_d(1 − 1e-6)/d − 1)/N``, a bound exceeded with probability below 1e-6.

    A cloud off-centre by ``δ_k σ_k``: ``z_k²`` is about non-central ``χ²_1(λ_k = N δ_k²)``,
    mean ``1 + λ_k``, variance ``2 + 4λ_k``, so ``score_bias`` has mean ``mean_k δ_k²`` (up to
    a relative 2/N from the t-form) and sd ``√(Σ_k (2 + 4λ_k))/(d N)``; it must lie within
    ``Z`` sd of ``mean δ²``."""
    n, d = 2000, 10
    mean = jnp.linspace(-3.0, 3.0, d)[None]
    sd = jnp.linspace(0.2, 5.0, d)[None]
    noise = jax.random.normal(jax.random.key(4), (n, d), jnp.float64)
    bias = jax.jit(stein.score_bias)

    exact = mean + sd * noise
    bound = (1.01 * stats.chi2.ppf(1 - 1e-6, d) / d - 1) / n
    assert 0 <= float(bias(-(exact - mean) / sd**2)) < bound

    delta = np.linspace(-0.3, 0.3, d)  # the offset in posterior sds
    shifted = exact + jnp.asarray(delta)[None] * sd
    lam = n * delta**2
    expected, sd_bias = np.mean(delta**2), np.sqrt(np.sum(2 + 4 * lam)) / (d * n)
    got = float(bias(-(shifted - mean) / sd**2))
    assert abs(got - expected) < Z * sd_bias, (got, expected, sd_bias)


def test_scaling_flag_needs_effect_and_significance():
    """The flag is the conjunction, per coordinate, of a ratio outside the band and ``|z|``
    above the Bonferroni bound ``Φ⁻¹(1 − level/(2d))`` (2.81 for ``level = 0.01, d = 2``)."""
    flag = jax.jit(stein.outside_band)
    band = (0.5, 1.5, 0.01)
    cases = {  # (ratio, z) per coordinate -> flagged
        "effect and evidence": ([0.3, 1.0], [5.0, 0.0], True),
        "effect above the band": ([1.0, 1.8], [0.0, -3.1], True),
        "effect without evidence": ([0.3, 1.0], [2.7, 0.0], False),
        "evidence without effect": ([0.7, 1.0], [50.0, 0.0], False),
        "in different coordinates": ([0.3, 1.0], [0.0, 50.0], False),
    }
    for name, (ratio, z, want) in cases.items():
        got = flag(jnp.asarray(ratio), jnp.asarray(z), *band)
        assert bool(got) is want, name
    # the bound grows with d: z = 3.1 clears it for d = 2, not for d = 100 (3.89)
    ratio, z = jnp.full(100, 1.0).at[0].set(0.3), jnp.zeros(100).at[0].set(3.1)
    assert not bool(flag(ratio, z, *band))


@pytest.mark.parametrize("d", [1, 2])
def test_scaling_ratios_finite_in_one_and_two_dimensions(d):
    """With ``d = 1`` the dilation of the others is empty (``A = 0``) and the regressors are
    collinear; the ridge keeps the fit solvable and the statistic finite."""
    x = jax.random.normal(jax.random.key(5), (40, d))
    ratio, z = jax.jit(stein.scaling_ratios)(x, -x)
    assert np.all(np.isfinite(np.asarray(ratio))) and np.all(np.isfinite(np.asarray(z)))
    assert ratio.shape == z.shape == (d,)
