"""Target distributions for tests, examples and benchmarks.

Every target is an ``equinox.Module`` (a pytree, so it passes through ``jit``) with

- ``logdensity(x)`` and ``score(x)`` for one point ``x`` of shape ``(dim,)`` — ``jax.vmap``
  them for a batch; they compute in ``x``'s dtype;
- where exact: ``sample(key, n) -> (n, dim)``, ``mean`` and ``cov``; ``normalized`` tells
  whether ``logdensity`` includes the normalising constant.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from jaxsample.targets import Gaussian
    >>> target = Gaussian(jnp.zeros(2), jnp.eye(2))
    >>> float(target.logdensity(jnp.zeros(2)))   # -log(2 pi)
    -1.8378...
    >>> target.sample(jax.random.key(0), 5).shape
    (5, 2)
"""

from __future__ import annotations

import csv
import importlib.resources
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.kernels import pairwise

__all__ = [
    "Banana",
    "BayesianLogisticRegression",
    "DoubleWell4",
    "Funnel",
    "Gaussian",
    "GaussianMixture",
]

_LOG_2PI = math.log(2 * math.pi)


def _as_point(x, dim: int, name: str = "x"):
    x = jnp.asarray(x)
    if x.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},) (one point; vmap for a batch), "
                         f"got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} must be a floating array, got dtype {x.dtype}")
    return x


def _check_finite(name: str, value) -> np.ndarray:
    value = np.asarray(value)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{name} must be finite, got non-finite entries")
    return value


def _cholesky(name: str, cov: np.ndarray) -> np.ndarray:
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {cov.shape}")
    if not np.allclose(cov, cov.T, rtol=1e-6, atol=1e-8 * max(1.0, np.abs(cov).max())):
        raise ValueError(f"{name} must be symmetric")
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as err:
        raise ValueError(f"{name} must be positive definite") from err


def _gaussian_logpdf(x, mean, chol):
    """log N(x; mean, L Lᵀ) for one point, via a triangular solve."""
    z = jax.scipy.linalg.solve_triangular(chol, x - mean, lower=True)
    half_logdet = jnp.sum(jnp.log(jnp.diagonal(chol)))
    return -0.5 * jnp.sum(z * z) - half_logdet - 0.5 * x.shape[0] * _LOG_2PI


class Gaussian(eqx.Module):
    """Multivariate normal N(mean, cov) with any positive-definite covariance.

    Args:
        mean: shape ``(dim,)``.
        cov: shape ``(dim, dim)``, symmetric positive definite.
    """

    mean: jax.Array
    cov: jax.Array
    chol: jax.Array
    normalized: bool = eqx.field(static=True, default=True)

    def __init__(self, mean, cov):
        mean = _check_finite("mean", mean)
        cov = _check_finite("cov", cov)
        if mean.ndim != 1:
            raise ValueError(f"mean must have shape (dim,), got {mean.shape}")
        if cov.shape != (mean.shape[0], mean.shape[0]):
            raise ValueError(f"cov must have shape {(mean.shape[0],) * 2}, got {cov.shape}")
        self.mean = jnp.asarray(mean)
        self.cov = jnp.asarray(cov)
        self.chol = jnp.asarray(_cholesky("cov", np.asarray(cov, np.float64)), self.cov.dtype)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def logdensity(self, x):
        x = _as_point(x, self.dim)
        return _gaussian_logpdf(x, self.mean.astype(x.dtype), self.chol.astype(x.dtype))

    def score(self, x):
        x = _as_point(x, self.dim)
        chol = self.chol.astype(x.dtype)
        return -jax.scipy.linalg.cho_solve((chol, True), x - self.mean.astype(x.dtype))

    def sample(self, key, n: int):
        z = jax.random.normal(key, (n, self.dim), self.mean.dtype)
        return self.mean[None, :] + z @ self.chol.T


