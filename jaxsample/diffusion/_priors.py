"""Exact VP marginals of a Gaussian-mixture data law, its linear fiber laws; time predictors.

A mixture x₀ ~ Σ_k π_k N(m_k, C_k) (:class:`jaxsample.targets.GaussianMixture`) stays a mixture
under the VP forward process: p_t(x) = Σ_k π_k N(x; √ᾱ_t m_k, ᾱ_t C_k + (1 − ᾱ_t) I).
:class:`NoisedMixture` gives everything a guided sampler needs in closed form: the score and
ε-prediction at every t, the component posterior p_t(k | x) (a classifier for guidance), the
Bayes time posterior p(τ | x) on a grid of times (the cross-entropy optimum of a time predictor
under a uniform prior over the grid) and the time-linked score

.. math::  ∇_x \\log p(t \\mid x) = s(x, t) − Σ_σ p(σ \\mid x)\\, s(x, σ).

:class:`LinearFiberLaw` is the exact law of x₀ given A x₀ = y, the fiber of a linear feature map
(a mixture with degenerate covariances, which :class:`NoisedMixture` accepts too).
"""

from __future__ import annotations

import math
import warnings
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
from jaxsample._training import check_optimizer, fit
from jaxsample.diffusion._vp import VPSchedule
from jaxsample.kernels import guidance as kernels
from jaxsample.kernels.logspace import log_normalize
from jaxsample.kernels.resampling import categorical
from jaxsample.targets import GaussianMixture

__all__ = [
    "LinearFiberLaw",
    "NoisedMixture",
    "TimePosteriorKLInfo",
    "TimePredictor",
    "TimePredictorTrainInfo",
    "time_posterior_kl",
    "train_time_predictor",
]


def _check_schedule(schedule):
    if not isinstance(schedule, VPSchedule):
        raise TypeError(f"schedule must be a VPSchedule, got {type(schedule).__name__}")
    return schedule


def _check_mixture(mixture):
    if not isinstance(mixture, GaussianMixture | LinearFiberLaw):
        raise TypeError("mixture must be a jaxsample.targets.GaussianMixture or a "
                        f"LinearFiberLaw, got {type(mixture).__name__}")
    return mixture


