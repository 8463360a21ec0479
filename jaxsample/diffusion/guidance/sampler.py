"""The one public entry point of guided VP sampling: :func:`sample`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_chunk_size,
    check_fn_output,
    check_hyperparameter,
    check_int,
    check_key,
    check_progress,
    is_concrete,
)
from jaxsample._training import check_optimizer
from jaxsample.diffusion._vp import VPSchedule
from jaxsample.diffusion.guidance._engine import Control, GuidanceInfo, NDTMInfo, run
from jaxsample.diffusion.guidance._models import as_epsilon, check_model_options
from jaxsample.diffusion.guidance._validate import check_scalar_fn
from jaxsample.diffusion.guidance.solvers import (
    DDIM,
    DDPM,
    INITS,
    LEARNING_RATE_SCHEDULES,
    NDTM,
    WEIGHT_SCHEMES,
)
from jaxsample.diffusion.guidance.terms import TAG, FiberCost, GuidanceTerm
from jaxsample.kernels.guidance import VARIANCES

__all__ = ["sample"]

DDPM_VARIANCES = ("posterior", "beta")


def _as_terms(guidance) -> tuple[GuidanceTerm, ...]:
    if guidance is None:
        return ()
    terms = (guidance,) if isinstance(guidance, GuidanceTerm) else guidance
    if not isinstance(terms, Sequence) or not all(isinstance(g, GuidanceTerm) for g in terms):
        raise TypeError("guidance must be None, a guidance term (ClassifierGuidance, TAG, "
                        "DPSGuidance) or a sequence of them, got "
                        f"{type(guidance).__name__}")
    return tuple(terms)


def _check_sampler(key, eps_fn, schedule, x_T, num_steps, guidance, chunk_size, prediction,
                   timesteps):
    key = check_key("key", key)
    check_callable("eps_fn", eps_fn)
    if not isinstance(schedule, VPSchedule):
        raise TypeError(f"schedule must be a VPSchedule, got {type(schedule).__name__}")
    x_T = check_array("x_T", x_T, finite=True)
    if x_T.ndim < 2 or x_T.shape[0] < 1:
        raise ValueError(f"x_T must have shape (batch, ...) with batch >= 1, got {x_T.shape}")
    num_steps = check_int("num_steps", num_steps, 1)
    prediction, timesteps = check_model_options(prediction, timesteps, num_steps)
    eps_fn = as_epsilon(eps_fn, schedule, prediction, timesteps)
    chunk_size = check_chunk_size(chunk_size)
    terms = _as_terms(guidance)
    event, dtype = x_T.shape[1:], x_T.dtype
    # eps_fn(x, t) on one sample: the shape and dtype of one row of x_T
    check_fn_output("eps_fn", eps_fn, (jax.ShapeDtypeStruct(event, dtype),
                                      jax.ShapeDtypeStruct((), dtype)), event, dtype=dtype)
    for term in terms:
        term.check(event, dtype, num_steps)
    _check_first_outputs(eps_fn, terms, x_T)
    return key, eps_fn, x_T, num_steps, terms, chunk_size


def _check_first_outputs(eps_fn, terms, x_T):
    """The first evaluation, eagerly: ε(x_T[0], 1) and every TAG term's logits at x_T[0] must be
    finite (a network that overflows at the start state, or a wrong time convention, fails here
    with its argument's name). Under tracing nothing runs: ``info.nonfinite`` flags it."""
    if not is_concrete(x_T) or not is_concrete(jax.tree.leaves(eps_fn)):
        return
    x, t = x_T[0], jnp.ones((), x_T.dtype)
    eps = eps_fn(x, t)
    if is_concrete(eps) and not bool(jnp.all(jnp.isfinite(eps))):
        raise ValueError("eps_fn must return a finite noise prediction; at the first state "
                         f"x_T[0] and t = 1 it returned {int(jnp.sum(~jnp.isfinite(eps)))} "
                         "non-finite values (check the model's time convention: t in (0, 1], "
                         "and its input scaling)")
    for term in terms:
        if isinstance(term, TAG):
            logits = term.time_logits_fn(x)
            if is_concrete(logits) and not bool(jnp.all(jnp.isfinite(logits))):
                raise ValueError("time_logits_fn must return finite logits; at x_T[0] it "
                                 f"returned {int(jnp.sum(~jnp.isfinite(logits)))} non-finite "
                                 "values")


def _warn_if_nonfinite(info):
    """One eager message for what ``info.nonfinite`` flags (nothing under tracing)."""
    if is_concrete(info.nonfinite) and bool(jnp.any(info.nonfinite)):
        count = int(jnp.sum(info.nonfinite))
        warnings.warn(f"guidance.sample: {count} of {info.nonfinite.shape[0]} samples met a "
                      "non-finite prediction, guidance field, state or cost and kept their "
                      "previous state for those steps (info.nonfinite); they are not "
                      "trustworthy", RuntimeWarning, stacklevel=3)


def _check_clip(clip):
    if clip is None:
        return None
    try:
        lo, hi = (float(v) for v in clip)
    except (TypeError, ValueError) as err:
        raise TypeError(f"solver.clip_x0 must be None or a (lo, hi) pair of numbers, got "
                        f"{clip!r}") from err
    if not lo < hi:
        raise ValueError(f"solver.clip_x0 must have lo < hi, got {clip!r}")
    return lo, hi


def _ndtm_control(solver: NDTM, x_T) -> Control:
    check_callable("solver.terminal_cost", solver.terminal_cost)
    check_scalar_fn("terminal_cost", solver.terminal_cost,
                    jax.ShapeDtypeStruct(x_T.shape[1:], x_T.dtype))
    per_step_target = isinstance(solver.terminal_cost, FiberCost) and \
        solver.terminal_cost.per_step_target
    if per_step_target and solver.terminal_cost.query.shape != x_T.shape[1:]:
        raise ValueError(f"solver.terminal_cost: the fiber query must have the shape of one "
                         f"sample, {x_T.shape[1:]}, got {solver.terminal_cost.query.shape}")
    inner_steps = check_int("solver.num_steps", solver.num_steps, 1)
    if check_optimizer("solver.optimizer", solver.optimizer) is None:
        learning_rate = check_hyperparameter(
            "solver.learning_rate", 0.1 if solver.learning_rate is None else solver.learning_rate)
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
    if callable(solver.control_scale):
        # γ(t): a scalar time to a scalar
        check_fn_output("solver.control_scale", solver.control_scale,
                        jax.ShapeDtypeStruct((), x_T.dtype), ())
        control_scale = solver.control_scale
    else:
        control_scale = check_hyperparameter("solver.control_scale", solver.control_scale,
                                             positive=False)
    max_grad_norm = None if solver.max_grad_norm is None else check_hyperparameter(
        "solver.max_grad_norm", solver.max_grad_norm)
    return Control(solver.terminal_cost, terminal_weight, learning_rate, control_scale,
                   max_grad_norm, solver.optimizer, inner_steps, weights, init, schedule,
                   per_step_target)


def sample(key, eps_fn, schedule: VPSchedule, x_T, *, num_steps: int, solver=None,
           guidance=None, prediction: str = "epsilon", timesteps: int | None = None,
           chunk_size: int | None = None, progress=None
           ) -> tuple[jax.Array, GuidanceInfo | NDTMInfo]:
    """Guided reverse VP diffusion from x_T at t = 1 to t = 0 in ``num_steps`` steps.

    One engine for every solver (:class:`DDIM`, :class:`DDPM`, :class:`NDTM`; see each for its
    update) and every guidance term (:class:`ClassifierGuidance`, :class:`TAG`,
    :class:`DPSGuidance`). ε is evaluated as ``jax.vmap(eps_fn)`` over the batch
    (``chunk_size`` samples at a time when given: the memory of one step is then that of
    ``chunk_size`` samples; NDTM's control optimisation runs per block too), the steps are a
    ``lax.scan``. η, the schedule's floats, NDTM's learning rate, weight, γ and clipping norm and
    the terms' scales are traced: one compilation per (eps_fn, solver and term structure, shapes,
    ``num_steps``) serves every value.

    Args:
        key: PRNG key (one noise draw per step, the same stream for every guidance and solver).
        eps_fn: the model, ``eps_fn(x, t)`` for one sample x (the shape of one row of
            ``x_T``) at a scalar t ∈ (0, 1], dtype of ``x_T`` (a network, or a
            :class:`NoisedMixture`); it predicts ε unless ``prediction`` says otherwise.
        schedule: the :class:`VPSchedule` the predictor was trained with.
        x_T: ``(B, ...)`` starting states at t = 1 (N(0, I) draws for a standard run); their dtype
            is the working dtype.
        num_steps: N ≥ 1 diffusion steps.
        solver: :class:`DDIM` (default ``DDIM(eta=0.0)``), :class:`DDPM` or :class:`NDTM`.
        guidance: None, a term or a sequence of terms.
        prediction: what the model predicts, converted once to ε inside the engine:
            ``"epsilon"`` (default), ``"x0"`` (ε = (x − √ᾱ x̂₀)/σ), ``"v"`` (ε = σx + √ᾱ v) or
            ``"velocity"``, a flow-matching velocity u(x_s, s) = ε − x₀ on x_s = (1 − s)x₀ + sε,
            called at the same signal-to-noise ratio, s = σ/(√ᾱ + σ), x_s = x/(√ᾱ + σ), and
            ε = x_s + (1 − s)u (for the opposite time convention pass
            ``lambda x, s: -model(x, 1 - s)``).
        timesteps: None (the model takes the continuous t), or T: the model was trained on
            integer timesteps 0..T−1 (with a ``"table"`` schedule of its T cumulative
            products) and is called at the int32 index t·T − 1; ``num_steps`` must divide T.
            Not for ``"velocity"``.
        chunk_size: samples per block of the batch (None: the whole batch at once).
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the
            diffusion steps from inside the compiled loop (NDTM runs long at bench sizes).

    Returns:
        ``(x_0, info)``: ``(B, ...)`` samples and a :class:`GuidanceInfo` (:class:`NDTMInfo` for
        the NDTM solver).

    Raises:
        TypeError / ValueError: naming the argument, for bad arguments, an ``eps_fn`` whose output
            is not one sample's shape and dtype, or a guidance callable of the wrong shape; when
            the call is eager, an ``eps_fn`` (or a TAG ``time_logits_fn``) whose first output,
            at ``x_T[0]`` and t = 1, is not finite.

    Warns:
        RuntimeWarning: once, when an eager call's ``info.nonfinite`` flags a sample (under
            ``jit`` the flag is the report).

    Example (strong classifier guidance towards component 0 of a ring, with TAG):

        >>> import jax, jax.numpy as jnp
        >>> from jaxsample import datasets
        >>> from jaxsample.diffusion import guidance
        >>> from jaxsample.kernels.guidance import time_grid
        >>> ring = datasets.ring_of_gaussians(num_components=8)
        >>> schedule = guidance.VPSchedule("linear")
        >>> noised = guidance.NoisedMixture(ring, schedule)
        >>> terms = [guidance.ClassifierGuidance(noised.classifier(0), 10.0),
        ...          guidance.TAG(noised.time_predictor(time_grid(30)), 1.0)]
        >>> x_T = jax.random.normal(jax.random.key(0), (128, 2))
        >>> x0, info = guidance.sample(jax.random.key(1), noised, schedule, x_T, num_steps=30,
        ...                            solver=guidance.DDIM(eta=0.0), guidance=terms)
        >>> info.guidance_norm.shape, info.time_gap.shape, bool(info.nonfinite.any())
        ((30, 128, 2), (30, 128, 1), False)
        >>> bool(jnp.mean(jnp.linalg.norm(x0 - ring.means[:1], axis=1) < 0.3) > 0.9)
        True

    NDTM on a fiber (the control pulls every sample onto ``{x : x[:2] = (1, 0)}``):

        >>> noised = guidance.NoisedMixture(datasets.ring_of_gaussians(num_components=4, dim=3),
        ...                                 schedule)
        >>> cost = guidance.FiberCost(lambda x: x[:2], jnp.array([1.0, 0.0, 0.0]))
        >>> x0, info = guidance.sample(jax.random.key(0), noised, schedule,
        ...                            jax.random.normal(jax.random.key(1), (32, 3)),
        ...                            num_steps=20, solver=guidance.NDTM(cost))
        >>> int(info.num_eps_evals), int(info.num_vjps)
        (120, 100)
        >>> float(jnp.median(jnp.sqrt(info.final_cost))) < 0.2      # near the fiber
        True
    """
    key, eps_fn, x_T, num_steps, terms, chunk_size = _check_sampler(
        key, eps_fn, schedule, x_T, num_steps, guidance, chunk_size, prediction, timesteps)
    progress = check_progress(progress)
    solver = DDIM() if solver is None else solver
    if isinstance(solver, DDIM | NDTM):
        eta = check_hyperparameter("solver.eta", solver.eta, positive=False, maximum=1.0)
        variance = check_choice("solver.variance", solver.variance, VARIANCES)
        clip = _check_clip(solver.clip_x0)
        control = _ndtm_control(solver, x_T) if isinstance(solver, NDTM) else None
        x0, info = run(key, eps_fn, schedule, x_T, terms, control, ("ddim", variance), eta, clip,
                       num_steps, chunk_size, progress)
        _warn_if_nonfinite(info)
        return x0, info
    if isinstance(solver, DDPM):
        variance = check_choice("solver.variance", solver.variance, DDPM_VARIANCES)
        x0, info = run(key, eps_fn, schedule, x_T, terms, None, ("ddpm", variance),
                       check_hyperparameter("eta", 0.0, positive=False), None, num_steps,
                       chunk_size, progress)
        _warn_if_nonfinite(info)
        return x0, info
    raise TypeError("solver must be guidance.DDIM(eta), guidance.DDPM(variance) or "
                    f"guidance.NDTM(terminal_cost, ...), got {type(solver).__name__}")
