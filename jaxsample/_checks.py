"""Eager argument checks shared by every public entry point: the one validation layer.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad value) with
a message that names the argument, says what was expected and shows what came. Public entry points
check once; kernels assume valid input and say so.

Checks that need a value (finiteness, ranges) run only when the value is concrete: inside
``jit``/``vmap``/``grad`` the argument is a tracer and the check is skipped (``is_concrete``), and
what can go wrong at run time is reported through the ``nonfinite`` flag of the method's ``Info``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "AUTODIFF",
    "check_array",
    "check_band",
    "check_clamp",
    "check_callable",
    "check_choice",
    "check_chunk_size",
    "check_fn_output",
    "check_hyperparameter",
    "check_finite_start",
    "check_initial_logdensity",
    "check_int",
    "check_key",
    "check_number",
    "check_position",
    "check_simplex",
    "check_stochastic_matrix",
    "common_float_dtype",
    "is_concrete",
    "resolve_score_fn",
    "score_callable",
]

_KINDS = {
    "floating": jnp.floating,
    "integer": jnp.integer,
    "bool": jnp.bool_,
    "numeric": jnp.number,
}


def is_concrete(value) -> bool:
    """True when this host can read every value of ``value``'s leaves.

    False for a tracer (under ``jit``/``vmap``/``grad``) and for a global array of a multi-process
    run that spans devices of other processes (``is_fully_addressable`` False): value checks are
    then skipped, and the method's ``Info.nonfinite`` reports what goes wrong at run time.
    """
    return not any(
        isinstance(leaf, jax.core.Tracer) or not getattr(leaf, "is_fully_addressable", True)
        for leaf in jax.tree.leaves(value)
    )


def check_int(name: str, value, minimum: int, maximum: int | None = None, *,
              allow_none: bool = False) -> int | None:
    """A Python (or NumPy) integer in ``[minimum, maximum]``; returns it as ``int``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be a Python int, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return int(value)


def _real_kind(name, value):
    if isinstance(value, bool) or not isinstance(value, int | float | np.number | np.ndarray
                                                 | jax.Array):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if getattr(value, "shape", ()) != ():
        raise ValueError(f"{name} must be a scalar, got shape {value.shape}")


def _check_range(name, value: float, positive: bool, maximum: float | None):
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        expected = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {expected}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")


def check_number(name: str, value, *, positive: bool = True, allow_none: bool = False,
                 maximum: float | None = None) -> float | None:
    """A concrete finite real number, ``> 0`` (``positive``) or ``>= 0``; returns a float.

    For settings that fix structure (they pick shapes or branches). Float hyper-parameters that a
    user may sweep or ``vmap`` go through :func:`check_hyperparameter` instead.
    """
    if value is None and allow_none:
        return None
    _real_kind(name, value)
    try:
        value = float(value)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(f"{name} must be a concrete real number, got {value!r}") from err
    _check_range(name, value, positive, maximum)
    return value