class NoisedMixture(eqx.Module):
    """The VP marginals p_t of a Gaussian-mixture data law, exactly, at every t of a schedule.

    Calling it is the exact ε-predictor ``eps(x, t)`` of the samplers. A pytree (equinox module)
    of arrays: build it inside ``jit`` or pass it through; the covariances are stored with their
    eigen-decompositions C_k = V_k diag(λ_k) V_kᵀ, so a marginal density costs O(K·d²) per point
    and O(K·d) more per extra time. Degenerate covariances (a :class:`LinearFiberLaw`) are
    allowed: the marginals at t > 0 are not degenerate.

    The methods act on **one** point ``x`` of shape ``(d,)`` (``jax.vmap`` them for a batch) and a
    scalar time ``t`` in (0, 1]; they return the dtype of ``x``.

    Args:
        mixture: the data law, a :class:`jaxsample.targets.GaussianMixture` (or a
            :class:`LinearFiberLaw`).
        schedule: the :class:`VPSchedule`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample import datasets
        >>> from jaxsample.diffusion import guidance
        >>> schedule = guidance.VPSchedule("linear")
        >>> noised = guidance.NoisedMixture(datasets.ring_of_gaussians(num_components=4), schedule)
        >>> x, t = jnp.array([1.0, 0.0]), jnp.float32(0.5)
        >>> score = jax.grad(noised.log_prob)(x, t)
        >>> bool(jnp.allclose(noised(x, t), -schedule.sigma(t) * score, atol=1e-5))
        True
    """

    schedule: VPSchedule
    log_weights: jax.Array
    means: jax.Array
    eigenvalues: jax.Array
    eigenvectors: jax.Array
    projected_means: jax.Array

    def __init__(self, mixture, schedule: VPSchedule):
        mixture = _check_mixture(mixture)
        self.schedule = _check_schedule(schedule)
        (self.log_weights, self.eigenvalues, self.eigenvectors, self.projected_means,
         psd) = _decompose(mixture.weights, mixture.means, mixture.covs)
        self.means = mixture.means
        if is_concrete(psd) and not bool(psd):
            raise ValueError("mixture covariances must be positive semi-definite")

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

    def component_log_densities(self, x, t) -> jax.Array:
        """``(K,)`` log π_k + log N(x; √ᾱ_t m_k, ᾱ_t C_k + (1 − ᾱ_t) I)."""
        alpha = self.schedule.alpha_bar(jnp.asarray(t, x.dtype))
        return kernels.gmm_component_log_densities(self._project(x), alpha, *self._parts(x.dtype))

    def log_prob(self, x, t) -> jax.Array:
        """log p_t(x)."""
        return jax.nn.logsumexp(self.component_log_densities(x, t))

    def component_log_posterior(self, x, t) -> jax.Array:
        """``(K,)`` log p_t(k | x): the exact noisy-state classifier of the components."""
        return log_normalize(self.component_log_densities(x, t))

    def score(self, x, t) -> jax.Array:
        """s(x, t) = ∇ log p_t(x) = −Σ_k p_t(k | x) (ᾱC_k + (1 − ᾱ)I)⁻¹ (x − √ᾱ m_k)."""
        alpha = self.schedule.alpha_bar(jnp.asarray(t, x.dtype))
        log_w, mu, lam = self._parts(x.dtype)
        projected = self._project(x)
        responsibilities = jnp.exp(log_normalize(
            kernels.gmm_component_log_densities(projected, alpha, log_w, mu, lam)))
        whitened = (projected - jnp.sqrt(alpha) * mu) / (alpha * lam + (1 - alpha))
        return -jnp.einsum("k,kij,kj->i", responsibilities, self.eigenvectors.astype(x.dtype),
                           whitened)

    def __call__(self, x, t) -> jax.Array:
        """The exact ε-prediction ε(x, t) = −√(1 − ᾱ_t)·s(x, t)."""
        return -self.schedule.sigma(jnp.asarray(t, x.dtype)) * self.score(x, t)

    def time_logits(self, x, times) -> jax.Array:
        """``(T,)`` log p_τ(x) for τ in ``times``: the Bayes time classifier's logits.

        Under a uniform prior over the grid, p(τ | x) = softmax(logits)_τ exactly.
        """
        times = jnp.asarray(times, x.dtype)
        projected = self._project(x)
        parts = self._parts(x.dtype)

        def at(tau):
            return jax.nn.logsumexp(kernels.gmm_component_log_densities(
                projected, self.schedule.alpha_bar(tau), *parts))

        return jax.vmap(at)(times)

    def time_log_posterior(self, x, times) -> jax.Array:
        """``(T,)`` log p(τ | x) on the grid ``times`` (uniform prior over the grid)."""
        return log_normalize(self.time_logits(x, times))

    def time_linked_score(self, x, times, index) -> jax.Array:
        """∇ₓ log p(τ_index | x) = s(x, τ_index) − Σ_σ p(σ | x) s(x, σ), in closed form."""
        times = jnp.asarray(times, x.dtype)
        scores = jax.vmap(lambda tau: self.score(x, tau))(times)
        posterior = jnp.exp(self.time_log_posterior(x, times))
        return scores[index] - posterior @ scores

    def time_predictor(self, times) -> eqx.Module:
        """The exact time classifier ``logits(x) -> (T,)`` over ``times``, for :class:`TAG`."""
        times = check_array("times", times, ndim=1, finite=True, min_rows=1)
        return _TimeLogits(self, times)

    def classifier(self, component: int) -> eqx.Module:
        """``log p_t(k | x)`` of one component as a module ``(x, t) -> scalar``, for
        :class:`ClassifierGuidance`."""
        component = check_int("component", component, 0, self.num_components - 1)
        return _Classifier(self, component)


def _eigen(covariances):
    """Eigen-decompositions of symmetrised covariances, eigenvalues within round-off of 0 set to
    exactly 0 (exact for a fiber law's directions), and whether they are all ≥ −round-off."""
    dim = covariances.shape[-1]
    covariances = 0.5 * (covariances + jnp.swapaxes(covariances, 1, 2))
    eigenvalues, eigenvectors = jnp.linalg.eigh(covariances)
    scale = jnp.max(jnp.abs(eigenvalues), axis=-1, keepdims=True)
    tolerance = 100 * dim * jnp.finfo(covariances.dtype).eps * scale
    psd = jnp.all(eigenvalues >= -tolerance)
    return jnp.where(eigenvalues > tolerance, eigenvalues, 0), eigenvectors, psd


@jax.jit
def _decompose(weights, means, covariances):
    """Normalised log-weights and the eigen-decompositions of the covariances (one compilation
    per shape instead of a dozen eager dispatches)."""
    eigenvalues, eigenvectors, psd = _eigen(covariances)
    projected_means = jnp.einsum("kij,ki->kj", eigenvectors, means)
    return log_normalize(jnp.log(weights)), eigenvalues, eigenvectors, projected_means, psd


class _TimeLogits(eqx.Module):
    noised: NoisedMixture
    times: jax.Array

    def __call__(self, x):
        return self.noised.time_logits(x, self.times.astype(x.dtype))


class _Classifier(eqx.Module):
    noised: NoisedMixture
    component: int = eqx.field(static=True)

    def __call__(self, x, t):
        return self.noised.component_log_posterior(x, t)[self.component]


