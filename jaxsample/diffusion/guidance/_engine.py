"""The one engine of every guided VP sampler: a ``lax.scan`` over the reverse steps, ``jax.vmap``
over the batch (in row blocks), NDTM's control optimisation before a step when asked.

Non-finite values never turn samples into NaN silently: a sample whose guided prediction or new
state is not finite keeps its previous state for that step and is flagged; NDTM drops the control
gradient of a sample whose cost or gradient is not finite (flagged too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxsample.diffusion.guidance.terms import GuidanceStep
from jaxsample.kernels import chunking
from jaxsample.kernels import guidance as kernels

__all__ = ["Control", "GuidanceInfo", "NDTMInfo", "run"]


class GuidanceInfo(NamedTuple):
    """What :func:`~jaxsample.diffusion.guidance.sample` reports with the DDIM and DDPM solvers.

    Rows of the per-step arrays are in the order the steps run (first row: t_N = 1).

    Attributes:
        times: ``(N,)`` the step times t_N, …, t_1.
        guidance_norm: ``(N, B, J)`` ‖g_j‖ of each of the J guidance terms (score units; 0 for a
            term switched off statically).
        time_gap: ``(N, B, P)`` |t̂(x) − t_k| for each of the P TAG terms (before the step, at
            the state the field is evaluated at).
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
    """What :func:`~jaxsample.diffusion.guidance.sample` reports with the NDTM solver:
    :class:`GuidanceInfo`'s fields and the control's.

    Attributes:
        times, guidance_norm, time_gap, num_eps_evals, num_vjps: as in :class:`GuidanceInfo`
            (the counts include the inner optimisation: M forward calls and M VJPs per step
            whose control scale γ_t ≠ 0, one forward call more per such step for the non-zero
            inits, and one per step for a per-step fiber target).
        control_scale: ``(N,)`` γ_t of each step (0: no control optimisation at that step).
        terminal_cost: ``(N, B)`` c(x̂₀(x_t + γu)) at the control the step used (unweighted;
            against the step's target for a per-step fiber target).
        score_penalty: ``(N, B)`` ‖ε(x_t) − ε(x_t + γu)‖² (unweighted; 0 where γ_t = 0).
        control_norm: ``(N, B)`` ‖γu‖, how far the control moved the state.
        final_cost: ``(B,)`` c(x₀) of the returned samples (for a :class:`FiberCost`: the fiber
            loss against the query's own features φ(x_q)).
        nonfinite: ``(B,)`` bool, as in :class:`GuidanceInfo`, or a cost or control gradient of
            that sample was not finite (its gradient was dropped for that inner step).
    """

    times: jax.Array
    guidance_norm: jax.Array
    time_gap: jax.Array
    num_eps_evals: jax.Array
    num_vjps: jax.Array
    control_scale: jax.Array
    terminal_cost: jax.Array
    score_penalty: jax.Array
    control_norm: jax.Array
    final_cost: jax.Array
    nonfinite: jax.Array


class Control(eqx.Module):
    """NDTM's per-step control optimisation, checked: structure static, floats traced."""

    terminal_cost: Callable
    terminal_weight: Any
    learning_rate: Any  # None with a user optimiser (its own learning rate)
    control_scale: Any  # a traced float, or a callable t -> γ(t)
    max_grad_norm: Any  # None: no per-sample clipping
    optimizer: Any = eqx.field(static=True)  # None: Adam at learning_rate
    inner_steps: int = eqx.field(static=True)
    weights: tuple[str, str] = eqx.field(static=True)
    init: str = eqx.field(static=True)
    learning_rate_schedule: str = eqx.field(static=True)
    per_step_target: bool = eqx.field(static=True)


# the direction of Adam; the default NDTM step is −λ_i times it (optax.adam(λ_i) exactly), with the
# learning rate traced. One object, so the default compiles once.
_ADAM_DIRECTION = optax.scale_by_adam()


def _sum_event(a):
    return jnp.sum(a, axis=tuple(range(1, a.ndim)))


def _all_finite(a):
    return jnp.all(jnp.isfinite(a), axis=tuple(range(1, a.ndim)))


def _rows(flags, like):
    """Per-sample flags ``(b,)`` broadcastable against ``like`` ``(b, ...)``."""
    return flags.reshape((-1,) + (1,) * (like.ndim - 1))


def _clip(x0, clip):
    return x0 if clip is None else jnp.clip(x0, clip[0], clip[1])


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


def _terminal(control, x0, targets):
    """Per-sample terminal costs and their gradients at x̂₀ (against per-step targets if any)."""
    if targets is None:
        return jax.vmap(jax.value_and_grad(control.terminal_cost))(x0)
    return jax.vmap(jax.value_and_grad(control.terminal_cost.evaluate))(x0, targets)