def check_band(name: str, value, *, around: float | None = None):
    """A pair ``(low, high)`` of positive float hyper-parameters with ``low < high`` (and
    ``low < around < high`` where ``around`` is given: a band around a ratio's ideal value);
    checked when concrete, traced otherwise (:func:`check_hyperparameter`)."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}")
    low = check_hyperparameter(f"{name}[0]", value[0])
    high = check_hyperparameter(f"{name}[1]", value[1])
    if is_concrete(low) and is_concrete(high):
        if not float(low) < float(high):
            raise ValueError(f"{name} must have low < high, got {tuple(value)!r}")
        if around is not None and not float(low) < around < float(high):
            raise ValueError(f"{name} must have low < {around:g} < high, got {tuple(value)!r}")
    return low, high


def check_hyperparameter(name: str, value, *, positive: bool = True, allow_none: bool = False,
                         maximum: float | None = None):
    """A float hyper-parameter that stays a *traced* value.

    Returns a 0-d float64 NumPy array when ``value`` is concrete (checked: finite, ``> 0`` or
    ``>= 0``, ``<= maximum``), or ``value`` itself when it is a tracer (under ``vmap``/``jit``;
    unchecked). Either way it is an array leaf of the sampler's pytree, so two samplers that differ
    only in this value share one compilation and ``jax.vmap`` over it works. Kernels cast it to the
    dtype of the state (``jnp.asarray(value, dtype)``); float64 storage keeps float64 runs exact.
    """
    if value is None and allow_none:
        return None
    _real_kind(name, value)
    if not is_concrete(value):
        return value
    _check_range(name, float(value), positive, maximum)
    return np.asarray(value, dtype=np.float64)


def check_chunk_size(chunk_size) -> int | None:
    """``None`` (dense) or a positive int of rows per chunk."""
    return check_int("chunk_size", chunk_size, 1, allow_none=True)


def check_choice(name: str, value, choices: Sequence[str]) -> str:
    """One of ``choices`` (lower-case strings); returns it."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {tuple(choices)}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_progress(progress):
    """``None`` or a progress meter: an object with a ``report(step, num_steps)`` method."""
    if progress is not None and not callable(getattr(progress, "report", None)):
        raise TypeError(
            "progress must be a progress meter with a report(step, num_steps) method "
            f"(e.g. jaxsample.TextProgress()), got {type(progress).__name__}"
        )
    return progress


def check_callable(name: str, fn, *, allow_none: bool = False) -> Callable | None:
    """A callable (or ``None`` when allowed); returns it."""
    if fn is None and allow_none:
        return None
    if not callable(fn):
        kind = "callable or None" if allow_none else "callable"
        raise TypeError(f"{name} must be {kind}, got {type(fn).__name__}")
    return fn


def check_key(name: str, key) -> jax.Array:
    """A PRNG key: a new-style ``jax.random.key`` or a legacy ``uint32[2]`` ``PRNGKey``."""
    if key is None:
        raise TypeError(f"{name} must be a PRNG key (jax.random.key(seed)), got None")
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        raise TypeError(f"{name} must be a PRNG key, got the int {key}: pass "
                        f"jax.random.key({key})")
    try:
        key = key if hasattr(key, "dtype") else jnp.asarray(key)
    except TypeError as err:
        raise TypeError(f"{name} must be a PRNG key (jax.random.key(seed)), got "
                        f"{type(key).__name__}") from err
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    if key.dtype == jnp.uint32 and key.shape[-1:] == (2,):
        return key
    raise TypeError(
        f"{name} must be a PRNG key (jax.random.key(seed)), got dtype {key.dtype} shape "
        f"{key.shape}"
    )