class LinearFiberLaw(eqx.Module):
    """The exact law of x₀ given A x₀ = y under a Gaussian-mixture x₀: the fiber law of φ(x) = Ax.

    With S_k = A C_k Aᵀ and gain G_k = C_k Aᵀ S_k⁻¹: weights ∝ π_k N(y; A m_k, S_k), means
    m_k + G_k (y − A m_k), covariances C_k − G_k A C_k (rank d − r: the law lives on the affine
    fiber {x : Ax = y}). This is the exact fiber law of φ(x) = A x at a query with A x_q = y.
    :class:`NoisedMixture` accepts it (its marginals at t > 0 are not degenerate).

    Args:
        mixture: the prior, a :class:`jaxsample.targets.GaussianMixture`.
        matrix: ``(r, d)`` A of full row rank r ≤ d.
        value: ``(r,)`` y.

    Attributes:
        weights: ``(K,)``; means: ``(K, d)``; covs: ``(K, d, d)`` (positive semi-definite).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample import datasets
        >>> law = LinearFiberLaw(datasets.ring_of_gaussians(num_components=4, dim=3), jnp.eye(1, 3),
        ...                      jnp.array([0.5]))
        >>> bool(jnp.allclose(law.sample(jax.random.key(0), 5)[:, 0], 0.5, atol=1e-5))
        True
    """

    weights: jax.Array
    means: jax.Array
    covs: jax.Array

    def __init__(self, mixture, matrix, value):
        if not isinstance(mixture, GaussianMixture):
            raise TypeError("mixture must be a jaxsample.targets.GaussianMixture, got "
                            f"{type(mixture).__name__}")
        dtype = mixture.means.dtype
        matrix = check_array("matrix", matrix, ndim=2, finite=True, dtype=dtype)
        if matrix.shape[1] != mixture.dim:
            raise ValueError(f"matrix must have shape (r, {mixture.dim}), got {matrix.shape}")
        value = check_array("value", value, shape=(matrix.shape[0],), finite=True, dtype=dtype)
        self.weights, self.means, self.covs = _condition_linear(mixture, matrix, value)

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def num_components(self) -> int:
        return self.means.shape[0]

    def sample(self, key, num_samples: int) -> jax.Array:
        """``(num_samples, d)`` exact draws (dtype of the means)."""
        key = check_key("key", key)
        num_samples = check_int("num_samples", num_samples, 1)
        return _sample_degenerate(key, self, num_samples)


@eqx.filter_jit
def _condition_linear(mixture, matrix, value):
    cov = mixture.covs
    cross = jnp.einsum("kij,rj->kir", cov, matrix)                    # C Aᵀ, (K, d, r)
    inner = jnp.einsum("ri,kis->krs", matrix, cross)                  # A C Aᵀ, (K, r, r)
    residual = value[None, :] - mixture.means @ matrix.T              # y − A m, (K, r)
    chol = jnp.linalg.cholesky(inner)
    solved = jax.vmap(lambda c, r: jax.scipy.linalg.cho_solve((c, True), r))(chol, residual)
    gain_t = jax.vmap(lambda c, b: jax.scipy.linalg.cho_solve((c, True), b))(
        chol, jnp.swapaxes(cross, 1, 2))                              # S⁻¹ A C, (K, r, d)
    means = mixture.means + jnp.einsum("kir,kr->ki", cross, solved)
    covariances = cov - jnp.einsum("kir,krj->kij", cross, gain_t)
    covariances = 0.5 * (covariances + jnp.swapaxes(covariances, 1, 2))
    log_det = 2 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)), axis=1)
    rank = matrix.shape[0]
    log_lik = -0.5 * (jnp.sum(residual * solved, axis=1) + log_det
                      + rank * math.log(2 * math.pi))
    weights = jnp.exp(log_normalize(jnp.log(mixture.weights) + log_lik))
    return weights, means, covariances


