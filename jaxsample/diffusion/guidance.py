"""Guided VP diffusion sampling: TAG temporal alignment, DPS-style terms and NDTM control guidance.

One engine serves every guidance method over any user ε-predictor ``eps_fn(x, t)`` (one sample x,
scalar time t ∈ (0, 1]) on a :class:`VPSchedule`: a ``lax.scan`` over N reverse steps
t_k = k/N → t_{k−1} (:func:`time_grid`), ``jax.vmap`` over the batch (in blocks of ``chunk_size``
samples when given), and per-step, per-sample diagnostics in the returned info.

**Score terms** (composable equinox modules, so their scales are traced values) add a field
g(x, t) to the score s = −ε/σ_t: ε̃ = ε − σ_t·Σ g.

* :func:`classifier_guidance` — g = w·∇ₓ log p_t(y | x) (Dhariwal & Nichol 2021);
* :func:`tag` — temporal alignment guidance (Park, Jung, Bae & Yun, *Temporal Alignment Guidance*,
  arXiv:2510.11057): g = ω·∇ₓ log p_φ(t | x) for a time classifier p_φ over the sampler's time
  grid, which pulls a sample towards the manifold of its current time; with the Bayes classifier
  of a Gaussian mixture the field is the exact *time-linked score* s(x, t) − Σ_σ p(σ | x) s(x, σ)
  (:class:`GaussianMixturePrior`). ω = 0 is a static branch: bitwise the unguided sampler;
* :func:`dps_guidance` / :func:`fiber_guidance` — diffusion posterior sampling (Chung et al.
  2023): g = −w·∇ₓ c(x̂₀(x)) through Tweedie's estimate x̂₀ = (x − σ_t ε(x, t))/√ᾱ_t, one
  vector–Jacobian product through ε per step.

**One sampler, three solvers** (diffrax's shape: one entry point, one solver class per concept):
:func:`sample` with ``solver=`` :class:`DDIM` (η = 0 is the probability-flow ODE's first-order
discretisation, η = 1 has DDPM's law), :class:`DDPM` (ancestral, posterior or β variance), or
:class:`NDTM`, NDTM's variational control guidance (Pandey, Sofian, Draxler, Karaletsos &
Mandt, *Variational Control for Guidance in Diffusion Models*, ICML 2025, arXiv:2502.03686): before
every DDIM step a control u is optimised with a fresh optax optimiser (Adam by default) for M inner
steps on

.. math::  c(u) = w_{term}\\,c(x̂_0(x_t + u)) + w_{score}\\,‖ε(x_t) − ε(x_t + u)‖²
                  + w_{control}\\,‖u‖²,

and the step is taken from x_t + u. With the fiber loss c(x) = ‖φ(x) − φ(x_q)‖²
(:func:`fiber_cost`) it samples the fiber {x : φ(x) = φ(x_q)} of a feature extractor φ under a
pretrained prior, training-free: invariance auditing (Rousselot, Wendebourg & Köthe, *Show Me What
You Don't Know*, arXiv:2603.21782). Any differentiable terminal cost plugs in.

**Exact oracles:** :class:`GaussianMixturePrior` gives the exact ε, score, component classifier,
Bayes time posterior and time-linked score at every t, and the exact fiber law of a linear φ;
:class:`TimePredictor` / :func:`train_time_predictor` learn a time classifier with optax.

Non-finite values never turn samples into NaN silently: a sample whose guided prediction or new
state is not finite keeps its previous state for that step and is flagged in ``info.nonfinite``;
NDTM drops the control gradient of a sample whose cost or gradient is not finite (flagged too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_chunk_size,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample.diffusion._priors import (
    GaussianMixturePrior,
    TimePredictor,
    TimePredictorTrainInfo,
    ring_of_gaussians,
    time_posterior_kl,
    train_time_predictor,
)
from jaxsample.diffusion._vp import VPSchedule, time_grid
from jaxsample.kernels import chunking
from jaxsample.kernels import guidance as kernels

__all__ = [
    "DDIM",
    "DDPM",
    "NDTM",
    "ClassifierGuidance",
    "DPSGuidance",
    "FiberCost",
    "GaussianMixturePrior",
    "GuidanceInfo",
    "GuidanceStep",
    "GuidanceTerm",
    "NDTMInfo",
    "TAG",
    "TimePredictor",
    "TimePredictorTrainInfo",
    "VPSchedule",
    "classifier_guidance",
    "dps_guidance",
    "fiber_cost",
    "fiber_guidance",
    "ring_of_gaussians",
    "sample",
    "tag",
    "time_grid",
    "time_posterior_kl",
    "train_time_predictor",
]

VARIANCES = ("posterior", "beta")
WEIGHT_SCHEMES = ("zero", "ones", "ddpm", "ddim")
INITS = ("zero", "random", "causal-zero", "causal-random")
LEARNING_RATE_SCHEDULES = ("linear", "constant")


# ------------------------------------------------------------------------------- guidance terms


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
        times: ``(N,)`` the grid t_1..t_N (:func:`time_grid`).
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

    Subclasses hold their scale as an array leaf (traced) and a static ``active`` flag, False when
    the scale was a concrete 0: the term is then never evaluated (a static branch, bitwise the
    unguided sampler). ``needs_pullback = True`` asks the sampler for J_εᵀ (one VJP per step).
    """

    needs_pullback = False

    def evaluate(self, step: GuidanceStep):
        raise NotImplementedError

    def check(self, event_shape, dtype, num_steps: int) -> None:
        """Eager shape checks of the term's callables (called once by the samplers)."""