def check_array(
    name: str,
    value,
    *,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    kind: str | None = "floating",
    dtype=None,
    finite: bool = False,
    min_rows: int | None = None,
    layout: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    lower_inclusive: bool = True,
    upper_inclusive: bool = True,
    integer_valued: bool = False,
) -> jax.Array:
    """An array of the expected rank, shape, dtype kind and (when concrete) values.

    Args:
        name: the argument's name, for messages.
        value: anything ``jnp.asarray`` accepts.
        ndim: required rank.
        shape: required shape; ``None`` entries are free (implies ``ndim``).
        kind: ``"floating"``, ``"integer"``, ``"bool"``, ``"numeric"`` or ``None`` (any).
        dtype: an exact dtype the array must have (e.g. matching another argument).
        finite: refuse NaN or ±inf entries (checked only when concrete).
        min_rows: minimum length of the leading axis.
        layout: the axes' names, e.g. ``"(num_particles, dim)"``: a wrong rank or shape is
            then reported against them (``position must have shape (num_particles, dim), got
            shape (2,)``), with the reshape a 1-D input needs.
        lower, upper: bounds every entry must meet (checked only when concrete), e.g.
            ``lower=0`` for weights, ``lower=0, upper=1`` for probabilities. NaN meets no bound.
        lower_inclusive, upper_inclusive: whether the bound itself is allowed (``lower=0,
            lower_inclusive=False`` is ``> 0``).
        integer_valued: every entry is a whole number (counts held in a floating array; checked
            only when concrete).

    The value checks (``finite``, bounds, ``integer_valued``) read the array on the host, once,
    and are skipped under ``jit``/``vmap``/``grad`` (:func:`is_concrete`). A failed bound says
    ``x must be finite and in [0, 1], got values in [-0.5, 0.7]``.

    Returns:
        ``value`` as a JAX array (unchanged dtype).
    """
    if isinstance(value, str | bytes) or value is None:
        raise TypeError(f"{name} must be an array, got {type(value).__name__}")
    try:
        array = value if isinstance(value, jax.Array) else jnp.asarray(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array, got {type(value).__name__}") from err
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and array.ndim != ndim:
        if ndim == 0 and layout is None:
            raise ValueError(f"{name} must be a scalar, got shape {array.shape}")
        if layout is None:
            raise ValueError(f"{name} must have {ndim} dimension(s), got shape {array.shape}")
        hint = ""
        if ndim == 2 and array.ndim == 1:
            hint = (f": one row per point; for {array.shape[0]} points of one coordinate pass "
                    f"{name}[:, None], for one point of {array.shape[0]} coordinates "
                    f"{name}[None, :]")
        raise ValueError(f"{name} must have shape {layout}, got shape {array.shape}{hint}")
    if shape is not None and any(s is not None and s != a for s, a in zip(shape, array.shape,
                                                                          strict=True)):
        want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        named = "" if layout is None else f" {layout}"
        raise ValueError(f"{name} must have shape {want}{named}, got {array.shape}")
    if kind is not None and not jnp.issubdtype(array.dtype, _KINDS[kind]):
        raise TypeError(f"{name} must be {kind}, got dtype {array.dtype}")
    if dtype is not None and array.dtype != dtype:
        raise TypeError(f"{name} must have dtype {jnp.dtype(dtype)}, got {array.dtype}")
    if min_rows is not None and (array.ndim == 0 or array.shape[0] < min_rows):
        raise ValueError(f"{name} needs at least {min_rows} rows, got shape {array.shape}")
    bounded = lower is not None or upper is not None
    if (finite or bounded or integer_valued) and is_concrete(array):
        # on the host: under an enclosing jit a jnp reduction of a constant is staged (a tracer)
        _check_values(name, np.asarray(array), finite=finite, lower=lower, upper=upper,
                      lower_inclusive=lower_inclusive, upper_inclusive=upper_inclusive,
                      integer_valued=integer_valued)
    return array


def _interval(lower, upper, lower_inclusive, upper_inclusive) -> str:
    """``>= 0``, ``> 0``, ``<= 1``, ``in [0, 1)``, …: the set a bounded value must lie in."""
    if upper is None:
        return f"{'>=' if lower_inclusive else '>'} {lower:g}"
    if lower is None:
        return f"{'<=' if upper_inclusive else '<'} {upper:g}"
    return (f"in {'[' if lower_inclusive else '('}{lower:g}, {upper:g}"
            f"{']' if upper_inclusive else ')'}")


def _shown(host: np.ndarray) -> str:
    if host.size == 1:
        return f"{host.reshape(-1)[0]:.7g}"
    if np.issubdtype(host.dtype, np.inexact) and np.any(np.isnan(host)):
        return "NaN entries"
    return f"values in [{host.min():.7g}, {host.max():.7g}]"


def _check_values(name, host, *, finite, lower, upper, lower_inclusive, upper_inclusive,
                  integer_valued):
    """The value checks of :func:`check_array` on a host copy of the array."""
    inexact = np.issubdtype(host.dtype, np.inexact)
    if lower is not None or upper is not None:
        # written as "not inside" so that NaN fails every bound
        inside = np.ones(host.shape, bool)
        if lower is not None:
            inside &= host >= lower if lower_inclusive else host > lower
        if upper is not None:
            inside &= host <= upper if upper_inclusive else host < upper
        if finite and inexact:
            inside &= np.isfinite(host)
        if not np.all(inside):
            need = ("finite and " if finite else "") + _interval(lower, upper, lower_inclusive,
                                                                 upper_inclusive)
            raise ValueError(f"{name} must be {need}, got {_shown(host)}")
    elif finite and inexact and not np.all(np.isfinite(host)):
        raise ValueError(f"{name} must be finite; got NaN or inf entries")
    if integer_valued and inexact:
        fractional = np.isfinite(host) & (host != np.round(host))
        if np.any(fractional):
            raise ValueError(f"{name} must hold whole numbers, got {host[fractional][0]}")


def _leaf_name(name: str, path) -> str:
    return name + jax.tree_util.keystr(path)


def check_position(name: str, position, *, batch_ndim: int = 0, finite: bool = True,
                   kind: str = "floating"):
    """A position: an array or a pytree of arrays (``kind``) sharing ``batch_ndim`` leading axes.

    Every leaf is checked as :func:`check_array` does (``kind``, finite when concrete) and named
    by its path (``position['mu']``); a point needs at least one coordinate, and a batch needs
    the same leading axes on every leaf. Returns the position with leaves as JAX arrays (an array
    stays an array: the flat path).
    """
    if position is None or isinstance(position, str | bytes):
        raise TypeError(f"{name} must be an array or a pytree of arrays, got "
                        f"{type(position).__name__}")
    leaves = jax.tree_util.tree_flatten_with_path(position)[0]
    if not leaves:
        raise ValueError(f"{name} must have at least one array leaf, got {position!r}")
    batch = None
    checked = []
    for path, leaf in leaves:
        leaf_name = _leaf_name(name, path)
        leaf = check_array(leaf_name, leaf, kind=kind, finite=finite)
        if leaf.ndim < batch_ndim:
            raise ValueError(f"{leaf_name} must have {batch_ndim} leading batch axis(es), got "
                             f"shape {leaf.shape}")
        if batch is None:
            batch = leaf.shape[:batch_ndim]
        elif leaf.shape[:batch_ndim] != batch:
            raise ValueError(f"{leaf_name} must have leading axes {batch} like the first leaf, "
                             f"got shape {leaf.shape}")
        checked.append(leaf)
    if sum(math.prod(leaf.shape[batch_ndim:]) for leaf in checked) == 0:
        raise ValueError(f"{name} needs at least one coordinate per point, got shapes "
                         f"{[leaf.shape for leaf in checked]}")
    return jax.tree.unflatten(jax.tree.structure(position), checked)


def _describe(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def check_initial_logdensity(name: str, fn, logdensity, position, *, batch_ndim: int = 0):
    """Refuse a start where ``fn`` is non-finite at every point, when the values are concrete.

    Called by ``init`` with the log-densities it computed (``logdensity`` of the batch shape) and
    the ``position`` they came from. Under ``jit``/``vmap`` (tracers) nothing is checked: the
    sampler's ``Info.nonfinite`` reports it. One finite point is enough to pass (a particle
    method recovers from the others).

    Raises:
        ValueError: naming ``fn`` and the first offending input.
    """
    if not (is_concrete(logdensity) and is_concrete(position)):
        return
    values = np.asarray(logdensity)
    if values.size == 0 or np.any(np.isfinite(values)):
        return
    index = (0,) * batch_ndim
    first = jax.tree.map(lambda leaf: np.asarray(leaf)[index], position)
    shown = np.array2string(first, threshold=8) if isinstance(first, np.ndarray) else repr(
        jax.tree.map(lambda a: np.array2string(a, threshold=8), first))
    where = f"position[{', '.join(map(str, index))}]" if batch_ndim else "position"
    raise ValueError(
        f"{name} ({_describe(fn)}) is not finite at any initial point: {name}({where}) = "
        f"{values.reshape(-1)[0]} at {where} = {shown}. Start where the density is positive "
        "(e.g. inside the support of a constrained parameter).")


def check_finite_start(name: str, fn, position, *, batched: bool = False):
    """:func:`check_initial_logdensity` for a cloud whose ``init`` computes no density (ETD).

    Evaluates ``fn`` at every initial particle (``position``: ``(N, ...)`` leaves; ``batched``:
    ``fn`` takes the whole cloud) only when ``position`` is concrete, so a traced ``init`` adds
    nothing to the computation; one batched density evaluation otherwise.

    Raises:
        ValueError: ``fn`` is finite at no particle (naming it and the first particle).
    """
    if not is_concrete(position):
        return
    values = fn(position) if batched else jax.vmap(fn)(position)
    check_initial_logdensity(name, fn, values, position, batch_ndim=1)


AUTODIFF = "autodiff"


def _same_callable(a, b) -> bool:
    """The same function, or the same method of the same object (a Python or an equinox bound
    method: each attribute access makes a new one)."""
    if a is b:
        return True
    func_a, func_b = getattr(a, "__func__", None), getattr(b, "__func__", None)
    return (func_a is not None and func_a is func_b
            and getattr(a, "__self__", None) is getattr(b, "__self__", None))


def _same_construction(candidate, reference, depth: int = 0) -> bool:
    """Whether two functions were built by the same code with equal captured settings.

    Walks both closures in parallel: equal code objects, captured values equal (numbers,
    strings, tuples, None), identical (the same object) or themselves the same construction.
    Anything else (including an unreadable closure) counts as different.
    """
    if _same_callable(candidate, reference):
        return True
    if depth > 8:
        return False
    code_a, code_b = getattr(candidate, "__code__", None), getattr(reference, "__code__", None)
    if code_a is None or code_a is not code_b:
        return False
    cells_a, cells_b = candidate.__closure__ or (), reference.__closure__ or ()
    if len(cells_a) != len(cells_b):
        return False
    for cell_a, cell_b in zip(cells_a, cells_b, strict=True):
        try:
            a, b = cell_a.cell_contents, cell_b.cell_contents
        except ValueError:
            return False
        if _same_callable(a, b):
            continue
        if isinstance(a, bool | int | float | str | tuple | type(None)) and type(a) is type(b):
            if a != b:
                return False
        elif not _same_construction(a, b, depth + 1):
            return False
    return True


def _is_inline_grad(score_fn, logdensity_fn) -> bool:
    """``score_fn`` is ``jax.grad(logdensity_fn)`` with default arguments (checked, not guessed).

    ``jax.grad`` keeps ``logdensity_fn`` in ``__wrapped__`` but not its options; the check builds
    a fresh ``jax.grad(logdensity_fn)`` and compares the two constructions (code and captured
    ``argnums``, ``has_aux``, ``holomorphic``, ``allow_int``) and their docstrings (which name
    ``argnums``). If anything cannot be read, it is a user function.
    """
    if not _same_callable(getattr(score_fn, "__wrapped__", None), logdensity_fn):
        return False
    reference = jax.grad(logdensity_fn)
    return (score_fn.__doc__ is not None and score_fn.__doc__ == reference.__doc__
            and _same_construction(score_fn, reference))


def resolve_score_fn(score_fn, logdensity_fn, *, default: str | None):
    """The one spelling rule for score arguments; returns ``None``, ``"autodiff"`` or a callable.

    * ``"autodiff"``: differentiate ``logdensity_fn`` inside the compiled step. The step's cache
      key is then the density alone, so a sweep over any float hyper-parameter compiles once.
    * ``None``: ``default`` — ``None`` (score-free) where the method has a score-free mode,
      ``"autodiff"`` where it always needs a gradient.
    * ``jax.grad(logdensity_fn)`` (with default options, even written inline at every call):
      recognised as ``"autodiff"``, the same compiled step.
    * any other callable: the user's score, part of the cache key (build it once to reuse the
      compilation).

    Raises:
        TypeError: ``score_fn`` is neither ``None``, ``"autodiff"`` nor callable.
    """
    if score_fn is None:
        return default
    if isinstance(score_fn, str):
        return check_choice("score_fn", score_fn, (AUTODIFF,))
    check_callable("score_fn", score_fn)
    return AUTODIFF if _is_inline_grad(score_fn, logdensity_fn) else score_fn


def score_callable(score_fn, logdensity_fn, *, batched: bool = False):
    """Inside a step: the score as a function (``"autodiff"`` becomes ``jax.grad`` of the density).

    ``batched``: ``logdensity_fn`` maps ``(n, d)`` blocks to ``(n,)``, and so does the score
    (the gradient of the sum, since every row's density depends on its row only).
    """
    if not (isinstance(score_fn, str) and score_fn == AUTODIFF):
        return score_fn
    if batched:
        return jax.grad(lambda x: jnp.sum(logdensity_fn(x)))
    return jax.grad(logdensity_fn)


def _shapes(structs) -> str:
    return " and ".join(str(tuple(s.shape)) for s in structs)


def check_fn_output(name: str, fn, example_input_struct, want_shape: Sequence[int], *,
                    kind: str | None = "floating", dtype=None):
    """Probe a user function once with ``jax.eval_shape`` (no FLOPs) and check what it returns.

    Args:
        name: the function's argument name, for messages.
        fn: the user's callable.
        example_input_struct: a ``jax.ShapeDtypeStruct`` (one argument) or a tuple of them (the
            positional arguments).
        want_shape: the shape the output must have.
        kind: the output's dtype kind (as :func:`check_array`), or ``None`` for any.
        dtype: an exact dtype the output must have.

    Returns:
        The output's ``jax.ShapeDtypeStruct``.

    Raises:
        ValueError: ``fn`` fails on inputs of these shapes or returns another shape ("``name``
            must map input of shape … to shape …, got …").
        TypeError: the output has another dtype kind or dtype.
    """
    check_callable(name, fn)
    structs = (example_input_struct if isinstance(example_input_struct, tuple)
               else (example_input_struct,))
    want = tuple(want_shape)
    expected = f"{name} must map input of shape {_shapes(structs)} to shape {want}"
    try:
        out = jax.eval_shape(fn, *structs)
    except Exception as err:  # noqa: BLE001 - re-raised naming the argument and the shapes
        raise ValueError(f"{expected}; it failed on such input: {err}") from err
    if not hasattr(out, "shape") or tuple(out.shape) != want:
        got = (f"shape {tuple(out.shape)}" if hasattr(out, "shape")
               else type(out).__name__)
        raise ValueError(f"{expected}, got {got}")
    if kind is not None and not jnp.issubdtype(out.dtype, _KINDS[kind]):
        raise TypeError(f"{name} must return a {kind} array, got dtype {out.dtype}")
    if dtype is not None and out.dtype != dtype:
        raise TypeError(f"{name} must return dtype {jnp.dtype(dtype)}, got {out.dtype}")
    return out


def _sum_tolerance(num_categories: int) -> float:
    # a law normalised in float32 (the sum of K terms, then K divisions) is off by <= ~2K·eps32;
    # float32's eps whatever the dtype, so float32 laws cast to float64 still pass
    return 4 * num_categories * float(np.finfo(np.float32).eps)


def check_simplex(name: str, value, *, shape: Sequence[int | None] | None = None,
                  ndim: int | None = None) -> jax.Array:
    """Probability vectors along the last axis: floating, finite, ``>= 0``, each summing to 1.

    Any leading axes are a batch of laws (a ``(S, A, S)`` transition tensor is ``S·A`` laws over
    the next state). The sums are checked when concrete, to ``4K·ε`` of float32 for ``K``
    categories (a law normalised in float32 passes, also when cast to float64).
    Returns the array (unchanged dtype).
    """
    array = check_array(name, value, shape=shape, ndim=ndim, finite=True)
    if array.ndim == 0:
        raise ValueError(f"{name} must have a last axis of categories, got a scalar")
    if is_concrete(array):
        host = np.asarray(array)
        if np.any(host < 0):
            raise ValueError(f"{name} must be nonnegative, got minimum {host.min()}")
        sums = host.sum(axis=-1, dtype=np.float64)
        if np.any(np.abs(sums - 1) > _sum_tolerance(host.shape[-1])):
            worst = sums.reshape(-1)[np.argmax(np.abs(sums - 1).reshape(-1))]
            raise ValueError(f"{name} must sum to 1 along its last axis, got a sum of {worst}")
    return array


def check_stochastic_matrix(name: str, value, *, size: int | None = None) -> jax.Array:
    """A square row-stochastic ``(n, n)`` matrix (rows as :func:`check_simplex` checks them)."""
    array = check_array(name, value, ndim=2, finite=True)
    if array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {array.shape}")
    if size is not None and array.shape[0] != size:
        raise ValueError(f"{name} must have shape ({size}, {size}), got {array.shape}")
    return check_simplex(name, array)


def common_float_dtype(**values):
    """The one floating dtype shared by the floating array leaves of ``values`` (pytrees).

    Python numbers and weakly typed arrays adapt to the others and are not counted; neither are
    integer arrays. With no floating leaf: the default floating dtype (float64 when x64 is
    enabled, else float32).

    Raises:
        TypeError: two arguments carry different floating dtypes (naming them).
    """
    dtypes = {}
    for arg, tree in values.items():
        for leaf in jax.tree.leaves(tree):
            if (hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)
                    and not getattr(leaf, "weak_type", False)):
                dtypes.setdefault(arg, set()).add(jax.dtypes.canonicalize_dtype(leaf.dtype))
    found = set().union(*dtypes.values()) if dtypes else set()
    if len(found) > 1:
        shown = ", ".join(f"{arg}: {'/'.join(sorted(map(str, d)))}" for arg, d in dtypes.items())
        raise TypeError(f"floating arguments must share one dtype, got {shown}")
    return found.pop() if found else jax.dtypes.canonicalize_dtype(jnp.float64)


def check_clamp(clamp, shape: tuple[int, int], vocab_size: int):
    """A token sampler's ``clamp=(mask, tokens)``: positions held at given tokens.

    ``mask`` (bool) and ``tokens`` (integer ids in ``[0, vocab_size)`` where clamped) are each
    ``(seq_len,)`` or ``(num_samples, seq_len)``; returns them broadcast to ``shape``
    ``(num_samples, seq_len)`` as bool and int32 arrays, or None.
    """
    if clamp is None:
        return None
    if not isinstance(clamp, tuple | list) or len(clamp) != 2:
        raise TypeError(f"clamp must be a pair (mask, tokens) or None, got {type(clamp).__name__}")
    mask = check_array("clamp[0] (mask)", clamp[0], kind="bool")
    tokens = check_array("clamp[1] (tokens)", clamp[1], kind="integer")
    for name, value in (("clamp[0] (mask)", mask), ("clamp[1] (tokens)", tokens)):
        if value.shape not in (shape[1:], shape):
            raise ValueError(f"{name} must have shape (seq_len,) = {shape[1:]} or (num_samples, "
                             f"seq_len) = {shape}, got {value.shape}")
    if is_concrete(tokens) and is_concrete(mask):
        ids = np.broadcast_to(np.asarray(tokens), shape)[np.broadcast_to(np.asarray(mask), shape)]
        if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
            raise ValueError(f"clamp[1] (tokens) must be token ids in [0, vocab_size={vocab_size}) "
                             f"at clamped positions, got range [{ids.min()}, {ids.max()}]")
    return (jnp.broadcast_to(mask, shape),
            jnp.broadcast_to(tokens.astype(jnp.int32), shape))
