"""The sampler convention shared by every iterative method, and the run driver.

Every iterative sampler in jaxsample is a :class:`SamplingAlgorithm`: a pair of pure functions
``init`` and ``step`` in the BlackJAX mould. ``step`` always takes the PRNG key first, even when the
method is deterministic, so that any sampler drops into :func:`run`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_int, check_key, check_progress, is_concrete

__all__ = ["RunUntilInfo", "SamplingAlgorithm", "Step", "run", "run_until"]

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
    identity (an ``equinox.Partial`` holding arrays is not hashable). A call goes through
    ``equinox.filter_jit``, so ``alg.step(key, state)`` typed at a prompt compiles the step once
    (array leaves traced, functions static) instead of dispatching it op by op.

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

    def __call__(self, *args, **kwargs):
        # One compiled call, not op-by-op dispatch: a kernel holds while-loops and conds, each of
        # which would otherwise compile on its own when the step is called eagerly (ETD's step
        # took 3-4x its jitted compile time that way). Under an outer jit or vmap this is a
        # nested call that XLA inlines.
        return _jitted_call(self, args, kwargs)


@eqx.filter_jit
def _jitted_call(step: Step, args, kwargs):
    return eqx.Partial.__call__(step, *args, **kwargs)


def _default_transform(state: PyTree, info: PyTree) -> PyTree:
    del state
    return info


def _check_first_step(first_step, state):
    """The number of the run's first step: ``first_step`` where given (a Python int ``>= 0`` or
    an integer scalar array, e.g. a returned count), else the state's own ``step`` counter, else
    0 (a state without one: a BlackJAX state, a bare array)."""
    name = "first_step"
    if first_step is None:
        first_step = getattr(state, "step", None)
        if first_step is None:
            return jnp.zeros((), jnp.int32)
        name = f"{type(state).__name__}.step"
    if isinstance(first_step, int) and not isinstance(first_step, bool):
        check_int(name, first_step, 0)
    elif not (hasattr(first_step, "dtype") and jnp.issubdtype(first_step.dtype, jnp.integer)
              and jnp.ndim(first_step) == 0):
        hint = ("" if name == "first_step" else " (the state's step counter; pass first_step= "
                "for a state whose step is something else)")
        shape = getattr(first_step, "shape", ())
        raise TypeError(f"{name} must be a non-negative int or an integer scalar array{hint}, "
                        f"got {type(first_step).__name__}{f' of shape {shape}' if shape else ''}")
    return jnp.asarray(first_step, jnp.int32)


def _check_algorithm(algorithm) -> None:
    """Duck typing: any object with callable ``init`` and ``step`` of the BlackJAX shape
    (``init(position)``, ``step(key, state) -> (state, info)``), BlackJAX's own algorithms
    included."""
    missing = [name for name in ("init", "step") if not callable(getattr(algorithm, name, None))]
    if missing:
        raise TypeError(
            "algorithm must have callable init and step (a jaxsample.SamplingAlgorithm or a "
            f"BlackJAX algorithm), got {type(algorithm).__name__} without callable "
            f"{' and '.join(missing)}")


def _check_state(initial_state) -> None:
    """Refuse what cannot be a state: ``None``, a string, a callable (an algorithm in the
    state's place)."""
    if initial_state is None or isinstance(initial_state, str | bytes) or callable(
            initial_state):
        raise TypeError("initial_state must be the state that algorithm.init returns "
                        "(state = alg.init(x0)), got " + type(initial_state).__name__)


def _looks_like_positions(initial_state) -> bool:
    """A bare array or a plain container of arrays, not a state NamedTuple: what a caller passes
    when they meant ``alg.init(x0)``."""
    return not hasattr(initial_state, "_fields") and all(
        hasattr(leaf, "shape") for leaf in jax.tree.leaves(initial_state))


def _traced(call, initial_state):
    """Run ``call()`` (which traces the algorithm's step on ``initial_state``); a step that
    reads a state field which the given value lacks, when that value looks like positions,
    gets the hint a newcomer needs instead of a tracer's missing attribute."""
    try:
        return call()
    except AttributeError as err:
        if not _looks_like_positions(initial_state):
            raise
        got = (f"an array of shape {jnp.shape(initial_state)}" if hasattr(initial_state, "shape")
               else f"a {type(initial_state).__name__} of arrays shaped "
                    f"{jax.tree.map(jnp.shape, initial_state)}")
        raise TypeError(
            f"initial_state must be the state that algorithm.init returns, got {got}, which "
            f"the step cannot read ({err}). "
            "Did you pass positions? Call the algorithm's init first: "
            "state = alg.init(x0); jaxsample.run(key, alg, state, num_steps)") from err


def run(
    key: jax.Array,
    algorithm: SamplingAlgorithm,
    initial_state: PyTree,
    num_steps: int,
    *,
    first_step: int | jax.Array | None = None,
    transform: Callable[[PyTree, PyTree], PyTree] | None = None,
    progress: Any | None = None,
) -> tuple[PyTree, PyTree]:
    """Run ``algorithm`` for ``num_steps`` steps as one ``lax.scan``.

    Step ``t`` uses the key ``jax.random.fold_in(key, t)``, counted from the run's first step:
    the key of a step depends on the run's ``key`` and the step's number only, never on how many
    steps a call makes. Every jaxsample iterative sampler's state carries its step counter
    (``state.step``, int32, incremented by each step), and the run starts from it, so a run
    continued from its returned state equals one long run, bit for bit::

        state, _ = run(key, alg, state0, 500)
        state, _ = run(key, alg, state, 500)        # == run(key, alg, state0, 1000)

    and ``run`` from a fresh state equals the hand loop
    ``for t in range(num_steps): state, info = algorithm.step(fold_in(key, t), state)``.
    ``first_step=`` overrides the counter. A state without a ``step`` field (a BlackJAX state,
    a bare array) starts at 0 on every call: pass ``first_step=`` to continue such a run (a
    state holding another, such as :class:`~jaxsample.mcmc.StopState`, is read at its own
    counter, not the inner one's). Under ``jax.vmap`` over chains each chain reads its own
    counter.

    The whole loop is compiled once per step *structure*, ``num_steps``, ``transform``,
    ``progress`` and input shapes. The array leaves of ``algorithm.step`` (the float
    hyper-parameters of every jaxsample sampler: its step is a pytree, an ``equinox.Module`` or
    ``equinox.Partial``) are traced arguments of the compiled loop, so two algorithms that differ
    only in those values share one compilation, and ``jax.vmap`` over a hyper-parameter works.
    The first step's number is traced too (resuming does not recompile). A plain Python closure
    as ``step`` is static: it compiles once per function object.

    **Checkpoint and resume.** A state is a pytree of arrays, its step counter included, so
    equinox serialises it and the resumed run needs nothing else:

        >>> import os, tempfile
        >>> import equinox as eqx, jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.mcmc import mala
        >>> alg = mala(lambda x: -0.5 * jnp.sum(x**2), step_size=0.5)
        >>> key, state = jax.random.key(0), alg.init(jnp.zeros(2))
        >>> state, _ = jaxsample.run(key, alg, state, 30)
        >>> path = os.path.join(tempfile.mkdtemp(), "run.eqx")
        >>> eqx.tree_serialise_leaves(path, state)                     # checkpoint
        >>> state = eqx.tree_deserialise_leaves(path, alg.init(jnp.zeros(2)))  # resume, later
        >>> int(state.step)
        30
        >>> state, _ = jaxsample.run(key, alg, state, 20)
        >>> long, _ = jaxsample.run(key, alg, alg.init(jnp.zeros(2)), 50)
        >>> bool(jnp.all(state.position == long.position))
        True

    Args:
        key: a PRNG key (new-style ``jax.random.key`` or legacy ``PRNGKey``); the same key for
            every segment of a resumed run.
        algorithm: a :class:`SamplingAlgorithm`, or any object with ``init`` and ``step`` of
            that shape (a BlackJAX algorithm: ``run(key, blackjax.nuts(logdensity_fn,
            step_size, inverse_mass_matrix), state, num_steps)``).
        initial_state: the state returned by ``algorithm.init`` (or by an earlier run).
        num_steps: number of steps, a Python int ``>= 1``.
        first_step: number of the first step (steps already taken by earlier segments of the
            run), an int or an integer scalar array; default ``None``: the state's ``step``
            counter, or 0 for a state without one.
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
    key = check_key("key", key)
    _check_algorithm(algorithm)
    _check_state(initial_state)
    num_steps = check_int("num_steps", num_steps, 1)
    first_step = _check_first_step(first_step, initial_state)
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
    check_progress(progress)
    dynamic, static = eqx.partition(algorithm.step, eqx.is_array)
    final_state, trace = _traced(
        lambda: _run(key, dynamic, _Static(static), initial_state, first_step, num_steps,
                     transform or _default_transform, progress), initial_state)
    _warn_if_flagged(final_state)
    return final_state, trace


def _warn_if_flagged(state) -> None:
    """One warning per flag an eager run ends with, as the state's class declares them: a
    ``State`` NamedTuple may carry ``RUN_WARNINGS = (("field", "message"), ...)``, boolean
    fields that say the result is not to be trusted (ETD's ``collapsed``). Under tracing the
    flags stay in the state and the trace."""
    for field, message in getattr(type(state), "RUN_WARNINGS", ()):
        flag = getattr(state, field, None)
        if flag is None or not is_concrete(flag) or not bool(jnp.any(flag)):
            continue
        warnings.warn(f"{type(state).__name__}.{field} is set: {message}", RuntimeWarning,
                      stacklevel=3)


class RunUntilInfo(NamedTuple):
    """How a :func:`run_until` call ended.

    Attributes:
        num_steps: int32, steps taken by this call (a jaxsample state's ``step`` counter
            advanced by as many; for a state without one, pass ``first_step + num_steps`` as
            the next segment's ``first_step``).
        done: bool, ``done_fn`` held at the final state (``False``: stopped at ``max_steps``).
        nonfinite: bool, some step's info reported ``nonfinite`` (steps whose info has no
            ``nonfinite`` field count as finite).
    """

    num_steps: jax.Array
    done: jax.Array
    nonfinite: jax.Array


def run_until(
    key: jax.Array,
    algorithm: SamplingAlgorithm,
    initial_state: PyTree,
    *,
    done_fn: Callable[[PyTree], Any],
    max_steps: int | jax.Array,
    first_step: int | jax.Array | None = None,
    progress: Any | None = None,
) -> tuple[PyTree, RunUntilInfo]:
    """Step ``algorithm`` until ``done_fn(state)`` holds or ``max_steps`` steps were taken.

    One ``lax.while_loop``: ``done_fn`` is tested before every step (a state that is done at the
    start takes no step). Step keys are those of :func:`run`, ``fold_in(key, first_step + t)``
    with ``first_step`` the state's ``step`` counter unless given, so ``run_until`` followed by
    ``run`` on the returned state continues the same stream, and ``run_until`` stopped by its
    cap equals ``run`` for ``max_steps`` steps.

    Under ``jax.vmap`` (one key and state per chain) every chain keeps its own count and stops
    on its own: a finished chain is frozen while the others run, so a batch equals a loop over
    chains exactly.

    Args:
        key: a PRNG key.
        algorithm: a :class:`SamplingAlgorithm`.
        initial_state: the state returned by ``algorithm.init`` (or by an earlier run).
        done_fn: ``done_fn(state) -> bool`` scalar, jittable.
        max_steps: cap on the number of steps, ``>= 0`` (an int or an integer scalar array,
            traced: changing it does not recompile).
        first_step: number of the first step, as in :func:`run` (default: the state's
            ``step`` counter, or 0 for a state without one).
        progress: an optional meter; it reports ``(t, max_steps)`` (``max_steps`` must then be
            a Python int).

    Returns:
        ``(final_state, RunUntilInfo(num_steps, done, nonfinite))``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> walk = jaxsample.SamplingAlgorithm(
        ...     init=lambda x: x, step=lambda k, x: (x + jax.random.normal(k), {}))
        >>> state, info = jaxsample.run_until(jax.random.key(0), walk, jnp.zeros(()),
        ...                                   done_fn=lambda x: jnp.abs(x) > 3.0, max_steps=10_000)
        >>> bool(info.done), bool(jnp.abs(state) > 3.0), int(info.num_steps) > 0
        (True, True, True)
    """
    key = check_key("key", key)
    _check_algorithm(algorithm)
    _check_state(initial_state)
    if not callable(done_fn):
        raise TypeError(f"done_fn must be callable, got {type(done_fn).__name__}")
    if isinstance(max_steps, int) and not isinstance(max_steps, bool):
        check_int("max_steps", max_steps, 0)
    elif not (hasattr(max_steps, "dtype") and jnp.issubdtype(max_steps.dtype, jnp.integer)
              and jnp.ndim(max_steps) == 0):
        raise TypeError("max_steps must be a non-negative int or an integer scalar array, got "
                        f"{type(max_steps).__name__}")
    first_step = _check_first_step(first_step, initial_state)
    check_progress(progress)
    if progress is not None and not isinstance(max_steps, int):
        raise TypeError("max_steps must be a Python int when progress is given (the meter's "
                        f"total), got {type(max_steps).__name__}")
    dynamic, static = eqx.partition(algorithm.step, eqx.is_array)
    meter = None if progress is None else (progress, max_steps)
    final_state, info = _traced(
        lambda: _run_until(key, dynamic, _Static(static), initial_state, first_step,
                           jnp.asarray(max_steps, jnp.int32), done_fn, meter), initial_state)
    _warn_if_flagged(final_state)
    return final_state, info


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


@functools.partial(jax.jit, static_argnums=(2, 5, 6, 7))
def _run(key, dynamic_step, static_step, initial_state, first_step, num_steps, transform,
         progress):
    step = eqx.combine(dynamic_step, static_step.tree())

    def body(state, step_index):
        state, info = step(jax.random.fold_in(key, first_step + step_index), state)
        if progress is not None:
            progress.report(step_index + 1, num_steps)
        return state, transform(state, info)

    return jax.lax.scan(body, initial_state, jnp.arange(num_steps, dtype=jnp.int32))


def _any_nonfinite(info) -> jax.Array:
    flag = getattr(info, "nonfinite", None)
    if flag is None and isinstance(info, dict):
        flag = info.get("nonfinite")
    return jnp.zeros((), bool) if flag is None else jnp.any(jnp.asarray(flag))


@functools.partial(jax.jit, static_argnums=(2, 6, 7))
def _run_until(key, dynamic_step, static_step, initial_state, first_step, max_steps, done_fn,
               meter):
    step = eqx.combine(dynamic_step, static_step.tree())

    def done(state):
        return jnp.asarray(done_fn(state), bool).reshape(())

    def cond(carry):
        t, state, _ = carry
        return ~done(state) & (t < max_steps)

    def body(carry):
        t, state, bad = carry
        state, info = step(jax.random.fold_in(key, first_step + t), state)
        if meter is not None:
            meter[0].report(t + 1, meter[1])
        return t + 1, state, bad | _any_nonfinite(info)

    t, state, bad = jax.lax.while_loop(
        cond, body, (jnp.zeros((), jnp.int32), initial_state, jnp.zeros((), bool)))
    return state, RunUntilInfo(t, done(state), bad)
