"""Targets: normalisation, exact moments, scores, invariances, bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample import targets

Z = 5.0  # z for Monte Carlo moment checks


def _grid_integral(logdensity, lo, hi, num=801):
    """∫∫ exp(logdensity) over a 2-D box by the trapezoid rule, in float64."""
    a = np.linspace(lo[0], hi[0], num)
    b = np.linspace(lo[1], hi[1], num)
    pts = jnp.asarray(np.stack(np.meshgrid(a, b, indexing="ij"), -1).reshape(-1, 2))
    values = np.exp(np.asarray(jax.jit(jax.vmap(logdensity))(pts))).reshape(num, num)
    return np.trapezoid(np.trapezoid(values, b, axis=1), a)


@pytest.mark.parametrize(
    "make, box",
    [
        (lambda: targets.Gaussian(jnp.array([0.5, -1.0]), jnp.array([[2.0, 0.6], [0.6, 1.0]])),
         ((-9, -9), (9, 8))),
        (lambda: targets.GaussianMixture(jnp.array([[-3.0, 0.0], [3.0, 1.0]]),
                                         jnp.array([1.0, 0.5]), jnp.array([0.3, 0.7])),
         ((-10, -7), (8, 7))),
        (lambda: targets.Banana(), ((-60, -60), (60, 400))),
        (lambda: targets.Funnel(dim=2, sigma_v=1.0), ((-7, -12), (7, 12))),
    ],
)
def test_normalised(make, box, x64):
    target = make()
    assert target.normalized
    assert _grid_integral(target.logdensity, *box, num=1201) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize(
    "make",
    [
        lambda: targets.Gaussian(jnp.array([1.0, -1.0, 0.0]),
                                 jnp.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.5]])),
        lambda: targets.GaussianMixture(jnp.array([[-3.0, -3.0], [3.0, 3.0], [-3.0, 3.0]]), 1.0,
                                        jnp.array([0.2, 0.3, 0.5])),
        lambda: targets.Banana(b=0.05, a=4.0, sigma1=2.0, sigma2=1.0),
        lambda: targets.Funnel(dim=3, sigma_v=1.0),
    ],
)
def test_sample_moments(make):
    """Sample mean and covariance against the exact ones, each entry within Z standard errors
    (the standard error of a covariance entry is estimated from the products it averages)."""
    target = make()
    n = 20000
    x = np.asarray(jax.jit(lambda key: target.sample(key, n))(jax.random.key(0)), np.float64)
    mean, cov = np.asarray(target.mean, np.float64), np.asarray(target.cov, np.float64)
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(x.mean(0) - mean) < Z * se_mean)
    centred = x - mean
    products = centred[:, :, None] * centred[:, None, :]
    se_cov = products.std(0) / math.sqrt(n)
    assert np.all(np.abs(products.mean(0) - cov) < Z * se_cov + 1e-6)


def test_gaussian_score_and_logdensity(dtype):
    mean = jnp.array([1.0, 2.0], dtype)
    cov = jnp.array([[2.0, 0.3], [0.3, 0.5]], dtype)
    target = targets.Gaussian(mean, cov)
    x = jnp.array([0.3, -0.4], dtype)

    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute(target, x):
        return (target.score(x), -jnp.linalg.solve(cov, x - mean),
                jax.grad(target.logdensity)(x), target.logdensity(x))

    score, exact_score, grad, logdensity = compute(target, x)
    np.testing.assert_allclose(score, exact_score, rtol=1e-5)
    np.testing.assert_allclose(score, grad, rtol=1e-5)
    assert logdensity.dtype == dtype
    from scipy.stats import multivariate_normal
    expected = multivariate_normal(np.asarray(mean), np.asarray(cov)).logpdf(np.asarray(x))
    np.testing.assert_allclose(logdensity, expected, rtol=1e-5)


def test_mixture_nearest_mode_and_jit():
    gmm = targets.GaussianMixture(jnp.array([[-3.0, -3.0], [3.0, 3.0]]), 0.5)
    assert jax.jit(lambda t, x: t.nearest_mode(x))(
        gmm, jnp.array([[-2.0, -2.5], [2.0, 3.0]])).tolist() == [0, 1]
    logdensity = jax.jit(lambda t, x: t.logdensity(x))  # a target is a pytree
    np.testing.assert_allclose(logdensity(gmm, jnp.zeros(2)), gmm.logdensity(jnp.zeros(2)))


def test_dw4_invariances_and_distances():
    dw4 = targets.DoubleWell4()
    angle = 0.7
    rot = jnp.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    # a square of side 4: four distances d0 (zero energy) and two diagonals 4√2
    square = jnp.array([0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0])

    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute(dw4):
        x = jax.random.normal(jax.random.key(0), (8,)) * 2
        moved = (x.reshape(4, 2) @ rot.T + jnp.array([[3.0, -1.0]])).reshape(8)
        # the restraint acts on the centre of mass only: relative configuration unchanged
        shift = (x.reshape(4, 2) + jnp.array([[1.0, 1.0]])).reshape(8)
        com = x.reshape(4, 2).mean(0)
        expected = -0.5 * (jnp.sum((com + 1.0) ** 2) - jnp.sum(com**2))
        return (dw4.energy(moved), dw4.energy(x), dw4.logdensity(shift) - dw4.logdensity(x),
                expected, dw4.energy(square), dw4.score(jnp.zeros(8)))

    moved, energy, shift_gap, expected, square_energy, score = jax.device_get(compute(dw4))
    np.testing.assert_allclose(moved, energy, rtol=1e-4)
    np.testing.assert_allclose(shift_gap, expected, rtol=1e-4)
    r = 4 * math.sqrt(2) - 4
    np.testing.assert_allclose(square_energy, (-4 * r**2 + 0.9 * r**4) * 2 / 2, rtol=1e-5)
    assert np.all(np.isfinite(score))


def test_logistic_regression_breast_cancer():
    blr = targets.BayesianLogisticRegression.breast_cancer()
    assert blr.dim == 31 and blr.x_train.shape[0] + blr.x_test.shape[0] == 569
    n = blr.x_train.shape[0]

    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute(blr):
        return (blr.logdensity(jnp.zeros(31)), blr.score(jnp.zeros(31)),
                blr.x_train.T @ (blr.y_train - 0.5), blr.predictive_metrics(jnp.zeros((3, 31))))

    logdensity, score, expected_score, (lppd, _) = compute(blr)
    np.testing.assert_allclose(logdensity, n * math.log(0.5), rtol=1e-6)
    np.testing.assert_allclose(score, expected_score, rtol=1e-5, atol=1e-4)
    assert float(lppd) == pytest.approx(math.log(0.5))
    # standardised features: the training columns have mean 0 and sd 1
    x_train = np.asarray(blr.x_train)
    np.testing.assert_allclose(x_train[:, 1:].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x_train[:, 1:].std(0), 1.0, rtol=1e-4)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: targets.Gaussian(jnp.zeros(2), jnp.array([[1.0, 2.0], [2.0, 1.0]])), ValueError,
         "positive definite"),
        (lambda: targets.Gaussian(jnp.zeros(2), jnp.array([[1.0, 0.5], [0.0, 1.0]])), ValueError,
         "symmetric"),
        (lambda: targets.Gaussian(jnp.zeros(2), jnp.eye(3)), ValueError, "cov must have shape"),
        (lambda: targets.Gaussian(jnp.array([0.0, jnp.nan]), jnp.eye(2)), ValueError, "finite"),
        (lambda: targets.GaussianMixture(jnp.zeros((2, 2)), 1.0, jnp.array([-1.0, 2.0])),
         ValueError, "weights"),
        (lambda: targets.GaussianMixture(jnp.zeros((2, 2)), -1.0), ValueError, "covs"),
        (lambda: targets.Gaussian(jnp.zeros(2), jnp.eye(2)).logdensity(jnp.zeros((3, 2))),
         ValueError, "one point"),
        (lambda: targets.Funnel(dim=1), ValueError, "dim"),
        (lambda: targets.BayesianLogisticRegression.breast_cancer(test_fraction=1.5), ValueError,
         "test_fraction"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
