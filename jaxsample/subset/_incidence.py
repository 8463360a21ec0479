"""Incidence checks shared by the subset family's coverage method and its greedy baseline."""

from __future__ import annotations

import jax.numpy as jnp

from jaxsample._checks import check_array
from jaxsample.kernels.coverage import PaddedIncidence


def _float_dtype(incidence, weights):
    if weights is not None:
        return jnp.asarray(weights).dtype
    if (not isinstance(incidence, PaddedIncidence) and hasattr(incidence, "dtype")
            and jnp.issubdtype(incidence.dtype, jnp.floating)):
        return incidence.dtype
    return jnp.zeros(()).dtype


def prepare_incidence(incidence, weights=None) -> tuple:
    """Checks an incidence and element weights; returns them as the kernels take them.

    A dense ``(n, m)`` bool/0-1 incidence becomes a float array of the weights' dtype; a
    :class:`PaddedIncidence` passes through. ``weights`` default to ones.

    Raises:
        ValueError, TypeError: naming ``incidence`` or ``weights``: wrong rank, non-finite or
            non-0/1 entries, negative or non-finite weights, mismatched n.
    """
    dtype = _float_dtype(incidence, weights)
    if isinstance(incidence, PaddedIncidence):
        n = incidence.indices.shape[0]
    else:
        incidence = check_array("incidence", incidence, ndim=2, kind=None, min_rows=1)
        if not (jnp.issubdtype(incidence.dtype, jnp.number)
                or jnp.issubdtype(incidence.dtype, jnp.bool_)):
            raise TypeError(f"incidence must be bool or numeric, got dtype {incidence.dtype}")
        if incidence.shape[1] < 1:
            raise ValueError(f"incidence needs at least one set (column), got {incidence.shape}")
        if not jnp.issubdtype(incidence.dtype, jnp.bool_):
            # 0/1 entries: whole numbers in [0, 1]
            check_array("incidence", incidence, kind="numeric", finite=True, lower=0, upper=1,
                        integer_valued=True)
        n = incidence.shape[0]
        incidence = incidence.astype(dtype)
    if weights is None:
        weights = jnp.ones((n,), dtype)
    else:
        weights = check_array("weights", weights, shape=(n,), finite=True, lower=0)
    return incidence, weights