def _active(value) -> bool:
    return not (is_concrete(value) and float(value) == 0)


def _probe(name, fn, *args):
    try:
        return jax.eval_shape(fn, *args)
    except Exception as err:   # noqa: BLE001 - re-raised with the argument's name
        raise ValueError(f"{name} failed on one sample of the batch: {err}") from err


def _check_scalar_fn(name, fn, *args):
    out = _probe(name, fn, *args)
    if getattr(out, "shape", None) != () or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"{name} must return a floating scalar for one sample, got "
                         f"{getattr(out, 'shape', type(out).__name__)}")


class ClassifierGuidance(GuidanceTerm):
    """g = scale·∇ₓ log p_t(y | x); see :func:`classifier_guidance`."""

    log_prob_fn: Callable
    scale: Any
    active: bool = eqx.field(static=True)

    def evaluate(self, step):
        if not self.active:
            return None, None
        grad = jax.grad(lambda y: self.log_prob_fn(y, step.t))(step.x)
        return jnp.asarray(self.scale, step.x.dtype) * grad, None

    def check(self, event_shape, dtype, num_steps):
        _check_scalar_fn("log_prob_fn", self.log_prob_fn, jax.ShapeDtypeStruct(event_shape, dtype),
                         jax.ShapeDtypeStruct((), dtype))


class TAG(GuidanceTerm):
    """g = ω·∇ₓ log softmax(time_logits_fn(x))[k − 1], plus the time gap; see :func:`tag`."""

    time_logits_fn: Callable
    omega: Any
    active: bool = eqx.field(static=True)

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
        out = _probe("time_logits_fn", self.time_logits_fn,
                     jax.ShapeDtypeStruct(event_shape, dtype))
        if getattr(out, "shape", None) != (num_steps,):
            raise ValueError(
                f"time_logits_fn(x) must return num_steps = {num_steps} logits, one per time of "
                f"the sampler's grid (time_grid(num_steps)), got "
                f"{getattr(out, 'shape', type(out).__name__)}")


class DPSGuidance(GuidanceTerm):
    """Moves the next state by −ζ·∇ₓ c(x̂₀(x)) (one VJP through ε); see :func:`dps_guidance`."""

    terminal_cost: Callable
    weight: Any
    active: bool = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    needs_pullback = True

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
        _check_scalar_fn("terminal_cost", self.terminal_cost,
                         jax.ShapeDtypeStruct(event_shape, dtype))


def classifier_guidance(log_prob_fn: Callable, scale) -> ClassifierGuidance:
    """Classifier guidance: adds scale·∇ₓ log p_t(y | x) to the score.

    Args:
        log_prob_fn: ``log_prob_fn(x, t) -> scalar`` log p_t(y | x) of the wanted class for one
            noisy sample (e.g. :meth:`GaussianMixturePrior.classifier`).
        scale: w ≥ 0 (traced; a concrete 0 switches the term off statically).

    Example:
        >>> from jaxsample.diffusion import guidance
        >>> prior = guidance.ring_of_gaussians(8)
        >>> term = guidance.classifier_guidance(prior.classifier(guidance.VPSchedule(), 0), 10.0)
        >>> term.active
        True
    """
    check_callable("log_prob_fn", log_prob_fn)
    scale = check_hyperparameter("scale", scale, positive=False)
    return ClassifierGuidance(log_prob_fn, scale, _active(scale))


def tag(time_logits_fn: Callable, omega) -> TAG:
    """Temporal alignment guidance: adds ω·∇ₓ log p_φ(t_k | x) at step k; reports the time gap.

    The field is ``jax.grad`` of ``log_softmax(time_logits_fn(x))[k − 1]``, the time classifier's
    log-posterior of the current grid time. The samplers record the time gap |t̂(x) − t_k|,
    t̂ = Σ_τ τ·p_φ(τ | x), at every step in ``info.time_gap`` — also for ω = 0, which evaluates
    only the logits (a diagnostic; the trajectory is bitwise the unguided one).

    Args:
        time_logits_fn: ``logits(x) -> (N,)`` over the sampler's grid :func:`time_grid`
            (``num_steps`` classes): a trained :class:`TimePredictor` or the exact
            :meth:`GaussianMixturePrior.time_predictor`.
        omega: ω ≥ 0 (traced; a concrete 0 is a static branch).

    Example:
        >>> from jaxsample.diffusion import guidance
        >>> prior = guidance.ring_of_gaussians(8, dim=2)
        >>> schedule = guidance.VPSchedule()
        >>> predictor = prior.time_predictor(schedule, guidance.time_grid(50))
        >>> guidance.tag(predictor, 1.0).active, guidance.tag(predictor, 0.0).active
        (True, False)
    """
    check_callable("time_logits_fn", time_logits_fn)
    omega = check_hyperparameter("omega", omega, positive=False)
    return TAG(time_logits_fn, omega, _active(omega))


