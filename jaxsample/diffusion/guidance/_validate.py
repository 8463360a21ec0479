"""Eager checks shared by the guidance terms, solvers and the sampler (public names of a private
module, so the package's modules share them)."""

from __future__ import annotations

from jaxsample._checks import check_fn_output, is_concrete


def is_active(value) -> bool:
    """False only for a concrete 0: the term or option is then a static branch."""
    return not (is_concrete(value) and float(value) == 0)


def check_scalar_fn(name, fn, *args):
    """``fn(*args)`` must be a floating scalar (shapes only, nothing runs)."""
    return check_fn_output(name, fn, tuple(args), ())
