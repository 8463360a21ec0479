"""Eager argument checks shared by the public entry points.

Each raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad value) with a
message that names the argument, says what was expected and shows what came.
"""

from __future__ import annotations

import math

import jax
import numpy as np

__all__ = ["check_chunk_size", "check_int", "check_number"]


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


def check_number(name: str, value, *, positive: bool = True,
                 allow_none: bool = False) -> float | None:
    """A concrete finite real number, ``> 0`` (``positive``) or ``>= 0``; returns a float."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.number | np.ndarray
                                                 | jax.Array):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        value = float(value)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(f"{name} must be a concrete real number, got {value!r}") from err
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        expected = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {expected}, got {value}")
    return value


def check_chunk_size(chunk_size) -> int | None:
    """``None`` (dense) or a positive int of rows per chunk."""
    return check_int("chunk_size", chunk_size, 1, allow_none=True)
