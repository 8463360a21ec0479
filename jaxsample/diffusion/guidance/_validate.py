"""Eager checks shared by the guidance terms, solvers and the sampler (public names of a private
module, so the package's modules share them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample._checks import is_concrete


def is_active(value) -> bool:
    """False only for a concrete 0: the term or option is then a static branch."""
    return not (is_concrete(value) and float(value) == 0)


def probe(name, fn, *args):
    """``jax.eval_shape(fn, *args)``, a failure re-raised naming the argument."""
    try:
        return jax.eval_shape(fn, *args)
    except Exception as err:   # noqa: BLE001 - re-raised with the argument's name
        raise ValueError(f"{name} failed on one sample of the batch: {err}") from err


def check_scalar_fn(name, fn, *args):
    """``fn(*args)`` must be a floating scalar (shapes only, nothing runs)."""
    out = probe(name, fn, *args)
    if getattr(out, "shape", None) != () or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"{name} must return a floating scalar for one sample, got "
                         f"{getattr(out, 'shape', type(out).__name__)}")