class GaussianMixture(eqx.Module):
    """Mixture Σ_k w_k N(means_k, covs_k).

    Args:
        means: ``(K, dim)``.
        covs: ``(K, dim, dim)`` covariances, or a scalar / ``(K,)`` standard deviations of
            isotropic components.
        weights: ``(K,)`` non-negative, normalised here; default equal.

    Example:
        >>> import jax.numpy as jnp
        >>> gmm = GaussianMixture(jnp.array([[-3.0, -3.0], [3.0, 3.0]]), 1.0)
        >>> [float(v) for v in gmm.mean]
        [0.0, 0.0]
    """

    means: jax.Array
    covs: jax.Array
    chols: jax.Array
    weights: jax.Array
    normalized: bool = eqx.field(static=True, default=True)

    def __init__(self, means, covs, weights=None):
        means = _check_finite("means", means)
        if means.ndim != 2:
            raise ValueError(f"means must have shape (K, dim), got {means.shape}")
        k, d = means.shape
        covs = _check_finite("covs", covs)
        if covs.ndim <= 1:
            stds = np.broadcast_to(covs, (k,)) if covs.ndim == 0 or covs.shape == (k,) else None
            if stds is None:
                raise ValueError(f"covs as standard deviations must be a scalar or ({k},), "
                                 f"got {covs.shape}")
            if np.any(stds <= 0):
                raise ValueError("covs: standard deviations must be > 0")
            covs = (stds**2)[:, None, None] * np.eye(d)[None]
        if covs.shape != (k, d, d):
            raise ValueError(f"covs must have shape ({k}, {d}, {d}), got {covs.shape}")
        weights = np.full(k, 1.0 / k) if weights is None else _check_finite("weights", weights)
        if weights.shape != (k,) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError(f"weights must be ({k},) non-negative with a positive sum")
        dtype = jnp.asarray(means).dtype
        self.means = jnp.asarray(means, dtype)
        self.covs = jnp.asarray(covs, dtype)
        self.chols = jnp.asarray(
            np.stack([_cholesky(f"covs[{i}]", np.asarray(c, np.float64))
                      for i, c in enumerate(covs)]), dtype)
        self.weights = jnp.asarray(weights / weights.sum(), dtype)

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def num_components(self) -> int:
        return self.means.shape[0]

    @property
    def mean(self):
        return self.weights @ self.means

    @property
    def cov(self):
        centred = self.means - self.mean[None, :]
        between = jnp.einsum("k,ki,kj->ij", self.weights, centred, centred)
        return jnp.einsum("k,kij->ij", self.weights, self.covs) + between

    def component_logdensities(self, x):
        """``log w_k + log N(x; means_k, covs_k)`` for each component, shape ``(K,)``."""
        x = _as_point(x, self.dim)
        logpdf = jax.vmap(_gaussian_logpdf, in_axes=(None, 0, 0))(
            x, self.means.astype(x.dtype), self.chols.astype(x.dtype))
        return jnp.log(self.weights.astype(x.dtype)) + logpdf

    def logdensity(self, x):
        return jax.nn.logsumexp(self.component_logdensities(x))

    def score(self, x):
        return jax.grad(self.logdensity)(x)

    def sample(self, key, n: int):
        key_component, key_noise = jax.random.split(key)
        component = jax.random.choice(key_component, self.num_components, (n,), p=self.weights)
        z = jax.random.normal(key_noise, (n, self.dim), self.means.dtype)
        return self.means[component] + jnp.einsum("nij,nj->ni", self.chols[component], z)

    def nearest_mode(self, x):
        """Index of the nearest component mean for each row of ``x`` (n, dim) — mode coverage."""
        return jnp.argmin(pairwise.sq_distances(x, self.means.astype(x.dtype)), axis=1)


class Banana(eqx.Module):
    """Twisted Gaussian in 2-D: x₁ ~ N(0, σ₁²), x₂ | x₁ ~ N(b(x₁² − a), σ₂²).

    With the default ``a = σ₁²`` the mean is 0; ``cov = diag(σ₁², 2b²σ₁⁴ + σ₂²)`` exactly
    (Cov(x₁, x₂) = b E[x₁³] = 0).
    """

    b: float = eqx.field(static=True, default=0.1)
    a: float = eqx.field(static=True, default=100.0)
    sigma1: float = eqx.field(static=True, default=10.0)
    sigma2: float = eqx.field(static=True, default=1.0)
    normalized: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if self.sigma1 <= 0 or self.sigma2 <= 0:
            raise ValueError(f"sigma1 and sigma2 must be > 0, got {self.sigma1}, {self.sigma2}")

    dim = 2

    def logdensity(self, x):
        x = _as_point(x, 2)
        z1 = x[0] / self.sigma1
        z2 = (x[1] - self.b * (x[0] ** 2 - self.a)) / self.sigma2
        return -0.5 * (z1**2 + z2**2) - math.log(self.sigma1 * self.sigma2) - _LOG_2PI

    def score(self, x):
        return jax.grad(self.logdensity)(x)

    def sample(self, key, n: int):
        z = jax.random.normal(key, (n, 2))
        x1 = self.sigma1 * z[:, 0]
        x2 = self.b * (x1**2 - self.a) + self.sigma2 * z[:, 1]
        return jnp.stack([x1, x2], axis=1)

    @property
    def mean(self):
        return jnp.array([0.0, self.b * (self.sigma1**2 - self.a)])

    @property
    def cov(self):
        var2 = 2 * self.b**2 * self.sigma1**4 + self.sigma2**2
        return jnp.diag(jnp.array([self.sigma1**2, var2]))