def dps_guidance(terminal_cost: Callable, weight, *, normalize: bool = True) -> DPSGuidance:
    """Diffusion posterior sampling (Chung et al. 2023) by a terminal cost c.

    Every step's new state moves by −ζ_k·∇ₓ c(x̂₀(x)) (DPS's Algorithm 1), the gradient taken
    through Tweedie's estimate and the ε-predictor (one VJP per step); with ``normalize`` (DPS's
    choice) ζ_k = ζ'/√c(x̂₀), else ζ_k = ζ'. It enters the sampler as the score-space field
    g = −(ζ_k/κ)·∇ₓ c, κ the step's :attr:`GuidanceStep.state_gain`, so it composes with the other
    terms (``info.guidance_norm`` is ‖g‖).

    Args:
        terminal_cost: ``c(x) -> scalar`` ≥ 0 for one sample (e.g. :func:`fiber_cost`; for a
            measurement y = H(x₀) + noise, c = ‖y − H(x)‖²).
        weight: ζ' ≥ 0 (traced; a concrete 0 is a static branch).
        normalize: divide by √c (DPS's step-size rule).
    """
    check_callable("terminal_cost", terminal_cost)
    weight = check_hyperparameter("weight", weight, positive=False)
    return DPSGuidance(terminal_cost, weight, _active(weight), bool(normalize))


class FiberCost(eqx.Module):
    """c(x) = ‖φ(x) − φ(x_q)‖², the fiber loss of a feature map; see :func:`fiber_cost`."""

    feature_fn: Callable
    target: jax.Array

    def __call__(self, x):
        diff = self.feature_fn(x) - self.target.astype(x.dtype)
        return jnp.sum(diff * diff)


def fiber_cost(feature_fn: Callable, query) -> FiberCost:
    """The fiber loss ‖φ(x) − φ(x_q)‖² of a feature extractor φ at a query x_q.

    Its zero set is the fiber {x : φ(x) = φ(x_q)}: the inputs φ cannot tell apart from x_q. Use
    it as :class:`NDTM`'s terminal cost or in :func:`fiber_guidance`.

    Args:
        feature_fn: φ(x) for one sample (any output shape; an equinox module is traced).
        query: x_q, one sample (the shape of one row of the sampler's batch).

    Example:
        >>> import jax.numpy as jnp
        >>> cost = fiber_cost(lambda x: x[:2], jnp.array([1.0, 2.0, 3.0]))
        >>> float(cost(jnp.array([1.0, 0.0, -5.0])))
        4.0
    """
    check_callable("feature_fn", feature_fn)
    query = check_array("query", query, finite=True)
    return FiberCost(feature_fn, jnp.asarray(feature_fn(query)))


def fiber_guidance(feature_fn: Callable, query, weight, *, normalize: bool = True) -> DPSGuidance:
    """DPS-style fiber guidance: :func:`dps_guidance` with :func:`fiber_cost` (φ, x_q).

    Example:
        >>> import jax.numpy as jnp
        >>> term = fiber_guidance(lambda x: x[:2], jnp.array([1.0, 0.0, 0.0]), 0.1)
        >>> term.needs_pullback, float(term.terminal_cost(jnp.array([1.0, 1.0, 5.0])))
        (True, 1.0)
    """
    return dps_guidance(fiber_cost(feature_fn, query), weight, normalize=normalize)


# ------------------------------------------------------------------------------------- infos


class GuidanceInfo(NamedTuple):
    """What :func:`sample` reports with the :class:`DDIM` and :class:`DDPM` solvers.

    Rows of the per-step arrays are in the order the steps run (first row: t_N = 1).

    Attributes:
        times: ``(N,)`` the step times t_N, …, t_1.
        guidance_norm: ``(N, B, J)`` ‖g_j‖ of each of the J guidance terms (score units; 0 for a
            term switched off statically).
        time_gap: ``(N, B, P)`` |t̂(x) − t_k| for each of the P :func:`tag` terms (before the
            step, at the state the field is evaluated at).
        num_eps_evals: int32, ε-evaluations per sample (forward calls).
        num_vjps: int32, vector–Jacobian products through ε per sample (DPS terms).
        nonfinite: ``(B,)`` bool, a step of that sample had a non-finite prediction, field or
            state and was skipped (the sample kept its previous state): not trustworthy.
    """

    times: jax.Array
    guidance_norm: jax.Array
    time_gap: jax.Array
    num_eps_evals: jax.Array
    num_vjps: jax.Array
    nonfinite: jax.Array


class NDTMInfo(NamedTuple):
    """What :func:`sample` reports with the :class:`NDTM` solver: :class:`GuidanceInfo`'s fields
    and the control's.

    Attributes:
        times, guidance_norm, time_gap, num_eps_evals, num_vjps: as in :class:`GuidanceInfo`
            (the counts include the inner optimisation: (M + 1) forward calls and M VJPs per step
            for ``init="zero"``, one forward call more for the other inits).
        terminal_cost: ``(N, B)`` c(x̂₀(x_t + u)) at the control the step used (unweighted).
        score_penalty: ``(N, B)`` ‖ε(x_t) − ε(x_t + u)‖² (unweighted).
        control_norm: ``(N, B)`` ‖u‖.
        final_cost: ``(B,)`` c(x₀) of the returned samples (for :func:`fiber_cost`: the squared
            fiber residual).
        nonfinite: ``(B,)`` bool, as in :class:`GuidanceInfo`, or a cost or control gradient of
            that sample was not finite (its gradient was dropped for that inner step).
    """

    times: jax.Array
    guidance_norm: jax.Array
    time_gap: jax.Array
    num_eps_evals: jax.Array
    num_vjps: jax.Array
    terminal_cost: jax.Array
    score_penalty: jax.Array
    control_norm: jax.Array
    final_cost: jax.Array
    nonfinite: jax.Array


