"""Guidance terms of :func:`~jaxsample.diffusion.guidance.sample` and the fiber loss.

A term adds a score-space field g(x, t) to the score s = −ε/σ_t of the ε-predictor, so the guided
prediction is ε̃ = ε − σ_t·Σ g. Each term is an equinox module: its class is its constructor
(checks run there), its scale is an array leaf (traced: one compilation serves every value) and a
static ``active`` flag is False when the scale was a concrete 0 (the term is then never
evaluated: bitwise the unguided sampler).

* :class:`ClassifierGuidance` — g = w·∇ₓ log p_t(y | x) (Dhariwal & Nichol 2021);
* :class:`TAG` — temporal alignment guidance (Park, Jung, Bae & Yun, *Temporal Alignment
  Guidance*, arXiv:2510.11057): g = ω·∇ₓ log p_φ(t | x) for a time classifier p_φ over the
  sampler's time grid;
* :class:`DPSGuidance` — diffusion posterior sampling (Chung et al. 2023) by a terminal cost c:
  the next state moves by −ζ·∇ₓ c(x̂₀(x)) through Tweedie's estimate;
* :class:`FiberCost` — the fiber loss ‖φ(x) − φ(x_q)‖² (or its norm) of a feature extractor φ,
  the terminal cost of invariance auditing (:class:`~jaxsample.diffusion.guidance.NDTM`,
  :class:`DPSGuidance`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_fn_output,
    check_hyperparameter,
)
from jaxsample.diffusion.guidance._validate import check_scalar_fn, is_active
from jaxsample.kernels import guidance as kernels

__all__ = [
    "FIBER_LOSSES",
    "TAG",
    "ClassifierGuidance",
    "DPSGuidance",
    "FiberCost",
    "GuidanceStep",
    "GuidanceTerm",
]

FIBER_LOSSES = ("squared", "norm")


@dataclasses.dataclass(frozen=True)
class GuidanceStep:
    """What a guidance term sees for one sample at one step (inside the sampler's trace).

    Attributes:
        x: the (controlled) state, one sample.
        t: the step's time t_k (scalar).
        index: k − 1, the class of t_k on the time grid (int32 scalar).
        alpha_bar: ᾱ(t_k).
        sigma: σ_k = √(1 − ᾱ(t_k)).
        eps: the unguided prediction ε(x, t_k).
        times: ``(N,)`` the grid t_1..t_N (:func:`jaxsample.kernels.guidance.time_grid`).
        state_gain: κ > 0, how far a unit score-space field moves the next state: adding g to
            the score (ε̃ = ε − σ·g) moves x_{k−1} by κ·g (κ = −σ·∂x_{k−1}/∂ε̃ of the step rule).
        pullback: ``v ↦ J_ε(x)ᵀ v`` when a term asked for it (``needs_pullback``), else None.
    """

    x: jax.Array
    t: jax.Array
    index: jax.Array
    alpha_bar: jax.Array
    sigma: jax.Array
    eps: jax.Array
    times: jax.Array
    state_gain: jax.Array
    pullback: Callable | None

    @property
    def x0(self) -> jax.Array:
        """Tweedie's estimate x̂₀ = (x − σ·ε)/√ᾱ."""
        return kernels.tweedie(self.x, self.eps, self.alpha_bar)


class GuidanceTerm(eqx.Module):
    """A score-space guidance field: ``evaluate(step) -> (field or None, time gap or None)``.

    ``needs_pullback = True`` asks the sampler for J_εᵀ (one VJP per step).
    """

    needs_pullback = False

    def evaluate(self, step: GuidanceStep):
        raise NotImplementedError

    def check(self, event_shape, dtype, num_steps: int) -> None:
        """Eager shape checks of the term's callables (called once by the sampler)."""


class ClassifierGuidance(GuidanceTerm):
    """Classifier guidance: adds scale·∇ₓ log p_t(y | x) to the score.

    Args:
        log_prob_fn: ``log_prob_fn(x, t) -> scalar`` log p_t(y | x) of the wanted class for one
            noisy sample (e.g. :meth:`NoisedMixture.classifier`).
        scale: w ≥ 0 (traced; a concrete 0 switches the term off statically).

    Example:
        >>> from jaxsample import datasets
        >>> from jaxsample.diffusion import guidance
        >>> noised = guidance.NoisedMixture(datasets.ring_of_gaussians(), guidance.VPSchedule())
        >>> guidance.ClassifierGuidance(noised.classifier(0), 10.0).active
        True
    """

    log_prob_fn: Callable
    scale: Any
    active: bool = eqx.field(static=True)

    def __init__(self, log_prob_fn: Callable, scale):
        self.log_prob_fn = check_callable("log_prob_fn", log_prob_fn)
        self.scale = check_hyperparameter("scale", scale, positive=False)
        self.active = is_active(self.scale)

    def evaluate(self, step):
        if not self.active:
            return None, None
        grad = jax.grad(lambda y: self.log_prob_fn(y, step.t))(step.x)
        return jnp.asarray(self.scale, step.x.dtype) * grad, None

    def check(self, event_shape, dtype, num_steps):
        check_scalar_fn("log_prob_fn", self.log_prob_fn, jax.ShapeDtypeStruct(event_shape, dtype),
                        jax.ShapeDtypeStruct((), dtype))


class TAG(GuidanceTerm):
    """Temporal alignment guidance: adds ω·∇ₓ log p_φ(t_k | x) at step k; reports the time gap.

    The field is ``jax.grad`` of ``log_softmax(time_logits_fn(x))[k − 1]``, the time classifier's
    log-posterior of the current grid time; it pulls a sample towards the manifold of its
    current time. With the Bayes classifier of a Gaussian mixture
    (:meth:`NoisedMixture.time_predictor`) the field is the exact *time-linked score*
    s(x, t) − Σ_σ p(σ | x) s(x, σ). The sampler records the time gap |t̂(x) − t_k|,
    t̂ = Σ_τ τ·p_φ(τ | x), at every step in ``info.time_gap`` — also for ω = 0, which evaluates
    only the logits (a diagnostic; the trajectory is bitwise the unguided one).

    Args:
        time_logits_fn: ``logits(x) -> (N,)`` over the sampler's grid
            (:func:`jaxsample.kernels.guidance.time_grid` of ``num_steps``): a trained
            :class:`TimePredictor` or the exact :meth:`NoisedMixture.time_predictor`.
        omega: ω ≥ 0 (traced; a concrete 0 is a static branch).

    Example:
        >>> from jaxsample import datasets
        >>> from jaxsample.diffusion import guidance
        >>> from jaxsample.kernels.guidance import time_grid
        >>> noised = guidance.NoisedMixture(datasets.ring_of_gaussians(), guidance.VPSchedule())
        >>> predictor = noised.time_predictor(time_grid(50))
        >>> guidance.TAG(predictor, 1.0).active, guidance.TAG(predictor, 0.0).active
        (True, False)
    """

    time_logits_fn: Callable
    omega: Any
    active: bool = eqx.field(static=True)

    def __init__(self, time_logits_fn: Callable, omega):
        self.time_logits_fn = check_callable("time_logits_fn", time_logits_fn)
        self.omega = check_hyperparameter("omega", omega, positive=False)
        self.active = is_active(self.omega)

    def evaluate(self, step):
        def log_posterior(y):
            return jax.nn.log_softmax(self.time_logits_fn(y).astype(y.dtype))

        if self.active:
            def at_index(y):
                log_p = log_posterior(y)
                return log_p[step.index], log_p

            grad, log_p = jax.grad(at_index, has_aux=True)(step.x)
            field = jnp.asarray(self.omega, step.x.dtype) * grad
        else:
            log_p, field = log_posterior(step.x), None
        return field, kernels.time_gap(log_p, step.times, step.t)

    def check(self, event_shape, dtype, num_steps):
        try:
            check_fn_output("time_logits_fn", self.time_logits_fn,
                            jax.ShapeDtypeStruct(event_shape, dtype), (num_steps,))
        except ValueError as err:
            raise ValueError(f"{err} (num_steps logits, one per time of the sampler's grid, "
                             "kernels.guidance.time_grid(num_steps))") from err


class FiberCost(eqx.Module):
    """The fiber loss of a feature extractor φ at a query x_q, a terminal cost.

    ``loss="squared"``: c(x) = ‖φ(x) − y‖²; ``loss="norm"``: c(x) = ‖φ(x) − y‖, the invariance
    auditing code's choice (Rousselot, Wendebourg & Köthe, arXiv:2603.21782; its ``fiber_loss =
    "l2"``), whose gradient J_φᵀ(φ(x) − y)/‖φ(x) − y‖ has unit size in feature space whatever
    the residual (0 at a zero residual here). y = φ(x_q). The zero set is the fiber
    {x : φ(x) = φ(x_q)}: the inputs φ cannot tell apart from x_q.

    ``per_step_target=True`` is the auditing paper's modification of NDTM's terminal cost: at
    every step t the target is y_t = φ(x̂₀(x_{q,t})), φ of Tweedie's estimate of the query noised
    to t (x_{q,t} = √ᾱ_t x_q + σ_t ξ, fresh ξ per sample and step; x̂₀ clipped as the solver
    clips), so the guided sample is compared with what φ sees of an equally noisy query. Only
    :class:`~jaxsample.diffusion.guidance.NDTM` uses it (a :class:`DPSGuidance` refuses it);
    ``info.final_cost`` is always against the static y = φ(x_q).

    Args:
        feature_fn: φ(x) for one sample (any output shape; an equinox module is traced).
        query: x_q, one sample (the shape of one row of the sampler's batch).
        loss: ``"squared"`` (default) or ``"norm"``.
        per_step_target: the auditing paper's per-step target (NDTM only).

    Example:
        >>> import jax.numpy as jnp
        >>> cost = FiberCost(lambda x: x[:2], jnp.array([1.0, 2.0, 3.0]))
        >>> float(cost(jnp.array([1.0, 0.0, -5.0])))
        4.0
        >>> float(FiberCost(lambda x: x[:2], jnp.array([1.0, 2.0, 3.0]), loss="norm")(
        ...     jnp.array([1.0, 0.0, -5.0])))
        2.0
    """

    feature_fn: Callable
    query: jax.Array
    target: jax.Array
    loss: str = eqx.field(static=True)
    per_step_target: bool = eqx.field(static=True)

    def __init__(self, feature_fn: Callable, query, *, loss: str = "squared",
                 per_step_target: bool = False):
        self.feature_fn = check_callable("feature_fn", feature_fn)
        self.query = check_array("query", query, finite=True)
        self.loss = check_choice("loss", loss, FIBER_LOSSES)
        self.per_step_target = bool(per_step_target)
        self.target = jnp.asarray(feature_fn(self.query))

    def distance(self, features, target) -> jax.Array:
        """The loss between features φ(x) and a target (both one sample's)."""
        diff = features - target.astype(features.dtype)
        squared = jnp.sum(diff * diff)
        if self.loss == "squared":
            return squared
        positive = squared > 0   # the norm's gradient at 0 is taken as 0, not NaN
        return jnp.where(positive, jnp.sqrt(jnp.where(positive, squared, 1)), 0)

    def evaluate(self, x, target) -> jax.Array:
        """c against a given target y (one sample)."""
        return self.distance(self.feature_fn(x), target)

    def __call__(self, x) -> jax.Array:
        return self.evaluate(x, self.target)


class DPSGuidance(GuidanceTerm):
    """Diffusion posterior sampling (Chung et al. 2023) by a terminal cost c.

    Every step's new state moves by −ζ_k·∇ₓ c(x̂₀(x)) (DPS's Algorithm 1), the gradient taken
    through Tweedie's estimate and the ε-predictor (one VJP per step); with ``normalize`` (DPS's
    choice) ζ_k = ζ'/√c(x̂₀), else ζ_k = ζ'. It enters the sampler as the score-space field
    g = −(ζ_k/κ)·∇ₓ c, κ the step's :attr:`GuidanceStep.state_gain`, so it composes with the other
    terms (``info.guidance_norm`` is ‖g‖). DPS-style fiber guidance is
    ``DPSGuidance(FiberCost(φ, x_q), ζ')``.

    Args:
        terminal_cost: ``c(x) -> scalar`` ≥ 0 for one sample (e.g. :class:`FiberCost`; for a
            measurement y = H(x₀) + noise, c = ‖y − H(x)‖²).
        weight: ζ' ≥ 0 (traced; a concrete 0 is a static branch).
        normalize: divide by √c (DPS's step-size rule).

    Example:
        >>> import jax.numpy as jnp
        >>> term = DPSGuidance(FiberCost(lambda x: x[:2], jnp.array([1.0, 0.0, 0.0])), 0.1)
        >>> term.needs_pullback, float(term.terminal_cost(jnp.array([1.0, 1.0, 5.0])))
        (True, 1.0)
    """

    terminal_cost: Callable
    weight: Any
    active: bool = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    needs_pullback = True

    def __init__(self, terminal_cost: Callable, weight, *, normalize: bool = True):
        self.terminal_cost = check_callable("terminal_cost", terminal_cost)
        if isinstance(terminal_cost, FiberCost) and terminal_cost.per_step_target:
            raise ValueError("terminal_cost: a FiberCost with per_step_target=True needs the "
                             "NDTM solver (DPS guidance compares with the static target)")
        self.weight = check_hyperparameter("weight", weight, positive=False)
        self.active = is_active(self.weight)
        self.normalize = bool(normalize)

    def evaluate(self, step):
        if not self.active:
            return None, None
        cost, grad0 = jax.value_and_grad(self.terminal_cost)(step.x0)
        grad = (grad0 - step.sigma * step.pullback(grad0)) / jnp.sqrt(step.alpha_bar)
        zeta = jnp.asarray(self.weight, step.x.dtype)
        if self.normalize:   # ζ = ζ'/√c: the state moves by −2ζ'·∇√c, bounded as c → 0
            root = jnp.sqrt(cost.astype(step.x.dtype))
            zeta = jnp.where(root > 0, zeta / jnp.where(root > 0, root, 1), 0)
        return -(zeta / step.state_gain) * grad, None

    def check(self, event_shape, dtype, num_steps):
        check_scalar_fn("terminal_cost", self.terminal_cost,
                        jax.ShapeDtypeStruct(event_shape, dtype))
