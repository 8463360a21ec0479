"""What users' models predict, converted once to the engine's ε: the ``prediction`` and
``timesteps`` options of :func:`~jaxsample.diffusion.guidance.sample`, and
:class:`GridTimePredictor`, a time classifier trained on T classes seen on the sampler's grid.

With x_t = √ᾱ_t·x₀ + σ_t·ε (σ_t = √(1 − ᾱ_t)) every VP parametrisation is a linear map of ε:

* ``"epsilon"``: the model's output is ε;
* ``"x0"``: x̂₀, so ε = (x − √ᾱ·x̂₀)/σ;
* ``"v"`` (Salimans & Ho 2022): v = √ᾱ·ε − σ·x₀, so ε = σ·x + √ᾱ·v;
* ``"velocity"`` (flow matching / rectified flow on x_s = (1 − s)·x₀ + s·ε, s = 1 pure noise,
  u = dx/ds = ε − x₀): the VP state at t is the flow state at the same signal-to-noise ratio,
  s = σ/(√ᾱ + σ), x_s = x/(√ᾱ + σ), and ε = x_s + (1 − s)·u(x_s, s). A model on the other time
  convention (s = 0 noise) is ``lambda x, s: -model(x, 1 - s)``.

``timesteps = T`` calls a model trained on integer timesteps 0..T−1 (a DDPM-style network with a
:class:`~jaxsample.diffusion.guidance.VPSchedule` ``"table"`` of its T cumulative products) at the
int32 index t·T − 1, the node of the table at the sampler's time t (the sampler's N must divide
T, so every t_k = k/N is a node).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_array, check_callable, check_choice, check_int, is_concrete
from jaxsample.kernels import guidance as kernels

__all__ = ["PREDICTIONS", "GridTimePredictor", "as_epsilon", "check_model_options"]

PREDICTIONS = ("epsilon", "v", "x0", "velocity")


class _AsEpsilon(eqx.Module):
    """``model(x, time) -> prediction`` seen as the engine's ``eps_fn(x, t)`` (one sample)."""

    model: Callable
    schedule: eqx.Module
    prediction: str = eqx.field(static=True)
    timesteps: int | None = eqx.field(static=True)

    def __call__(self, x, t):
        t = jnp.asarray(t, x.dtype)
        alpha = self.schedule.alpha_bar(t)
        root_alpha, sigma = jnp.sqrt(alpha), jnp.sqrt(1 - alpha)
        if self.prediction == "velocity":
            s = sigma / (root_alpha + sigma)
            x_s = x / (root_alpha + sigma)
            return (x_s + (1 - s) * self.model(x_s, s).astype(x.dtype)).astype(x.dtype)
        if self.timesteps is None:
            time = t
        else:   # t = k/N with N | T: t·T is the integer k·T/N up to round-off
            time = (jnp.round(t * self.timesteps) - 1).astype(jnp.int32)
        out = self.model(x, time).astype(x.dtype)
        if self.prediction == "epsilon":
            return out
        if self.prediction == "x0":
            return (x - root_alpha * out) / sigma
        return sigma * x + root_alpha * out           # "v"


def check_model_options(prediction, timesteps, num_steps):
    """Checked ``(prediction, timesteps)`` of the sampler."""
    prediction = check_choice("prediction", prediction, PREDICTIONS)
    if timesteps is not None:
        timesteps = check_int("timesteps", timesteps, 1)
        if prediction == "velocity":
            raise ValueError("timesteps (integer timesteps 0..T-1) applies to the VP "
                             "parametrisations 'epsilon', 'v' and 'x0'; a flow-matching "
                             "'velocity' model is called at its own time s in (0, 1)")
        if timesteps % num_steps:
            raise ValueError(f"num_steps must divide timesteps so that every sampler time k/N "
                             f"is a timestep of the model, got num_steps = {num_steps} and "
                             f"timesteps = {timesteps}")
    return prediction, timesteps


def as_epsilon(model, schedule, prediction: str, timesteps: int | None):
    """The engine's ε-predictor for a checked model: ``model`` itself for ``"epsilon"`` with
    continuous time (bitwise the unconverted path), else the conversion of the module docstring."""
    if prediction == "epsilon" and timesteps is None:
        return model
    return _AsEpsilon(model, schedule, prediction, timesteps)


class GridTimePredictor(eqx.Module):
    """A time classifier trained on T classes, seen on the sampler's grid of ``num_steps`` times.

    :class:`~jaxsample.diffusion.guidance.TAG` needs logits over the sampler's times t_k = k/N
    (:func:`jaxsample.kernels.guidance.time_grid`). A classifier trained by cross-entropy with a
    uniform prior over T training times τ_j has logits log p_{τ_j}(x) + c(x); the posterior
    over a sub-grid under a uniform prior on it is the softmax of the same logits restricted to
    it. So the adapter returns, for each t_k, the training logits at t_k (exact when t_k is a
    training time, e.g. τ_j = j/T with N | T) and, between training times, their linear
    interpolation in t (an approximation of log p_t(x); the ends are held constant).

    Args:
        time_logits_fn: ``logits(x) -> (T,)`` over the training times (e.g. a
            :class:`~jaxsample.diffusion.guidance.TimePredictor` trained on
            ``time_grid(T)``, or a network over DDPM timesteps 0..T−1, class j at t = (j + 1)/T).
        training_times: T (a Python int: the times j/T, j = 1..T) or a ``(T,)`` increasing
            array of the training times in (0, 1].
        num_steps: the sampler's N.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample import datasets
        >>> from jaxsample.diffusion import guidance
        >>> from jaxsample.kernels.guidance import time_grid
        >>> noised = guidance.NoisedMixture(datasets.ring_of_gaussians(), guidance.VPSchedule())
        >>> on_grid = guidance.GridTimePredictor(noised.time_predictor(time_grid(1000)), 1000, 50)
        >>> x = jnp.array([0.3, -0.2])
        >>> bool(jnp.allclose(jax.nn.log_softmax(on_grid(x)),
        ...                   jax.nn.log_softmax(noised.time_predictor(time_grid(50))(x)),
        ...                   atol=1e-4))
        True
    """

    time_logits_fn: Callable
    training_times: jax.Array
    num_steps: int = eqx.field(static=True)

    def __init__(self, time_logits_fn: Callable, training_times, num_steps: int):
        self.time_logits_fn = check_callable("time_logits_fn", time_logits_fn)
        self.num_steps = check_int("num_steps", num_steps, 1)
        if isinstance(training_times, int) and not isinstance(training_times, bool):
            times = kernels.time_grid(check_int("training_times", training_times, 1))
        else:
            times = check_array("training_times", training_times, ndim=1, finite=True,
                                min_rows=1)
            if is_concrete(times) and times.shape[0] > 1 and bool(jnp.any(jnp.diff(times) <= 0)):
                raise ValueError("training_times must be increasing")
        self.training_times = times

    def __call__(self, x):
        logits = self.time_logits_fn(x)
        if logits.shape != self.training_times.shape:
            raise ValueError(f"time_logits_fn must return one logit per training time, shape "
                             f"{self.training_times.shape}, got {logits.shape}")
        times = self.training_times.astype(x.dtype)
        grid = kernels.time_grid(self.num_steps, x.dtype)
        return jnp.interp(grid, times, logits.astype(x.dtype))