def _optimise_control(eps_fn, control, x, u0, targets, step_consts, weights, step_scale, gamma,
                      clip):
    """M optimiser steps on NDTM's per-sample cost for a block of samples; returns u and flags.

    Each step's update is the optimiser's, times ``step_scale``: −λ_i on Adam's direction for the
    default (``optax.adam(λ_i)`` exactly), the learning-rate schedule's factor for a user's
    optimiser.

    The gradient is assembled from one VJP through the controlled state x + γu, ε and Tweedie's
    estimate per inner step: ∇_u c = γ·J_{(ε, x̂₀)}ᵀ (2 w_score (ε(x + γu) − ε(x)),
    w_term ∇c(x̂₀)) + 2 w_control γ² u, then (``max_grad_norm``) each sample's gradient is scaled
    to norm ≤ c. The score residual is exactly 0 where u = 0 (ε(x + 0) = ε(x) by definition,
    whatever the round-off of two evaluations), so with w_term = 0 and a zero start every
    gradient, hence every Adam update, is exactly 0.
    """
    t, _, alpha_t, _, _, _ = step_consts
    w_term, w_score, w_control = weights
    eps_block = jax.vmap(lambda y: eps_fn(y, t))
    zero_init = control.init == "zero"
    # zero init: ε(x_t) is the first inner step's own prediction at u = 0 (no extra call)
    reference = jnp.zeros_like(x) if zero_init else eps_block(x)

    def forward(u):
        x_c = x + gamma * u
        eps = eps_block(x_c)
        return eps, _clip(kernels.tweedie(x_c, eps, alpha_t), clip)

    optimizer = _ADAM_DIRECTION if control.optimizer is None else control.optimizer

    def inner(i, carry):
        u, state, reference, bad = carry
        (eps, x0), pullback = jax.vjp(forward, u)
        if zero_init:
            reference = jnp.where(i == 0, eps, reference)
        terminal, cost_grad = _terminal(control, x0, targets)
        at_start = ~jnp.any(u != 0, axis=tuple(range(1, u.ndim)))
        residual = jnp.where(_rows(at_start, eps), jnp.zeros_like(eps), eps - reference)
        (grad,) = pullback((2 * w_score * residual, w_term * cost_grad.astype(x.dtype)))
        grad = grad + 2 * w_control * gamma * gamma * u
        per_sample = (w_term * terminal.astype(x.dtype) + w_score * _sum_event(residual ** 2)
                      + w_control * gamma * gamma * _sum_event(u * u))
        ok = jnp.isfinite(per_sample) & _all_finite(grad)
        grad = jnp.where(_rows(ok, u), grad, jnp.zeros_like(grad))
        if control.max_grad_norm is not None:
            grad = kernels.clip_rows_by_norm(grad, jnp.asarray(control.max_grad_norm, x.dtype))
        with jax.numpy_dtype_promotion("standard"):   # optax: decay ** int32 count
            updates, state = optimizer.update(grad, state, u)
        updates = jax.tree.map(lambda v: step_scale * v, updates)
        return optax.apply_updates(u, updates), state, reference, bad | ~ok

    bad = jnp.zeros(x.shape[0], bool)
    u, _, reference, bad = jax.lax.fori_loop(
        0, control.inner_steps, inner, (u0, optimizer.init(u0), reference, bad))
    return u, reference, bad