# ------------------------------------------------------------------------------------ checks


def _as_terms(guidance) -> tuple[GuidanceTerm, ...]:
    if guidance is None:
        return ()
    terms = (guidance,) if isinstance(guidance, GuidanceTerm) else guidance
    if not isinstance(terms, Sequence) or not all(isinstance(g, GuidanceTerm) for g in terms):
        raise TypeError("guidance must be None, a guidance term (classifier_guidance, tag, "
                        "dps_guidance, fiber_guidance) or a sequence of them, got "
                        f"{type(guidance).__name__}")
    return tuple(terms)


def _check_sampler(key, eps_fn, schedule, x_T, num_steps, guidance, chunk_size):
    key = check_key("key", key)
    check_callable("eps_fn", eps_fn)
    if not isinstance(schedule, VPSchedule):
        raise TypeError(f"schedule must be a VPSchedule, got {type(schedule).__name__}")
    x_T = check_array("x_T", x_T, finite=True)
    if x_T.ndim < 2 or x_T.shape[0] < 1:
        raise ValueError(f"x_T must have shape (batch, ...) with batch >= 1, got {x_T.shape}")
    num_steps = check_int("num_steps", num_steps, 1)
    chunk_size = check_chunk_size(chunk_size)
    terms = _as_terms(guidance)
    event, dtype = x_T.shape[1:], x_T.dtype
    out = _probe("eps_fn", eps_fn, jax.ShapeDtypeStruct(event, dtype),
                 jax.ShapeDtypeStruct((), dtype))
    if getattr(out, "shape", None) != event:
        raise ValueError(f"eps_fn(x, t) must return the shape of one sample, {event}, got "
                         f"{getattr(out, 'shape', type(out).__name__)}")
    if out.dtype != dtype:
        raise TypeError(f"eps_fn(x, t) must return the dtype of x_T, {dtype}, got {out.dtype}")
    for term in terms:
        term.check(event, dtype, num_steps)
    return key, x_T, num_steps, terms, chunk_size


# ------------------------------------------------------------------------------------ engine


# the direction of Adam; the default NDTM step is −λ_i times it (optax.adam(λ_i) exactly), with the
# learning rate traced. One object, so the default compiles once.
_ADAM_DIRECTION = optax.scale_by_adam()


class _Control(eqx.Module):
    """NDTM's per-step control optimisation: structure static, floats traced."""

    terminal_cost: Callable
    terminal_weight: Any
    learning_rate: Any  # None with a user optimiser (its own learning rate)
    optimizer: Any = eqx.field(static=True)  # None: Adam at learning_rate
    inner_steps: int = eqx.field(static=True)
    weights: tuple[str, str] = eqx.field(static=True)
    init: str = eqx.field(static=True)
    learning_rate_schedule: str = eqx.field(static=True)


def _sum_event(a):
    return jnp.sum(a, axis=tuple(range(1, a.ndim)))


def _all_finite(a):
    return jnp.all(jnp.isfinite(a), axis=tuple(range(1, a.ndim)))


def _rows(flags, like):
    """Per-sample flags ``(b,)`` broadcastable against ``like`` ``(b, ...)``."""
    return flags.reshape((-1,) + (1,) * (like.ndim - 1))


def _guided(eps_fn, terms, x, step_consts):
    """ε, ε̃ = ε − σ Σ g, (J,) field norms and (P,) time gaps for one sample."""
    t, index, alpha_t, sigma, grid, gain = step_consts
    if any(term.active and term.needs_pullback for term in terms):
        eps, pullback = jax.vjp(lambda y: eps_fn(y, t), x)

        def pull(v):
            return pullback(v)[0]
    else:
        eps, pull = eps_fn(x, t), None
    step = GuidanceStep(x, t, index, alpha_t, sigma, eps, grid, gain, pull)
    total, norms, gaps = None, [], []
    for term in terms:
        field, gap = term.evaluate(step)
        if field is None:
            norms.append(jnp.zeros((), x.dtype))
        else:
            field = field.astype(x.dtype)
            total = field if total is None else total + field
            norms.append(jnp.sqrt(jnp.sum(field * field)))
        if gap is not None:
            gaps.append(gap.astype(x.dtype))
    guided = eps if total is None else eps - sigma * total
    stack = lambda values: jnp.stack(values) if values else jnp.zeros((0,), x.dtype)  # noqa: E731
    return eps, guided, stack(norms), stack(gaps)


