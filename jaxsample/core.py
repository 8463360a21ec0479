"""The sampler convention shared by every iterative method, and the run driver.

Every iterative sampler in jaxsample is a :class:`SamplingAlgorithm`: a pair of pure functions
``init`` and ``step`` in the BlackJAX mould. ``step`` always takes the PRNG key first, even when the
method is deterministic, so that any sampler drops into :func:`run`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsample._checks import check_int

__all__ = ["SamplingAlgorithm", "run"]

PyTree = Any


class SamplingAlgorithm(NamedTuple):
    """An iterative sampler as two pure functions.

    Attributes:
        init: builds the initial state; its arguments are method specific (for particle methods
            the initial positions).
        step: ``step(key, state) -> (state, info)``; pure, jittable, vmappable.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> def step(key, x):
        ...     return 0.5 * x + jax.random.normal(key, x.shape), {"norm": jnp.linalg.norm(x)}
        >>> alg = jaxsample.SamplingAlgorithm(init=lambda x: x, step=step)
        >>> state, info = alg.step(jax.random.key(0), alg.init(jnp.zeros(3)))
        >>> state.shape
        (3,)
    """

    init: Callable[..., PyTree]
    step: Callable[[jax.Array, PyTree], tuple[PyTree, PyTree]]


def _default_transform(state: PyTree, info: PyTree) -> PyTree:
    del state
    return info


def run(
    key: jax.Array,
    algorithm: SamplingAlgorithm,
    initial_state: PyTree,
    num_steps: int,
    *,
    transform: Callable[[PyTree, PyTree], PyTree] | None = None,
    progress: Any | None = None,
) -> tuple[PyTree, PyTree]:
    """Run ``algorithm`` for ``num_steps`` steps as one ``lax.scan`` over pre-split keys.

    The keys are ``jax.random.split(key, num_steps)``, so step ``t`` sees the same key whatever
    the loop is written as: ``run`` equals the hand loop
    ``for k in split(key, num_steps): state, info = algorithm.step(k, state)``.

    The whole loop is compiled once per ``(algorithm, num_steps, transform, progress)`` and
    input shapes; reuse the same ``algorithm`` object to hit the cache.

    Args:
        key: a PRNG key (new-style ``jax.random.key`` or legacy ``PRNGKey``).
        algorithm: a :class:`SamplingAlgorithm`.
        initial_state: the state returned by ``algorithm.init``.
        num_steps: number of steps, a Python int ``>= 1``.
        transform: ``transform(state, info) -> pytree`` chooses what the trace keeps at each
            step. Default: the step's ``info`` (light by convention: scalars and flags). Pass
            ``lambda state, info: state.positions`` to keep positions.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`). Meters report from
            inside the compiled loop through ``jax.debug.callback`` and stay correct under
            ``jit`` and ``vmap``; ``None`` adds nothing to the computation.

    Returns:
        ``(final_state, trace)`` where every leaf of ``trace`` has a leading axis of length
        ``num_steps``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> alg = jaxsample.SamplingAlgorithm(
        ...     init=lambda x: x,
        ...     step=lambda k, x: (0.9 * x + jax.random.normal(k, x.shape), jnp.sum(x)))
        >>> state, trace = jaxsample.run(jax.random.key(0), alg, alg.init(jnp.zeros(2)), 50)
        >>> trace.shape
        (50,)
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise TypeError(
            f"algorithm must be a jaxsample.SamplingAlgorithm, got {type(algorithm).__name__}"
        )
    num_steps = check_int("num_steps", num_steps, 1)
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
    if progress is not None and not callable(getattr(progress, "report", None)):
        raise TypeError(
            "progress must be a progress meter with a report(step, num_steps) method "
            f"(e.g. jaxsample.TextProgress()), got {type(progress).__name__}"
        )
    return _run(key, algorithm, initial_state, num_steps, transform or _default_transform, progress)


@functools.partial(jax.jit, static_argnums=(1, 3, 4, 5))
def _run(key, algorithm, initial_state, num_steps, transform, progress):
    keys = jax.random.split(key, num_steps)

    def body(state, xs):
        step_index, step_key = xs
        state, info = algorithm.step(step_key, state)
        if progress is not None:
            progress.report(step_index + 1, num_steps)
        return state, transform(state, info)

    final_state, trace = jax.lax.scan(
        body, initial_state, (jnp.arange(num_steps, dtype=jnp.int32), keys)
    )
    return final_state, trace
