"""The sampler convention shared by every iterative method, and the run driver.

Every iterative sampler in jaxsample is a :class:`SamplingAlgorithm`: a pair of pure functions
``init`` and ``step`` in the BlackJAX mould. ``step`` always takes the PRNG key first, even when the
method is deterministic, so that any sampler drops into :func:`run`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_int

__all__ = ["SamplingAlgorithm", "Step", "run"]

PyTree = Any


class SamplingAlgorithm(NamedTuple):
    """An iterative sampler as two pure functions (the contract every iterative method follows).

    Each method module exposes ``init``, ``build_kernel`` and a constructor returning this pair, as
    in BlackJAX. ``build_kernel(...)`` takes only static structure (a coupling kind, an update rule,
    ``chunk_size``) and returns ``kernel(key, state, <functions>, *, <float hyper-parameters>)``;
    the constructor binds the rest with ``equinox.Partial``, so ``step`` is a pytree whose array
    leaves are the float hyper-parameters (see :func:`run`).

    Attributes:
        init: ``init(position, *, rng_key=None) -> state``; ``position`` is the initial particle
            array or point (methods that draw their own start, such as MM-SOLD, take a key as
            ``rng_key`` and read the number of particles from ``position``'s leading axis).
        step: ``step(key, state) -> (state, info)``; pure, jittable, vmappable; the key comes first
            even when the method is deterministic.

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


class Step(eqx.Partial):
    """``equinox.Partial(kernel, **bound)`` that also works as a plain callable under ``jax.jit``.

    A constructor returns ``SamplingAlgorithm(init, Step(kernel, fn=..., h=...))``: :func:`run`
    partitions it (its array leaves, the float hyper-parameters, are traced), while
    ``jax.jit(alg.step)`` — which hashes the function it compiles — sees a function hashed by
    identity (an ``equinox.Partial`` holding arrays is not hashable).

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> step = Step(lambda key, x, *, h: (h * x, None), h=np.asarray(2.0))
        >>> float(jax.jit(step)(None, jnp.ones(()))[0])
        2.0
    """

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


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

    The whole loop is compiled once per step *structure*, ``num_steps``, ``transform``,
    ``progress`` and input shapes. The array leaves of ``algorithm.step`` (the float
    hyper-parameters of every jaxsample sampler: its step is a pytree, an ``equinox.Module`` or
    ``equinox.Partial``) are traced arguments of the compiled loop, so two algorithms that differ
    only in those values share one compilation, and ``jax.vmap`` over a hyper-parameter works.
    A plain Python closure as ``step`` is static: it compiles once per function object.

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
    dynamic, static = eqx.partition(algorithm.step, eqx.is_array)
    return _run(key, dynamic, _Static(static), initial_state, num_steps,
                transform or _default_transform, progress)


class _Static:
    """The non-array part of a step function, hashed by structure and leaves (``jit`` static)."""

    def __init__(self, tree):
        self.leaves, self.treedef = jax.tree.flatten(tree)

    def _key(self):
        return self.treedef, tuple(self.leaves)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, _Static) and self._key() == other._key()

    def tree(self):
        return jax.tree.unflatten(self.treedef, self.leaves)


@functools.partial(jax.jit, static_argnums=(2, 4, 5, 6))
def _run(key, dynamic_step, static_step, initial_state, num_steps, transform, progress):
    step = eqx.combine(dynamic_step, static_step.tree())
    keys = jax.random.split(key, num_steps)

    def body(state, xs):
        step_index, step_key = xs
        state, info = step(step_key, state)
        if progress is not None:
            progress.report(step_index + 1, num_steps)
        return state, transform(state, info)

    final_state, trace = jax.lax.scan(
        body, initial_state, (jnp.arange(num_steps, dtype=jnp.int32), keys)
    )
    return final_state, trace