def _optimise_control(eps_fn, control, x, u0, step_consts, weights, step_scale):
    """M optimiser steps on NDTM's per-sample cost for a block of samples; returns u and flags.

    Each step's update is the optimiser's, times ``step_scale``: −λ_i on Adam's direction for the
    default (``optax.adam(λ_i)`` exactly), the learning-rate schedule's factor for a user's
    optimiser.

    The gradient is assembled from one VJP through ε and Tweedie's estimate per inner step:
    ∇_u c = J_{(ε, x̂₀)}ᵀ (2 w_score (ε(x + u) − ε(x)), w_term ∇c(x̂₀)) + 2 w_control u. The score
    residual is exactly 0 where u = 0 (ε(x + 0) = ε(x) by definition, whatever the round-off of
    two evaluations), so with w_term = 0 and a zero start every gradient, hence every Adam update,
    is exactly 0.
    """
    t, _, alpha_t, _, _, _ = step_consts
    w_term, w_score, w_control = weights
    eps_block = jax.vmap(lambda y: eps_fn(y, t))
    zero_init = control.init == "zero"
    # zero init: ε(x_t) is the first inner step's own prediction at u = 0 (no extra call)
    reference = jnp.zeros_like(x) if zero_init else eps_block(x)

    def forward(u):
        x_c = x + u
        eps = eps_block(x_c)
        return eps, kernels.tweedie(x_c, eps, alpha_t)

    optimizer = _ADAM_DIRECTION if control.optimizer is None else control.optimizer

    def inner(i, carry):
        u, state, reference, bad = carry
        (eps, x0), pullback = jax.vjp(forward, u)
        if zero_init:
            reference = jnp.where(i == 0, eps, reference)
        terminal, cost_grad = jax.vmap(jax.value_and_grad(control.terminal_cost))(x0)
        at_start = ~jnp.any(u != 0, axis=tuple(range(1, u.ndim)))
        residual = jnp.where(_rows(at_start, eps), jnp.zeros_like(eps), eps - reference)
        (grad,) = pullback((2 * w_score * residual, w_term * cost_grad.astype(x.dtype)))
        grad = grad + 2 * w_control * u
        per_sample = (w_term * terminal.astype(x.dtype) + w_score * _sum_event(residual ** 2)
                      + w_control * _sum_event(u * u))
        ok = jnp.isfinite(per_sample) & _all_finite(grad)
        grad = jnp.where(_rows(ok, u), grad, jnp.zeros_like(grad))
        with jax.numpy_dtype_promotion("standard"):   # optax: decay ** int32 count
            updates, state = optimizer.update(grad, state, u)
        updates = jax.tree.map(lambda v: step_scale * v, updates)
        return optax.apply_updates(u, updates), state, reference, bad | ~ok

    bad = jnp.zeros(x.shape[0], bool)
    u, _, reference, bad = jax.lax.fori_loop(
        0, control.inner_steps, inner, (u0, optimizer.init(u0), reference, bad))
    return u, reference, bad