@eqx.filter_jit
def _sample_degenerate(key, law, num_samples):
    which, noise = jax.random.split(key)
    labels = categorical(which, jnp.log(law.weights), num_samples)
    eigenvalues, eigenvectors, _ = _eigen(law.covs)
    root = eigenvectors * jnp.sqrt(eigenvalues)[:, None, :]
    xi = jax.random.normal(noise, (num_samples, law.dim), law.means.dtype)
    return law.means[labels] + jnp.einsum("nij,nj->ni", root[labels], xi)


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
    (:meth:`NoisedMixture.time_log_posterior` when the data are the mixture's draws). One
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
        ``(num_steps,)`` training losses. The training runs ``num_steps`` steps and claims no
        convergence (a fixed budget, no tolerance); a non-finite loss is flagged in
        ``info.nonfinite`` and, eagerly, warned about once (``RuntimeWarning``).
    """
    key = check_key("key", key)
    data = check_array("data", data, ndim=2, finite=True, min_rows=1)
    _check_schedule(schedule)
    times = check_array("times", times, ndim=1, finite=True, min_rows=2)
    num_steps = check_int("num_steps", num_steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    learning_rate = check_hyperparameter("learning_rate", learning_rate)
    optimizer = check_optimizer("optimizer", optimizer)
    # one logit per grid time
    check_fn_output("predictor", predictor, jax.ShapeDtypeStruct(data.shape[1:], data.dtype),
                    times.shape)
    trained, info = _train(key, predictor, data, schedule, times.astype(data.dtype), num_steps,
                           batch_size, learning_rate, optimizer, check_progress(progress))
    if is_concrete(info.nonfinite) and bool(info.nonfinite):
        warnings.warn("train_time_predictor: a training loss was not finite (info.nonfinite): "
                      "the returned predictor is not trustworthy; lower the learning rate or "
                      "check the data", RuntimeWarning, stacklevel=2)
    return trained, info


@eqx.filter_jit
def _train(key, predictor, data, schedule, times, num_steps, batch_size, learning_rate,
           optimizer, progress):
    params, static = eqx.partition(predictor, eqx.is_inexact_array)
    if optimizer is None:  # built inside the trace: the learning rate stays a traced value
        optimizer = optax.adam(learning_rate)

    def loss_fn(params, step_key):
        rows, labels, noise = jax.random.split(step_key, 3)
        x0 = data[jax.random.randint(rows, (batch_size,), 0, data.shape[0])]
        j = jax.random.randint(labels, (batch_size,), 0, times.shape[0])
        alpha = schedule.alpha_bar(times[j])[:, None]
        x = jnp.sqrt(alpha) * x0 + jnp.sqrt(1 - alpha) * jax.random.normal(noise, x0.shape,
                                                                          x0.dtype)
        logits = jax.vmap(eqx.combine(params, static))(x)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, j))

    params, losses = fit(loss_fn, params, optimizer, key, num_steps, progress=progress)
    info = TimePredictorTrainInfo(losses, ~jnp.all(jnp.isfinite(losses)))
    return eqx.combine(params, static), info


class TimePosteriorKLInfo(NamedTuple):
    """What :func:`time_posterior_kl` reports beside the mean KL.

    Attributes:
        standard_error: the Monte Carlo standard error of the mean.
        nonfinite: a KL term was NaN/inf (the learned logits were not finite).
    """

    standard_error: jax.Array
    nonfinite: jax.Array


def time_posterior_kl(key, mixture, predictor, schedule: VPSchedule, times, *,
                      num_samples: int = 4096) -> tuple[jax.Array, TimePosteriorKLInfo]:
    """E_{τ, x_τ} KL(p(· | x_τ) ‖ p_φ(· | x_τ)): a learned time predictor's gap to the exact one.

    τ uniform on the grid, x_τ exact marginal draws of the mixture data law; ``num_samples``
    pairs. Zero iff the predictor is the Bayes posterior (on the support).

    Args:
        key: PRNG key.
        mixture: the data law, a :class:`jaxsample.targets.GaussianMixture`.
        predictor: ``logits(x) -> (T,)``.
        schedule: the :class:`VPSchedule`.
        times: ``(T,)`` the grid.
        num_samples: (τ, x_τ) pairs.

    Returns:
        ``(mean KL, info)`` with a :class:`TimePosteriorKLInfo`.
    """
    key = check_key("key", key)
    mixture = _check_mixture(mixture)
    times = check_array("times", times, ndim=1, finite=True, min_rows=2)
    num_samples = check_int("num_samples", num_samples, 2)
    kl = _kl(key, NoisedMixture(mixture, _check_schedule(schedule)), mixture, predictor,
             times, num_samples)
    return jnp.mean(kl), TimePosteriorKLInfo(jnp.std(kl) / np.sqrt(num_samples),
                                             ~jnp.all(jnp.isfinite(kl)))


@eqx.filter_jit
def _kl(key, noised, mixture, predictor, times, num_samples):
    index_key, data_key, noise_key = jax.random.split(key, 3)
    j = jax.random.randint(index_key, (num_samples,), 0, times.shape[0])
    x0 = mixture.sample(data_key, num_samples)
    alpha = noised.schedule.alpha_bar(times[j])[:, None]
    x = jnp.sqrt(alpha) * x0 + jnp.sqrt(1 - alpha) * jax.random.normal(noise_key, x0.shape,
                                                                      x0.dtype)
    exact = jax.vmap(lambda y: noised.time_log_posterior(y, times))(x)
    learned = jax.vmap(lambda y: jax.nn.log_softmax(predictor(y)))(x)
    return jnp.sum(jnp.exp(exact) * (exact - learned), axis=-1)
