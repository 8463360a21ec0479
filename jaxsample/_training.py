r"""The one optax training loop of the library's trainers, and the check of their ``optimizer=``.

A method that learns a component (a time predictor, a stopping classifier) takes
``optimizer=`` (any ``optax.GradientTransformation``) and ``num_steps`` (DESIGN, the contract):
:func:`check_optimizer` checks the argument at the public entry point, :func:`fit` runs the
steps inside the trainer's compiled function.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

__all__ = ["check_optimizer", "fit"]


def check_optimizer(name: str, optimizer) -> optax.GradientTransformation | None:
    """``None`` (the trainer's default optimiser) or an ``optax.GradientTransformation``;
    returns it, else raises ``TypeError`` naming ``name``."""
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"{name} must be an optax.GradientTransformation (e.g. "
                        f"optax.adam(1e-3)), got {type(optimizer).__name__}")
    return optimizer


def fit(loss_fn: Callable, params, optimizer: optax.GradientTransformation, key: jax.Array,
        num_steps: int, *, has_aux: bool = False, progress=None):
    r"""``num_steps`` steps of ``optimizer`` on a stochastic loss: one ``lax.scan``.

    With the step keys ``k_t = split(key, num_steps)[t]`` and ``s_0 = optimizer.init(θ_0)``,
    step ``t = 0, …, num_steps − 1`` is

    .. math::
        g_t = ∇_θ L(θ_t, k_t), \qquad (u_t, s_{t+1}) = \mathrm{update}(g_t, s_t, θ_t),
        \qquad θ_{t+1} = θ_t + u_t,

    where ``L(θ, k)`` draws its own batch from ``k`` (a fixed budget: no tolerance, no early
    stop). The optimiser runs under standard dtype promotion: optax's schedules and bias
    corrections mix their int32 step count with floats, which strict promotion refuses. Call it
    inside the trainer's ``jit``, so that the loop compiles once with the trainer.

    Args:
        loss_fn: ``(params, key) -> loss`` (a scalar), or ``-> (loss, aux)`` with ``has_aux``.
        params: the pytree of arrays trained (e.g. ``eqx.partition(module,
            eqx.is_inexact_array)[0]``).
        optimizer: an ``optax.GradientTransformation``.
        key: PRNG key.
        num_steps: the number of steps, ``>= 1`` (static).
        has_aux: ``loss_fn`` returns ``(loss, aux)``, as in ``jax.value_and_grad``.
        progress: ``None`` or a meter reporting step ``t + 1`` of ``num_steps`` from inside the
            loop (e.g. :class:`jaxsample.TextProgress`).

    Returns:
        ``(params, losses)``, the trained parameters and the ``(num_steps,)`` losses; with
        ``has_aux``, ``(params, (losses, aux))``, each aux leaf stacked along a leading
        ``num_steps`` axis.

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> loss = lambda p, key: jnp.sum((p - 3.0) ** 2)
        >>> p, losses = fit(loss, jnp.zeros(2), optax.sgd(0.1), jax.random.key(0), 50)
        >>> losses.shape, bool(jnp.allclose(p, 3.0, atol=1e-3))
        ((50,), True)
    """
    value_and_grad = jax.value_and_grad(loss_fn, has_aux=has_aux)

    def step(carry, xs):
        params, state = carry
        index, step_key = xs
        value, grads = value_and_grad(params, step_key)
        with jax.numpy_dtype_promotion("standard"):
            updates, state = optimizer.update(grads, state, params)
        if progress is not None:
            progress.report(index + 1, num_steps)
        return (optax.apply_updates(params, updates), state), value

    with jax.numpy_dtype_promotion("standard"):
        state = optimizer.init(params)
    steps = (jnp.arange(num_steps, dtype=jnp.int32), jax.random.split(key, num_steps))
    (params, _), values = jax.lax.scan(step, (params, state), steps)
    return params, values