@eqx.filter_jit
def _run(key, eps_fn, schedule, x_T, terms, control, rule, eta, num_steps, chunk_size):
    with jax.named_scope("guided_sample"):
        dtype = x_T.dtype
        grid = jnp.arange(1, num_steps + 1, dtype=dtype) / num_steps
        k = jnp.arange(num_steps, 0, -1, dtype=jnp.int32)
        t = k.astype(dtype) / num_steps
        alpha_t = schedule.alpha_bar(t)
        alpha_s = schedule.alpha_bar((k - 1).astype(dtype) / num_steps)
        eta = jnp.asarray(eta, dtype)
        if rule[0] == "ddim":
            eps_coefficient = kernels.ddim_eps_coefficient(alpha_t, alpha_s, eta)
        else:
            eps_coefficient = kernels.ddpm_eps_coefficient(alpha_t, alpha_s)
        gains = -jnp.sqrt(1 - alpha_t) * eps_coefficient
        if control is not None:
            score_w, control_w = kernels.ndtm_weights(*control.weights, alpha_t, alpha_s, eta)
            if control.learning_rate_schedule == "linear":
                factor = 1 - jnp.arange(num_steps, dtype=dtype) / num_steps
            else:
                factor = jnp.ones((num_steps,), dtype)
            if control.optimizer is None:  # Adam at λ_i = λ·factor_i: scale its direction by −λ_i
                scales = -(jnp.asarray(control.learning_rate, dtype) * factor)
            else:
                scales = factor
            per_step = (score_w, control_w, scales)
            random_init = control.init in ("random", "causal-random")
            causal = control.init.startswith("causal")
        else:
            per_step = None
        first_step = jnp.arange(num_steps) == 0

        def body(carry, inputs):
            x, bad, u_prev = carry
            k_i, t_i, a_t, a_s, gain, step_key, first, ndtm = inputs
            consts = (t_i, k_i - 1, a_t, jnp.sqrt(1 - a_t), grid, gain)
            noise = jax.random.normal(step_key, x.shape, dtype)
            if control is not None:
                if random_init:
                    fresh = jax.random.normal(jax.random.fold_in(step_key, 1), x.shape, dtype)
                else:
                    fresh = jnp.zeros_like(x)
                u_start = jnp.where(first, fresh, u_prev) if causal else fresh
            else:
                u_start = None

            def block(x, noise, u_start):
                if control is None:
                    x_c, u, reference, cost_bad = x, None, None, jnp.zeros(x.shape[0], bool)
                else:
                    score_w_i, control_w_i, lr_i = ndtm
                    weights = (jnp.asarray(control.terminal_weight, dtype), score_w_i,
                               control_w_i)
                    u, reference, cost_bad = _optimise_control(eps_fn, control, x, u_start,
                                                               consts, weights, lr_i)
                    x_c = x + u
                eps, guided, norms, gaps = jax.vmap(
                    lambda y: _guided(eps_fn, terms, y, consts))(x_c)
                if rule[0] == "ddim":
                    x_new = kernels.ddim_update(x_c, guided, a_t, a_s, eta, noise)
                else:
                    x_new = kernels.ddpm_update(x_c, guided, a_t, a_s, noise, rule[1], k_i == 1)
                ok = _all_finite(x_new) & _all_finite(guided)
                x_new = jnp.where(_rows(ok, x), x_new, x)
                # no zero-size outputs through the row map (lax.map cannot reshape them)
                stats = {name: value for name, value in (("norms", norms), ("gaps", gaps))
                         if value.shape[-1]}
                if control is not None:
                    terminal = jax.vmap(control.terminal_cost)(kernels.tweedie(x_c, eps, a_t))
                    stats.update(terminal=terminal, score=_sum_event((reference - eps) ** 2),
                                 control=jnp.sqrt(_sum_event(u * u)))
                    u = jnp.where(_rows(ok, u), u, u_start)
                return x_new, ~ok | cost_bad, u, stats

            x_new, step_bad, u, stats = chunking.map_rows(block, x, noise, u_start,
                                                          chunk_size=chunk_size)
            return (x_new, bad | step_bad, u), stats

        u0 = None if control is None else jnp.zeros_like(x_T)
        inputs = (k, t, alpha_t, alpha_s, gains, jax.random.split(key, num_steps), first_step,
                  per_step)
        (x0, bad, _), stats = jax.lax.scan(body, (x_T, jnp.zeros(x_T.shape[0], bool), u0), inputs)

        num_vjps = num_steps * int(any(term.active and term.needs_pullback for term in terms))
        num_evals = num_steps
        if control is not None:
            extra = control.inner_steps + (0 if control.init == "zero" else 1)
            num_evals += num_steps * extra
            num_vjps += num_steps * control.inner_steps
        empty = jnp.zeros((num_steps, x_T.shape[0], 0), dtype)
        common = dict(times=t, guidance_norm=stats.get("norms", empty),
                      time_gap=stats.get("gaps", empty),
                      num_eps_evals=jnp.asarray(num_evals, jnp.int32),
                      num_vjps=jnp.asarray(num_vjps, jnp.int32))
        if control is None:
            return x0, GuidanceInfo(**common, nonfinite=bad)
        final = jax.vmap(control.terminal_cost)(x0).astype(dtype)
        bad = bad | ~jnp.isfinite(final)
        return x0, NDTMInfo(**common, terminal_cost=stats["terminal"].astype(dtype),
                            score_penalty=stats["score"], control_norm=stats["control"],
                            final_cost=final, nonfinite=bad)


# ---------------------------------------------------------------------------------- solvers


class DDIM(eqx.Module):
    """The DDIM step (Song, Meng & Ermon 2021), a solver of :func:`sample`.

    With t_k = k/N and the guided prediction ε̃ = ε(x, t_k) − σ_k Σ_j g_j(x, t_k) (the terms of
    ``guidance``), each step is

    .. math::  x_{k−1} = \\sqrt{ᾱ_{k−1}}\\,\\frac{x_k − σ_k ε̃}{\\sqrt{ᾱ_k}} + c_1 ξ + c_2 ε̃,
               \\quad c_1 = η\\sqrt{\\frac{(1 − ᾱ_k/ᾱ_{k−1})(1 − ᾱ_{k−1})}{1 − ᾱ_k}},
               \\quad c_2 = \\sqrt{1 − ᾱ_{k−1} − c_1^2},

    ξ ~ N(0, I). The last step returns x̂₀. η = 0 is deterministic (the probability-flow ODE's
    exponential-integrator step); η = 1 has the law of DDPM's ancestral step with the posterior
    variance (:class:`DDPM`).

    Attributes:
        eta: η ∈ [0, 1] (traced).
    """

    eta: Any = 0.0


class DDPM(eqx.Module):
    """Ancestral DDPM sampling (Ho, Jain & Abbeel 2020), a solver of :func:`sample`.

    With β_k = 1 − ᾱ_k/ᾱ_{k−1} and ε̃ as in :class:`DDIM`,

    .. math::  x_{k−1} = \\frac{1}{\\sqrt{1 − β_k}}\\Big(x_k − \\frac{β_k}{σ_k}\\,ε̃\\Big) + s_k ξ,

    with s_k² = β_k(1 − ᾱ_{k−1})/(1 − ᾱ_k) (``"posterior"``: the same law as DDIM with η = 1) or
    s_k² = β_k (``"beta"``, no noise on the last step).

    Attributes:
        variance: ``"posterior"`` or ``"beta"``.
    """

    variance: str = eqx.field(static=True, default="posterior")


