"""Gaussian-mixture priors with exact VP marginals, time posteriors and fiber laws; time predictors.

A mixture x₀ ~ Σ_k π_k N(m_k, C_k) stays a mixture under the VP forward process:
p_t(x) = Σ_k π_k N(x; √ᾱ_t m_k, ᾱ_t C_k + (1 − ᾱ_t) I). Everything a guided sampler needs is then
exact: the score and ε-prediction at every t, the component posterior p_t(k | x) (a classifier
for guidance), the Bayes time posterior p(τ | x) on a grid of times (the cross-entropy optimum of
a time predictor under a uniform prior over the grid) and its gradient, the time-linked score

.. math::  ∇_x \\log p(t \\mid x) = s(x, t) − Σ_σ p(σ \\mid x)\\, s(x, σ),

and, for a linear feature map φ(x) = A x, the exact law of x₀ given A x₀ = y (a mixture again).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsample._checks import (
    check_array,
    check_fn_output,
    check_hyperparameter,
    check_int,
    check_key,
    check_progress,
    is_concrete,
)
from jaxsample.diffusion._vp import VPSchedule
from jaxsample.kernels import guidance as kernels
from jaxsample.kernels.logspace import log_normalize
from jaxsample.kernels.resampling import categorical

__all__ = [
    "TimePredictorTrainInfo",
    "GaussianMixturePrior",
    "TimePredictor",
    "ring_of_gaussians",
    "time_posterior_kl",
    "train_time_predictor",
]


def _check_schedule(schedule):
    if not isinstance(schedule, VPSchedule):
        raise TypeError(f"schedule must be a VPSchedule, got {type(schedule).__name__}")
    return schedule


class GaussianMixturePrior(eqx.Module):
    """x₀ ~ Σ_k π_k N(m_k, C_k) in ℝ^d, with exact quantities at every time of a VP schedule.

    A pytree (equinox module) of arrays; the covariances are stored with their eigen-decompositions
    C_k = V_k diag(λ_k) V_kᵀ, so every marginal density costs O(K·d²) per point and O(K·d) more per
    extra time. Degenerate covariances (λ = 0, e.g. a fiber law) are allowed: the marginals at
    t > 0 are non-degenerate.

    The methods act on **one** point ``x`` of shape ``(d,)`` (``jax.vmap`` them for a batch) and a
    scalar time ``t`` in (0, 1]; they return the dtype of ``x``.

    Args:
        weights: ``(K,)`` positive mixture weights (normalised here).
        means: ``(K, d)``.
        covariances: ``(K, d, d)`` symmetric positive semi-definite, ``(K, d)`` diagonals or
            ``(K,)`` isotropic variances.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import guidance
        >>> prior = guidance.ring_of_gaussians(4, dim=2)
        >>> schedule = guidance.VPSchedule("linear")
        >>> x = jnp.array([1.0, 0.0])
        >>> eps = prior.eps(x, schedule, jnp.float32(0.5))
        >>> score = jax.grad(prior.log_prob)(x, schedule, jnp.float32(0.5))
        >>> bool(jnp.allclose(eps, -schedule.sigma(jnp.float32(0.5)) * score, atol=1e-5))
        True
    """

    log_weights: jax.Array
    means: jax.Array
    covariances: jax.Array
    eigenvalues: jax.Array
    eigenvectors: jax.Array
    projected_means: jax.Array

    def __init__(self, weights, means, covariances):
        means = check_array("means", means, ndim=2, finite=True, min_rows=1)
        num, dim = means.shape
        weights = check_array("weights", weights, shape=(num,), finite=True, dtype=means.dtype)
        covariances = check_array("covariances", covariances, finite=True, dtype=means.dtype)
        if covariances.shape == (num,):
            covariances = covariances[:, None, None] * jnp.eye(dim, dtype=means.dtype)[None]
        elif covariances.shape == (num, dim):
            covariances = jax.vmap(jnp.diag)(covariances)
        elif covariances.shape != (num, dim, dim):
            raise ValueError(f"covariances must have shape (K, d, d), (K, d) or (K,) with "
                             f"(K, d) = {(num, dim)}, got {covariances.shape}")
        if is_concrete(weights) and not bool(np.all(np.asarray(weights) > 0)):
            raise ValueError("weights must be positive")
        (self.log_weights, self.covariances, self.eigenvalues, self.eigenvectors,
         self.projected_means, psd) = _decompose(weights, means, covariances)
        self.means = means
        if is_concrete(psd) and not bool(psd):
            raise ValueError("covariances must be positive semi-definite")

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def num_components(self) -> int:
        return self.means.shape[0]

    def _project(self, x):
        return jnp.einsum("kij,i->kj", self.eigenvectors.astype(x.dtype), x)

    def _parts(self, dtype):
        return (self.log_weights.astype(dtype), self.projected_means.astype(dtype),
                self.eigenvalues.astype(dtype))

    def component_log_densities(self, x, schedule: VPSchedule, t) -> jax.Array:
        """``(K,)`` log π_k + log N(x; √ᾱ_t m_k, ᾱ_t C_k + (1 − ᾱ_t) I)."""
        alpha = schedule.alpha_bar(jnp.asarray(t, x.dtype))
        return kernels.gmm_component_log_densities(self._project(x), alpha, *self._parts(x.dtype))

    def log_prob(self, x, schedule: VPSchedule, t) -> jax.Array:
        """log p_t(x)."""
        return jax.nn.logsumexp(self.component_log_densities(x, schedule, t))

    def component_log_posterior(self, x, schedule: VPSchedule, t) -> jax.Array:
        """``(K,)`` log p_t(k | x): the exact noisy-state classifier of the components."""
        return log_normalize(self.component_log_densities(x, schedule, t))

    def score(self, x, schedule: VPSchedule, t) -> jax.Array:
        """s(x, t) = ∇ log p_t(x) = −Σ_k p_t(k | x) (ᾱC_k + (1 − ᾱ)I)⁻¹ (x − √ᾱ m_k)."""
        alpha = schedule.alpha_bar(jnp.asarray(t, x.dtype))
        log_w, mu, lam = self._parts(x.dtype)
        projected = self._project(x)
        responsibilities = jnp.exp(log_normalize(
            kernels.gmm_component_log_densities(projected, alpha, log_w, mu, lam)))
        whitened = (projected - jnp.sqrt(alpha) * mu) / (alpha * lam + (1 - alpha))
        return -jnp.einsum("k,kij,kj->i", responsibilities, self.eigenvectors.astype(x.dtype),
                           whitened)

    def eps(self, x, schedule: VPSchedule, t) -> jax.Array:
        """The exact ε-prediction ε(x, t) = −√(1 − ᾱ_t)·s(x, t)."""
        return -schedule.sigma(jnp.asarray(t, x.dtype)) * self.score(x, schedule, t)

    def time_logits(self, x, schedule: VPSchedule, times) -> jax.Array:
        """``(T,)`` log p_τ(x) for τ in ``times``: the Bayes time classifier's logits.

        Under a uniform prior over the grid, p(τ | x) = softmax(logits)_τ exactly.
        """
        times = jnp.asarray(times, x.dtype)
        projected = self._project(x)
        parts = self._parts(x.dtype)

        def at(tau):
            return jax.nn.logsumexp(kernels.gmm_component_log_densities(
                projected, schedule.alpha_bar(tau), *parts))

        return jax.vmap(at)(times)

    def time_log_posterior(self, x, schedule: VPSchedule, times) -> jax.Array:
        """``(T,)`` log p(τ | x) on the grid ``times`` (uniform prior over the grid)."""
        return log_normalize(self.time_logits(x, schedule, times))

    def time_linked_score(self, x, schedule: VPSchedule, times, index) -> jax.Array:
        """∇ₓ log p(τ_index | x) = s(x, τ_index) − Σ_σ p(σ | x) s(x, σ), in closed form."""
        times = jnp.asarray(times, x.dtype)
        scores = jax.vmap(lambda tau: self.score(x, schedule, tau))(times)
        posterior = jnp.exp(self.time_log_posterior(x, schedule, times))
        return scores[index] - posterior @ scores

    def sample(self, key, num_samples: int) -> jax.Array:
        """``(num_samples, d)`` exact draws of x₀ (dtype of the means)."""
        key = check_key("key", key)
        num_samples = check_int("num_samples", num_samples, 1)
        return _sample_mixture(key, self, num_samples)

    def sample_marginal(self, key, schedule: VPSchedule, t, num_samples: int) -> jax.Array:
        """``(num_samples, d)`` exact draws of x_t = √ᾱ_t x₀ + √(1 − ᾱ_t) ε."""
        key = check_key("key", key)
        _check_schedule(schedule)
        num_samples = check_int("num_samples", num_samples, 1)
        return _sample_marginal(key, self, schedule, jnp.asarray(t, self.means.dtype), num_samples)

    def condition_linear(self, matrix, value) -> GaussianMixturePrior:
        """The exact law of x₀ given A x₀ = y: a mixture with degenerate covariances.

        With S_k = A C_k Aᵀ and gain G_k = C_k Aᵀ S_k⁻¹: weights ∝ π_k N(y; A m_k, S_k), means
        m_k + G_k (y − A m_k), covariances C_k − G_k A C_k (rank d − r). This is the exact fiber
        law of φ(x) = A x at a query with A x_q = y.

        Args:
            matrix: ``(r, d)`` A of full row rank r ≤ d.
            value: ``(r,)`` y.
        """
        matrix = check_array("matrix", matrix, ndim=2, finite=True, dtype=self.means.dtype)
        if matrix.shape[1] != self.dim:
            raise ValueError(f"matrix must have shape (r, {self.dim}), got {matrix.shape}")
        value = check_array("value", value, shape=(matrix.shape[0],), finite=True,
                            dtype=self.means.dtype)
        return _condition_linear(self, matrix, value)

    def eps_model(self, schedule: VPSchedule) -> Callable:
        """The exact ε-predictor as a module ``eps(x, t)``, for the samplers."""
        return _PriorEps(self, _check_schedule(schedule))

    def time_predictor(self, schedule: VPSchedule, times) -> Callable:
        """The exact time classifier ``logits(x) -> (T,)`` over ``times``, for :func:`tag`."""
        times = check_array("times", times, ndim=1, finite=True, min_rows=1)
        return _PriorTimeLogits(self, _check_schedule(schedule), times)

    def classifier(self, schedule: VPSchedule, component: int) -> Callable:
        """``log p_t(k | x)`` of one component as a module ``(x, t) -> scalar``, for guidance."""
        component = check_int("component", component, 0, self.num_components - 1)
        return _PriorClassifier(self, _check_schedule(schedule), component)


@jax.jit
def _decompose(weights, means, covariances):
    """Normalised log-weights, symmetrised covariances and their eigen-decompositions (one
    compilation per shape instead of a dozen eager dispatches)."""
    dim = means.shape[1]
    covariances = 0.5 * (covariances + jnp.swapaxes(covariances, 1, 2))
    eigenvalues, eigenvectors = jnp.linalg.eigh(covariances)
    scale = jnp.max(jnp.abs(eigenvalues), axis=-1, keepdims=True)
    tolerance = 100 * dim * jnp.finfo(means.dtype).eps * scale
    psd = jnp.all(eigenvalues >= -tolerance)
    # round-off below the tolerance is a zero eigenvalue (exact for a fiber law's directions)
    eigenvalues = jnp.where(eigenvalues > tolerance, eigenvalues, 0)
    projected_means = jnp.einsum("kij,ki->kj", eigenvectors, means)
    return (log_normalize(jnp.log(weights)), covariances, eigenvalues, eigenvectors,
            projected_means, psd)


class _PriorEps(eqx.Module):
    prior: GaussianMixturePrior
    schedule: VPSchedule

    def __call__(self, x, t):
        return self.prior.eps(x, self.schedule, t)


class _PriorTimeLogits(eqx.Module):
    prior: GaussianMixturePrior
    schedule: VPSchedule
    times: jax.Array

    def __call__(self, x):
        return self.prior.time_logits(x, self.schedule, self.times.astype(x.dtype))


class _PriorClassifier(eqx.Module):
    prior: GaussianMixturePrior
    schedule: VPSchedule
    component: int = eqx.field(static=True)

    def __call__(self, x, t):
        return self.prior.component_log_posterior(x, self.schedule, t)[self.component]


@eqx.filter_jit
def _sample_mixture(key, prior, num_samples):
    which, noise = jax.random.split(key)
    labels = categorical(which, prior.log_weights, num_samples)
    xi = jax.random.normal(noise, (num_samples, prior.dim), prior.means.dtype)
    root = prior.eigenvectors[labels] * jnp.sqrt(prior.eigenvalues[labels])[:, None, :]
    return prior.means[labels] + jnp.einsum("nij,nj->ni", root, xi)


@eqx.filter_jit
def _sample_marginal(key, prior, schedule, t, num_samples):
    data_key, noise_key = jax.random.split(key)
    x0 = _sample_mixture(data_key, prior, num_samples)
    alpha = schedule.alpha_bar(t)
    noise = jax.random.normal(noise_key, x0.shape, x0.dtype)
    return jnp.sqrt(alpha) * x0 + jnp.sqrt(1 - alpha) * noise


@eqx.filter_jit
def _condition_linear(prior, matrix, value):
    cov = prior.covariances
    cross = jnp.einsum("kij,rj->kir", cov, matrix)                    # C Aᵀ, (K, d, r)
    inner = jnp.einsum("ri,kis->krs", matrix, cross)                  # A C Aᵀ, (K, r, r)
    residual = value[None, :] - prior.means @ matrix.T                # y − A m, (K, r)
    chol = jnp.linalg.cholesky(inner)
    solved = jax.vmap(lambda c, r: jax.scipy.linalg.cho_solve((c, True), r))(chol, residual)
    gain_t = jax.vmap(lambda c, b: jax.scipy.linalg.cho_solve((c, True), b))(
        chol, jnp.swapaxes(cross, 1, 2))                              # S⁻¹ A C, (K, r, d)
    means = prior.means + jnp.einsum("kir,kr->ki", cross, solved)
    covariances = cov - jnp.einsum("kir,krj->kij", cross, gain_t)
    log_det = 2 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)), axis=1)
    rank = matrix.shape[0]
    log_lik = -0.5 * (jnp.sum(residual * solved, axis=1) + log_det
                      + rank * math.log(2 * math.pi))
    weights = jnp.exp(log_normalize(prior.log_weights + log_lik))
    return GaussianMixturePrior(weights, means, covariances)


def ring_of_gaussians(num_components: int = 8, dim: int = 2, *, radius=1.0, std=0.1,
                      dtype=None) -> GaussianMixturePrior:
    """Equal-weight N(m_k, std²·I), means on a circle of ``radius`` in the first two coordinates.

    m_k = radius·(cos 2πk/K, sin 2πk/K, 0, …, 0); the other d − 2 coordinates are N(0, std²).

    Example:
        >>> prior = ring_of_gaussians(8, dim=16)
        >>> prior.means.shape, round(float(prior.means[2, 1]), 4)
        ((8, 16), 1.0)
    """
    num_components = check_int("num_components", num_components, 1)
    dim = check_int("dim", dim, 2)
    radius = float(check_hyperparameter("radius", radius))
    std = float(check_hyperparameter("std", std))
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    angles = 2 * np.pi * np.arange(num_components) / num_components
    means = np.zeros((num_components, dim))
    means[:, 0], means[:, 1] = radius * np.cos(angles), radius * np.sin(angles)
    return GaussianMixturePrior(jnp.full(num_components, 1 / num_components, dtype),
                                jnp.asarray(means, dtype),
                                jnp.full(num_components, std**2, dtype))


class TimePredictor(eqx.Module):
    """A small MLP time classifier p_φ(τ | x) over a grid of T times: ``logits(x) -> (T,)``.

    Input features are x and ‖x‖²/d (the norm carries most of the time information under a VP
    process); ``width``-wide, ``depth`` hidden layers, SiLU. Train it with
    :func:`train_time_predictor`.

    Args:
        key: PRNG key for the initial weights.
        dim: d, the input dimension.
        num_classes: T, the number of grid times.
        width, depth: hidden layer width and count.
    """

    mlp: eqx.nn.MLP

    def __init__(self, key, dim: int, num_classes: int, *, width: int = 64, depth: int = 2,
                 dtype=None):
        key = check_key("key", key)
        dim = check_int("dim", dim, 1)
        num_classes = check_int("num_classes", num_classes, 2)
        dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
        self.mlp = eqx.nn.MLP(dim + 1, num_classes, check_int("width", width, 1),
                              check_int("depth", depth, 1), activation=jax.nn.silu, key=key,
                              dtype=dtype)

    def __call__(self, x):
        features = jnp.concatenate([x, jnp.mean(x * x, keepdims=True)])
        return self.mlp(features.astype(self.mlp.layers[0].weight.dtype)).astype(x.dtype)


class TimePredictorTrainInfo(NamedTuple):
    """``losses (num_steps,)`` of :func:`train_time_predictor`; ``nonfinite``: a loss went
    NaN/inf."""

    losses: jax.Array
    nonfinite: jax.Array


def train_time_predictor(key, predictor, data, schedule: VPSchedule, times, *,
                         num_steps: int = 2000, batch_size: int = 256, learning_rate=1e-3,
                         optimizer: optax.GradientTransformation | None = None, progress=None
                         ) -> tuple[eqx.Module, TimePredictorTrainInfo]:
    """Trains a time classifier by cross-entropy on forward-process pairs (x_τ, τ), with optax.

    Each step draws ``batch_size`` rows x₀ of ``data`` (with replacement), grid indices j uniform
    over ``times`` and ε ~ N(0, I), forms x_τ = √ᾱ_τ x₀ + √(1 − ᾱ_τ) ε and takes one step of
    ``optimizer`` (Adam by default) on
    the mean of −log softmax(predictor(x_τ))_j. The optimum is the Bayes time posterior
    (:meth:`GaussianMixturePrior.time_log_posterior` when the data are the prior's draws). One
    compilation: the steps are a ``lax.scan``.

    Args:
        key: PRNG key.
        predictor: an equinox module ``x -> (T,)`` logits (e.g. :class:`TimePredictor`); its
            inexact array leaves are trained.
        data: ``(n, d)`` training samples x₀.
        schedule: the :class:`VPSchedule`.
        times: ``(T,)`` grid times (for a sampler with N steps, ``time_grid(N)``).
        num_steps: optimisation steps.
        batch_size: pairs per step.
        learning_rate: Adam's step size when ``optimizer`` is None (traced).
        optimizer: any ``optax.GradientTransformation`` (with its own learning rate); default
            ``optax.adam(learning_rate)``.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the
            optimisation steps from inside the compiled loop.

    Returns:
        ``(predictor, info)``: the trained module and a :class:`TimePredictorTrainInfo` with the
        ``(num_steps,)`` training losses.
    """
    key = check_key("key", key)
    data = check_array("data", data, ndim=2, finite=True, min_rows=1)
    _check_schedule(schedule)
    times = check_array("times", times, ndim=1, finite=True, min_rows=2)
    num_steps = check_int("num_steps", num_steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    learning_rate = check_hyperparameter("learning_rate", learning_rate)
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax.GradientTransformation, got "
                        f"{type(optimizer).__name__}")
    # one logit per grid time
    check_fn_output("predictor", predictor, jax.ShapeDtypeStruct(data.shape[1:], data.dtype),
                    times.shape)
    return _train(key, predictor, data, schedule, times.astype(data.dtype), num_steps,
                  batch_size, learning_rate, optimizer, check_progress(progress))


@eqx.filter_jit
def _train(key, predictor, data, schedule, times, num_steps, batch_size, learning_rate,
           optimizer, progress):
    params, static = eqx.partition(predictor, eqx.is_inexact_array)
    if optimizer is None:  # built inside the trace: the learning rate stays a traced value
        optimizer = optax.adam(learning_rate)

    def loss_fn(params, x, labels):
        model = eqx.combine(params, static)
        logits = jax.vmap(model)(x)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))

    def step(carry, xs):
        params, state = carry
        index, step_key = xs
        rows, labels, noise = jax.random.split(step_key, 3)
        x0 = data[jax.random.randint(rows, (batch_size,), 0, data.shape[0])]
        j = jax.random.randint(labels, (batch_size,), 0, times.shape[0])
        alpha = schedule.alpha_bar(times[j])[:, None]
        x = jnp.sqrt(alpha) * x0 + jnp.sqrt(1 - alpha) * jax.random.normal(noise, x0.shape,
                                                                          x0.dtype)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, j)
        with jax.numpy_dtype_promotion("standard"):   # optax: decay ** int32 count
            updates, state = optimizer.update(grads, state, params)
        if progress is not None:
            progress.report(index + 1, num_steps)
        return (optax.apply_updates(params, updates), state), loss

    steps = (jnp.arange(num_steps, dtype=jnp.int32), jax.random.split(key, num_steps))
    (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)), steps)
    info = TimePredictorTrainInfo(losses, ~jnp.all(jnp.isfinite(losses)))
    return eqx.combine(params, static), info


def time_posterior_kl(key, prior: GaussianMixturePrior, predictor, schedule: VPSchedule, times,
                      *, num_samples: int = 4096):
    """E_{τ, x_τ} KL(p(· | x_τ) ‖ p_φ(· | x_τ)): the learned predictor's gap to the exact one.

    τ uniform on the grid, x_τ exact marginal draws; ``num_samples`` pairs. Returns
    ``(mean, standard_error)``. Zero iff the predictor is the Bayes posterior (on the support).
    """
    key = check_key("key", key)
    times = check_array("times", times, ndim=1, finite=True, min_rows=2)
    num_samples = check_int("num_samples", num_samples, 2)
    kl = _kl(key, prior, predictor, _check_schedule(schedule), times, num_samples)
    return jnp.mean(kl), jnp.std(kl) / np.sqrt(num_samples)


@eqx.filter_jit
def _kl(key, prior, predictor, schedule, times, num_samples):
    index_key, data_key, noise_key = jax.random.split(key, 3)
    j = jax.random.randint(index_key, (num_samples,), 0, times.shape[0])
    x0 = _sample_mixture(data_key, prior, num_samples)
    alpha = schedule.alpha_bar(times[j])[:, None]
    x = jnp.sqrt(alpha) * x0 + jnp.sqrt(1 - alpha) * jax.random.normal(noise_key, x0.shape,
                                                                      x0.dtype)
    exact = jax.vmap(lambda y: prior.time_log_posterior(y, schedule, times))(x)
    learned = jax.vmap(lambda y: jax.nn.log_softmax(predictor(y)))(x)
    return jnp.sum(jnp.exp(exact) * (exact - learned), axis=-1)
