"""Argument checks shared by the particle methods built on a data set (MM-SOLD, its tilt, the
smoothed-Langevin and CFDM baselines)."""

from __future__ import annotations

import jax

from jaxsample._checks import check_array, check_int

__all__ = ["check_data", "check_num_smoothing_samples"]


def check_data(data, name: str = "data") -> jax.Array:
    """``(n, d)`` finite floating data, ``n >= 1`` and ``d >= 1``."""
    data = check_array(name, data, ndim=2, finite=True, min_rows=1)
    if data.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n, d) with d >= 1, got shape {data.shape}")
    return data


def check_num_smoothing_samples(value) -> int:
    """An even count ``>= 2`` of smoothing samples (drawn in antithetic pairs)."""
    value = check_int("num_smoothing_samples", value, 2)
    if value % 2:
        raise ValueError(f"num_smoothing_samples must be even (antithetic pairs), got {value}")
    return value