class NDTM(eqx.Module):
    """NDTM: DDIM steps with a control optimised before every step, a solver of :func:`sample`.

    At step k (i = N − k steps done) the control u starts at 0 (``"zero"``), at N(0, I) draws
    (``"random"``), or at the previous step's control (``"causal-zero"``/``"causal-random"``: 0
    or N(0, I) at the first step) and takes M = ``num_steps`` steps of a fresh ``optimizer``
    state on the sum over the batch of the per-sample costs

    .. math::  c(u) = w_{term}\\,c\\big(x̂_0(x_k + u)\\big)
                    + w_{score}\\,‖ε(x_k) − ε(x_k + u)‖² + w_{control}\\,‖u‖²

    (per-sample costs are independent, and Adam acts per coordinate, so this is M steps of a
    separate Adam per sample). Each update is scaled by the learning-rate schedule: the default
    optimiser is Adam with learning rate λ_i = λ·(1 − i/N) (``"linear"``) or λ (``"constant"``);
    a given ``optimizer`` carries its own learning rate and its updates are multiplied by
    (1 − i/N) or 1. Then the DDIM step of :class:`DDIM` is taken from x_k + u (with the
    ``guidance`` terms, if any, evaluated there). w_score and w_control follow ``weights``
    (:func:`jaxsample.kernels.guidance.ndtm_weights`: ``"zero"``, ``"ones"``, ``"ddpm"``,
    ``"ddim"``; one scheme for both or a ``(score, control)`` pair). x̂₀ is not clipped (clip
    inside the cost for images). The reference implementation's settings for image inverse
    problems: 50 steps, M = 5, λ = 0.01 (linear), η = 0.7, w_term = 50, ``"ddim"`` weights;
    Adam moves every coordinate by about λ per inner step, so set λ to the scale of the data
    (the default 0.1 suits data of unit scale).

    With ``terminal_weight = 0`` and ``init="zero"`` every control gradient is exactly 0, the
    update is exactly 0 and the result is bitwise the :class:`DDIM` solver's with the same key.

    Cost per step: M + 1 ε-evaluations and M VJPs through ε and the cost (one evaluation more for
    the non-zero inits), counted in ``info``.

    Attributes:
        terminal_cost: ``c(x) -> scalar`` for one sample (e.g. :func:`fiber_cost`).
        optimizer: an ``optax.GradientTransformation`` for the control (with its own learning
            rate); default ``None``: Adam at ``learning_rate``.
        num_steps: M ≥ 1 optimiser steps per diffusion step.
        learning_rate: λ > 0 of the default Adam (traced; default 0.1); leave it ``None`` when
            passing ``optimizer``.
        terminal_weight: w_term ≥ 0 (traced).
        weights: weight scheme(s) of the score and control penalties.
        init: ``"zero"``, ``"random"``, ``"causal-zero"`` or ``"causal-random"``.
        learning_rate_schedule: ``"linear"`` or ``"constant"``.
        eta: η of the DDIM step (traced).
    """

    terminal_cost: Callable
    optimizer: Any = eqx.field(static=True, default=None)
    num_steps: int = eqx.field(static=True, default=5)
    learning_rate: Any = None
    terminal_weight: Any = 50.0
    weights: Any = eqx.field(static=True, default="ddim")
    init: str = eqx.field(static=True, default="zero")
    learning_rate_schedule: str = eqx.field(static=True, default="linear")
    eta: Any = 0.0


def _ndtm_control(solver: NDTM, x_T) -> _Control:
    check_callable("solver.terminal_cost", solver.terminal_cost)
    _check_scalar_fn("terminal_cost", solver.terminal_cost,
                     jax.ShapeDtypeStruct(x_T.shape[1:], x_T.dtype))
    inner_steps = check_int("solver.num_steps", solver.num_steps, 1)
    if solver.optimizer is None:
        learning_rate = check_hyperparameter(
            "solver.learning_rate", 0.1 if solver.learning_rate is None else solver.learning_rate)
    elif not isinstance(solver.optimizer, optax.GradientTransformation):
        raise TypeError("solver.optimizer must be an optax.GradientTransformation, got "
                        f"{type(solver.optimizer).__name__}")
    elif solver.learning_rate is not None:
        raise ValueError("solver.learning_rate sets the default Adam's rate; with an optimizer, "
                         "put the learning rate inside it (e.g. optax.adam(0.05))")
    else:
        learning_rate = None
    terminal_weight = check_hyperparameter("solver.terminal_weight", solver.terminal_weight,
                                           positive=False)
    weights = solver.weights
    if isinstance(weights, str):
        weights = (weights, weights)
    if not isinstance(weights, tuple) or len(weights) != 2:
        raise TypeError(f"solver.weights must be a scheme name or a (score, control) pair of "
                        f"them, got {weights!r}")
    weights = tuple(check_choice("solver.weights", w, WEIGHT_SCHEMES) for w in weights)
    init = check_choice("solver.init", solver.init, INITS)
    schedule = check_choice("solver.learning_rate_schedule", solver.learning_rate_schedule,
                            LEARNING_RATE_SCHEDULES)
    return _Control(solver.terminal_cost, terminal_weight, learning_rate, solver.optimizer,
                    inner_steps, weights, init, schedule)