class Funnel(eqx.Module):
    """Neal's funnel: v ~ N(0, σ_v²), x_k | v ~ N(0, eᵛ) for k = 1..dim−1; the point is (v, x).

    Exact moments: mean 0, ``cov = diag(σ_v², e^{σ_v²/2}, …)`` (Var x_k = E eᵛ = e^{σ_v²/2}).
    """

    dim: int = eqx.field(static=True, default=10)
    sigma_v: float = eqx.field(static=True, default=3.0)
    normalized: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if self.dim < 2:
            raise ValueError(f"dim must be >= 2, got {self.dim}")
        if self.sigma_v <= 0:
            raise ValueError(f"sigma_v must be > 0, got {self.sigma_v}")

    def logdensity(self, x):
        x = _as_point(x, self.dim)
        v, rest = x[0], x[1:]
        log_v = -0.5 * (v / self.sigma_v) ** 2 - math.log(self.sigma_v) - 0.5 * _LOG_2PI
        k = self.dim - 1
        log_rest = -0.5 * jnp.sum(rest**2) * jnp.exp(-v) - 0.5 * k * v - 0.5 * k * _LOG_2PI
        return log_v + log_rest

    def score(self, x):
        return jax.grad(self.logdensity)(x)

    def sample(self, key, n: int):
        key_v, key_x = jax.random.split(key)
        v = self.sigma_v * jax.random.normal(key_v, (n, 1))
        rest = jnp.exp(0.5 * v) * jax.random.normal(key_x, (n, self.dim - 1))
        return jnp.concatenate([v, rest], axis=1)

    @property
    def mean(self):
        return jnp.zeros(self.dim)

    @property
    def cov(self):
        var_rest = math.exp(self.sigma_v**2 / 2)
        return jnp.diag(jnp.array([self.sigma_v**2] + [var_rest] * (self.dim - 1)))


class DoubleWell4(eqx.Module):
    """DW-4: four particles in 2-D with a pairwise double-well potential (Köhler et al., 2020).

    ``E(x) = (1/2τ) Σ_{i<j} [a(d_ij − d₀) + b(d_ij − d₀)² + c(d_ij − d₀)⁴]`` with
    ``a = 0, b = −4, c = 0.9, d₀ = 4, τ = 1``; ``x`` has shape ``(8,)`` (particle-major).

    E is invariant to translations, so exp(−E) is improper on R⁸. ``logdensity`` adds
    ``−½ com_precision ‖centre of mass‖²``; the centre of mass and the relative coordinates then
    factorise, so interatomic-distance statistics are exactly those of the usual CoM-free DW-4.
    Unnormalised (``normalized = False``).
    """

    a: float = eqx.field(static=True, default=0.0)
    b: float = eqx.field(static=True, default=-4.0)
    c: float = eqx.field(static=True, default=0.9)
    d0: float = eqx.field(static=True, default=4.0)
    tau: float = eqx.field(static=True, default=1.0)
    com_precision: float = eqx.field(static=True, default=1.0)
    normalized: bool = eqx.field(static=True, default=False)

    dim = 8
    num_particles = 4

    def interatomic_distances(self, x):
        """The 6 pairwise distances ``d_ij, i < j`` of one configuration ``(8,)``."""
        p = _as_point(x, 8).reshape(4, 2)
        i, j = np.triu_indices(4, k=1)
        # the differences themselves, not the expanded form of kernels.pairwise: the gradient
        # of a distance must stay exact when two particles nearly coincide
        diff = p[i] - p[j]
        sq = jnp.sum(diff * diff, axis=-1)
        safe = jnp.where(sq > 0, sq, 1.0)  # keeps grad finite when two particles coincide
        return jnp.where(sq > 0, jnp.sqrt(safe), 0.0)

    def energy(self, x):
        r = self.interatomic_distances(x) - self.d0
        return jnp.sum(self.a * r + self.b * r**2 + self.c * r**4) / (2 * self.tau)

    def logdensity(self, x):
        com = jnp.mean(_as_point(x, 8).reshape(4, 2), axis=0)
        return -self.energy(x) - 0.5 * self.com_precision * jnp.sum(com * com)

    def score(self, x):
        return jax.grad(self.logdensity)(x)