@eqx.filter_jit
def run(key, eps_fn, schedule, x_T, terms, control, rule, eta, clip, num_steps, chunk_size,
        progress):
    """The sampler's compiled body (arguments checked by the public entry point).

    ``rule``: ``("ddim", variance)`` or ``("ddpm", variance)``; ``control``: a :class:`Control`
    or None; ``clip``: None or a static ``(lo, hi)`` clamp of x̂₀ (DDIM steps and NDTM's cost).
    """
    with jax.named_scope("guided_sample"):
        dtype = x_T.dtype
        grid = kernels.time_grid(num_steps, dtype)
        k = jnp.arange(num_steps, 0, -1, dtype=jnp.int32)
        t = k.astype(dtype) / num_steps
        alpha_t = schedule.alpha_bar(t)
        alpha_s = schedule.alpha_bar((k - 1).astype(dtype) / num_steps)
        eta = jnp.asarray(eta, dtype)
        if rule[0] == "ddim":
            eps_coefficient = kernels.ddim_eps_coefficient(alpha_t, alpha_s, eta, rule[1])
        else:
            eps_coefficient = kernels.ddpm_eps_coefficient(alpha_t, alpha_s)
        gains = -jnp.sqrt(1 - alpha_t) * eps_coefficient
        if control is not None:
            score_w, control_w = kernels.ndtm_weights(*control.weights, alpha_t, alpha_s, eta,
                                                      rule[1])
            if control.learning_rate_schedule == "linear":
                factor = 1 - jnp.arange(num_steps, dtype=dtype) / num_steps
            else:
                factor = jnp.ones((num_steps,), dtype)
            if control.optimizer is None:  # Adam at λ_i = λ·factor_i: scale its direction by −λ_i
                scales = -(jnp.asarray(control.learning_rate, dtype) * factor)
            else:
                scales = factor
            if callable(control.control_scale):
                gammas = jax.vmap(control.control_scale)(t).astype(dtype)
            else:
                gammas = jnp.full((num_steps,), control.control_scale, dtype)
            per_step = (score_w, control_w, scales, gammas)
            random_init = control.init in ("random", "causal-random")
            causal = control.init.startswith("causal")
            per_step_target = control.per_step_target
        else:
            per_step, per_step_target = None, False
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
            if per_step_target:
                query_noise = jax.random.normal(jax.random.fold_in(step_key, 2), x.shape, dtype)
            else:
                query_noise = None

            def block(x, noise, u_start, query_noise):
                stats = {}
                if control is None:
                    x_c, cost_bad = x, jnp.zeros(x.shape[0], bool)
                else:
                    score_w_i, control_w_i, lr_i, gamma = ndtm
                    weights = (jnp.asarray(control.terminal_weight, dtype), score_w_i,
                               control_w_i)
                    if per_step_target:
                        cost = control.terminal_cost
                        query = cost.query.astype(dtype)[None]
                        x_q = jnp.sqrt(a_t) * query + jnp.sqrt(1 - a_t) * query_noise
                        eps_q = jax.vmap(lambda y: eps_fn(y, t_i))(x_q)
                        targets = jax.vmap(cost.feature_fn)(
                            _clip(kernels.tweedie(x_q, eps_q, a_t), clip))
                    else:
                        targets = None

                    def optimise(u_start):
                        return _optimise_control(eps_fn, control, x, u_start, targets, consts,
                                                 weights, lr_i, gamma, clip)

                    def skip(u_start):   # γ_t = 0: the control cannot move the state
                        return u_start, jnp.zeros_like(x), jnp.zeros(x.shape[0], bool)

                    u, reference, cost_bad = jax.lax.cond(gamma != 0, optimise, skip, u_start)
                    x_c = x + gamma * u
                eps, guided, norms, gaps = jax.vmap(
                    lambda y: _guided(eps_fn, terms, y, consts))(x_c)
                if rule[0] == "ddim":
                    x_new = kernels.ddim_update(x_c, guided, a_t, a_s, eta, noise, rule[1], clip)
                else:
                    x_new = kernels.ddpm_update(x_c, guided, a_t, a_s, noise, rule[1], k_i == 1)
                ok = _all_finite(x_new) & _all_finite(guided)
                x_new = jnp.where(_rows(ok, x), x_new, x)
                # no zero-size outputs through the row map (lax.map cannot reshape them)
                stats.update({name: value for name, value in (("norms", norms), ("gaps", gaps))
                              if value.shape[-1]})
                if control is not None:
                    x0_c = _clip(kernels.tweedie(x_c, eps, a_t), clip)
                    terminal, _ = _terminal(control, x0_c, targets)
                    score = jnp.where(gamma != 0, _sum_event((reference - eps) ** 2), 0)
                    stats.update(terminal=terminal, score=score,
                                 control=jnp.sqrt(_sum_event((x_c - x) ** 2)))
                    u = jnp.where(_rows(ok, u), u, u_start)
                else:
                    u = None
                return x_new, ~ok | cost_bad, u, stats

            x_new, step_bad, u, stats = chunking.map_rows(block, x, noise, u_start, query_noise,
                                                          chunk_size=chunk_size)
            if progress is not None:
                progress.report(num_steps - k_i + 1, num_steps)
            return (x_new, bad | step_bad, u), stats

        u0 = None if control is None else jnp.zeros_like(x_T)
        inputs = (k, t, alpha_t, alpha_s, gains, jax.random.split(key, num_steps), first_step,
                  per_step)
        (x0, bad, _), stats = jax.lax.scan(body, (x_T, jnp.zeros(x_T.shape[0], bool), u0), inputs)

        num_vjps = jnp.asarray(
            num_steps * int(any(term.active and term.needs_pullback for term in terms)),
            jnp.int32)
        num_evals = jnp.asarray(num_steps, jnp.int32)
        if control is not None:
            controlled = jnp.sum(gammas != 0).astype(jnp.int32)
            extra = control.inner_steps + (0 if control.init == "zero" else 1)
            num_evals = num_evals + controlled * extra + num_steps * int(per_step_target)
            num_vjps = num_vjps + controlled * control.inner_steps
        empty = jnp.zeros((num_steps, x_T.shape[0], 0), dtype)
        common = dict(times=t, guidance_norm=stats.get("norms", empty),
                      time_gap=stats.get("gaps", empty), num_eps_evals=num_evals,
                      num_vjps=num_vjps)
        if control is None:
            return x0, GuidanceInfo(**common, nonfinite=bad)
        final = jax.vmap(control.terminal_cost)(x0).astype(dtype)
        bad = bad | ~jnp.isfinite(final)
        return x0, NDTMInfo(**common, control_scale=gammas,
                            terminal_cost=stats["terminal"].astype(dtype),
                            score_penalty=stats["score"], control_norm=stats["control"],
                            final_cost=final, nonfinite=bad)