def sample(key, eps_fn: Callable, schedule: VPSchedule, x_T, *, num_steps: int, solver=None,
           guidance=None, chunk_size: int | None = None
           ) -> tuple[jax.Array, GuidanceInfo | NDTMInfo]:
    """Guided reverse VP diffusion from x_T at t = 1 to t = 0 in ``num_steps`` steps.

    One engine for every solver (:class:`DDIM`, :class:`DDPM`, :class:`NDTM`; see each for its
    update) and every guidance term. ε is evaluated as ``jax.vmap(eps_fn)`` over the batch
    (``chunk_size`` samples at a time when given: the memory of one step is then that of
    ``chunk_size`` samples; NDTM's control optimisation runs per block too), the steps are a
    ``lax.scan``. η, the schedule's floats, NDTM's learning rate and weight and the terms' scales
    are traced: one compilation per (eps_fn, solver and term structure, shapes, ``num_steps``)
    serves every value.

    Args:
        key: PRNG key (one noise draw per step, the same stream for every guidance and solver).
        eps_fn: ``eps_fn(x, t) -> ε`` for one sample x (the shape of one row of ``x_T``) at a
            scalar t ∈ (0, 1], dtype of ``x_T`` (a network, or
            :meth:`GaussianMixturePrior.eps_model`).
        schedule: the :class:`VPSchedule` the predictor was trained with.
        x_T: ``(B, ...)`` starting states at t = 1 (N(0, I) draws for a standard run); their dtype
            is the working dtype.
        num_steps: N ≥ 1 diffusion steps.
        solver: :class:`DDIM` (default ``DDIM(eta=0.0)``), :class:`DDPM` or :class:`NDTM`.
        guidance: None, a term or a sequence of terms (:func:`classifier_guidance`, :func:`tag`,
            :func:`dps_guidance`, :func:`fiber_guidance`).
        chunk_size: samples per block of the batch (None: the whole batch at once).

    Returns:
        ``(x_0, info)``: ``(B, ...)`` samples and a :class:`GuidanceInfo` (:class:`NDTMInfo` for
        the NDTM solver).

    Raises:
        TypeError / ValueError: naming the argument, for bad arguments, an ``eps_fn`` whose output
            is not one sample's shape and dtype, or a guidance callable of the wrong shape.

    Example (strong classifier guidance towards component 0 of a ring, with TAG):

        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import guidance
        >>> prior = guidance.ring_of_gaussians(8, dim=2)
        >>> schedule = guidance.VPSchedule("linear")
        >>> terms = [guidance.classifier_guidance(prior.classifier(schedule, 0), 10.0),
        ...          guidance.tag(prior.time_predictor(schedule, guidance.time_grid(30)), 1.0)]
        >>> x_T = jax.random.normal(jax.random.key(0), (128, 2))
        >>> x0, info = guidance.sample(jax.random.key(1), prior.eps_model(schedule), schedule,
        ...                            x_T, num_steps=30, solver=guidance.DDIM(eta=0.0),
        ...                            guidance=terms)
        >>> info.guidance_norm.shape, info.time_gap.shape, bool(info.nonfinite.any())
        ((30, 128, 2), (30, 128, 1), False)
        >>> bool(jnp.mean(jnp.linalg.norm(x0 - prior.means[:1], axis=1) < 0.3) > 0.9)
        True

    NDTM on a fiber (the control pulls every sample onto ``{x : x[:2] = (1, 0)}``):

        >>> prior = guidance.ring_of_gaussians(4, dim=3)
        >>> schedule = guidance.VPSchedule()
        >>> cost = guidance.fiber_cost(lambda x: x[:2], jnp.array([1.0, 0.0, 0.0]))
        >>> x0, info = guidance.sample(jax.random.key(0), prior.eps_model(schedule), schedule,
        ...                            jax.random.normal(jax.random.key(1), (32, 3)),
        ...                            num_steps=20, solver=guidance.NDTM(cost))
        >>> int(info.num_eps_evals), int(info.num_vjps)
        (120, 100)
        >>> float(jnp.median(jnp.sqrt(info.final_cost))) < 0.2      # near the fiber
        True
    """
    key, x_T, num_steps, terms, chunk_size = _check_sampler(key, eps_fn, schedule, x_T,
                                                            num_steps, guidance, chunk_size)
    solver = DDIM() if solver is None else solver
    if isinstance(solver, DDIM):
        eta = check_hyperparameter("solver.eta", solver.eta, positive=False, maximum=1.0)
        return _run(key, eps_fn, schedule, x_T, terms, None, ("ddim", None), eta, num_steps,
                    chunk_size)
    if isinstance(solver, DDPM):
        variance = check_choice("solver.variance", solver.variance, VARIANCES)
        return _run(key, eps_fn, schedule, x_T, terms, None, ("ddpm", variance),
                    check_hyperparameter("eta", 0.0, positive=False), num_steps, chunk_size)
    if isinstance(solver, NDTM):
        control = _ndtm_control(solver, x_T)
        eta = check_hyperparameter("solver.eta", solver.eta, positive=False, maximum=1.0)
        return _run(key, eps_fn, schedule, x_T, terms, control, ("ddim", None), eta, num_steps,
                    chunk_size)
    raise TypeError("solver must be guidance.DDIM(eta), guidance.DDPM(variance) or "
                    f"guidance.NDTM(terminal_cost, ...), got {type(solver).__name__}")