class BayesianLogisticRegression(eqx.Module):
    """Posterior of logistic regression weights under a N(0, prior_var·I) prior.

    ``log p(w | X, y) = Σ_i [y_i log σ(x_iᵀw) + (1 − y_i) log σ(−x_iᵀw)] − ‖w‖²/(2 prior_var) + C``
    (unnormalised). ``x_test``/``y_test`` give held-out metrics of a set of posterior samples.

    Use :meth:`breast_cancer` for the bundled real data set (569 × 30, standardised, intercept).
    """

    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array
    y_test: jax.Array
    prior_var: float = eqx.field(static=True, default=25.0)
    normalized: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.prior_var <= 0:
            raise ValueError(f"prior_var must be > 0, got {self.prior_var}")
        if self.x_train.ndim != 2 or self.y_train.shape != self.x_train.shape[:1]:
            raise ValueError(f"x_train (n, p) and y_train (n,) mismatch: {self.x_train.shape}, "
                             f"{self.y_train.shape}")

    @classmethod
    def breast_cancer(cls, *, test_fraction: float = 0.2, seed: int = 0, prior_var: float = 25.0):
        """Breast Cancer Wisconsin (diagnostic): 30 features + intercept, so ``dim = 31``.

        Features are standardised with training-set statistics; the split is a fixed permutation
        drawn with ``numpy.random.default_rng(seed)``.
        """
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        source = importlib.resources.files("jaxsample") / "data" / "breast_cancer.csv"
        with source.open() as f:
            rows = list(csv.reader(f))[1:]
        data = np.asarray(rows, dtype=np.float64)
        features, labels = data[:, :-1], data[:, -1]
        order = np.random.default_rng(seed).permutation(len(labels))
        n_test = int(round(test_fraction * len(labels)))
        test, train = order[:n_test], order[n_test:]
        mu, sd = features[train].mean(0), features[train].std(0)

        def design(idx):
            z = (features[idx] - mu) / sd
            return np.concatenate([np.ones((len(idx), 1)), z], axis=1)

        return cls(jnp.asarray(design(train), jnp.float32), jnp.asarray(labels[train], jnp.float32),
                   jnp.asarray(design(test), jnp.float32), jnp.asarray(labels[test], jnp.float32),
                   prior_var=prior_var)

    @property
    def dim(self) -> int:
        return self.x_train.shape[1]

    def logdensity(self, w):
        w = _as_point(w, self.dim, "w")
        logits = self.x_train.astype(w.dtype) @ w
        y = self.y_train.astype(w.dtype)
        loglik = jnp.sum(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
        return loglik - 0.5 * jnp.sum(w * w) / self.prior_var

    def score(self, w):
        return jax.grad(self.logdensity)(w)

    def predictive_metrics(self, samples):
        """Test log-likelihood (per point, of the posterior predictive) and accuracy.

        Args:
            samples: posterior samples of the weights, shape ``(S, dim)``.

        Returns:
            ``(mean test log predictive density, test accuracy)`` of ``p(y|x) = mean_s σ(xᵀw_s)``.
        """
        samples = jnp.asarray(samples)
        logits = samples @ self.x_test.astype(samples.dtype).T  # (S, n_test)
        y = self.y_test.astype(samples.dtype)
        log_p1 = jax.nn.logsumexp(jax.nn.log_sigmoid(logits), axis=0) - math.log(samples.shape[0])
        log_p0 = jax.nn.logsumexp(jax.nn.log_sigmoid(-logits), axis=0) - math.log(samples.shape[0])
        lppd = jnp.mean(y * log_p1 + (1 - y) * log_p0)
        accuracy = jnp.mean(((log_p1 > log_p0).astype(y.dtype) == y).astype(y.dtype))
        return lppd, accuracy
