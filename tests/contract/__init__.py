"""The contract-test registry: one small configuration per method (Optax's ``float64_test`` style).

Each method module adds a file ``tests/contract/<family>_<module>.py`` defining ``ENTRIES``, a list
of :class:`Entry`; ``tests/test_contract.py`` discovers the files. The parametrised
tests there then check, for every entry: float32 and float64 preserved; ``jit(vmap)`` over keys
(and over two values of the float hyper-parameter, where there is one) equals per-key eager calls
and compiles once (``chex.assert_max_traces``), so the hyper-parameter is traced; for iterative
samplers two values share one compilation of ``jaxsample.run``; every Info has a ``nonfinite``
flag, False on the well-posed configuration; bad input raises the declared error naming the
argument. Each entry names in ``covers`` the public functions its ``build``/``hyper`` call (where
there is a ``hyper``, it must call all of them: it is the one the jit/vmap check batches); every
public function that samples, fits or estimates must be covered by some entry.

A minimal entry::

    def _sample(dtype):
        data = jnp.asarray(np.linspace(-1, 1, 8), dtype)        # inputs built at ``dtype``
        return lambda key: mymethod.sample(key, data, num_samples=4)   # -> (samples, info)

    def _hyper(dtype):
        data = jnp.asarray(np.linspace(-1, 1, 8), dtype)
        return lambda key, h: mymethod.sample(key, data, num_samples=4, bandwidth=h)

    ENTRIES = [Entry(
        name="family.mymethod", module="jaxsample.family.mymethod", build=_sample,
        covers=("family.sample",), hyper=_hyper, hyper_values=(0.5, 1.0),
        bad_inputs=(BadInput(lambda: mymethod.sample(KEY, np.ones(3), num_samples=0),
                             ValueError, "num_samples"),),
    )]

Keep configurations tiny: the registry compiles each entry about three times (eager at each
dtype, and ``jit(vmap)``; give ``hyper`` the structure of ``build``, the hyper-parameter an
argument where ``build`` fixes it, and the eager calls of the jit check reuse the dtype check's
compilation), and the whole suite must stay within its time budget. Cheap closed forms of one
family share one entry whose ``fn(key)`` returns a tuple of their outputs (its ``info`` then
returns a tuple of Infos).
Deterministic estimators take the key and ignore it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

KEY = jax.random.key(0)


@dataclasses.dataclass(frozen=True)
class BadInput:
    """A call that must raise ``error`` with a message matching ``match`` (the argument's name)."""

    call: Callable[[], Any]
    error: type[Exception] | tuple[type[Exception], ...]
    match: str


def _second(output):
    return output[1]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One method configuration in the contract registry.

    Attributes:
        name: registry id shown in test names (``"particles.etd/balanced"``).
        module: the method module it covers (``"jaxsample.particles.etd"``).
        covers: the public functions ``build``/``hyper`` call, family-qualified as they are
            reached from ``jaxsample`` (``"risk.budget_at"``, ``"diagnostics.mixing.mfpt"``).
        build: ``build(dtype) -> fn`` with ``fn(key) -> output``, a pytree of arrays; inputs are
            created inside ``build`` at ``dtype``. For iterative samplers ``fn`` builds the
            algorithm, calls ``init`` and ``jaxsample.run`` for a few steps, and returns
            ``(state, trace)``.
        info: picks the Info NamedTuple (or a trace of them, or a tuple of several Infos) out
            of ``fn``'s output.
        hyper: ``hyper(dtype) -> fn_h`` with ``fn_h(key, h) -> output`` where ``h`` is a float
            hyper-parameter passed as a traced value; ``None`` when the method has none that can
            be traced (say why in ``note``).
        hyper_values: two distinct values of ``h``.
        iterative: ``fn_h`` calls ``jaxsample.run``: also checks that two values of ``h`` share
            one compilation of it.
        start: ``start(dtype) -> (algorithm, initial_state)`` for an entry that covers an
            iterative constructor (one returning a ``SamplingAlgorithm``): the algorithm its
            build runs and a state from its ``init``. The resumption test runs it in two
            segments against one long run; every iterative constructor must be covered by an
            entry with a ``start``.
        bad_inputs: calls that must raise a clear error.
        dtypes: the float dtypes the method supports.
        rtol: relative tolerance of jit-vs-eager and vmap-vs-loop comparisons (float32; float64
            comparisons use ``rtol**2``).
        exact_ints: integer outputs (indices, tokens) must match exactly between jit and eager.
        traceable: ``False`` for a function documented as not jittable (it decides on the host
            and returns a Python value): only the dtype/Info and bad-input checks run; ``note``
            says "not jittable" and why.
        requires: optional packages the entry needs (an extra such as BlackJAX): its tests skip
            where one is missing (the dependency-floor run installs none).
        note: anything a reader of the registry should know (e.g. why ``hyper`` is None).
    """

    name: str
    module: str
    build: Callable[[Any], Callable[[jax.Array], Any]]
    covers: tuple[str, ...] = ()
    info: Callable[[Any], Any] = _second
    hyper: Callable[[Any], Callable[[jax.Array, Any], Any]] | None = None
    hyper_values: tuple[float, float] = (0.5, 1.0)
    iterative: bool = False
    start: Callable[[Any], tuple[Any, Any]] | None = None
    bad_inputs: tuple[BadInput, ...] = ()
    dtypes: tuple[str, ...] = ("float32", "float64")
    rtol: float = 1e-4
    exact_ints: bool = True
    traceable: bool = True
    requires: tuple[str, ...] = ()
    note: str = ""
