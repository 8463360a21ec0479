"""The variance-preserving noise schedule ᾱ(t) on t ∈ [0, 1]."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_hyperparameter,
    is_concrete,
)

__all__ = ["VPSchedule"]

KINDS = ("linear", "cosine", "table")


class VPSchedule(eqx.Module):
    """A VP noise schedule: x_t = √ᾱ(t)·x₀ + √(1 − ᾱ(t))·ε on t ∈ [0, 1], ᾱ(0) = 1.

    * ``"linear"`` — the continuous DDPM / VP-SDE schedule β(t) = β_min + t(β_max − β_min)
      (Song et al. 2021): ᾱ(t) = exp(−β_min·t − ½(β_max − β_min)·t²); the defaults 0.1, 20 give
      ᾱ(1) ≈ 4.3·10⁻⁵.
    * ``"cosine"`` — Nichol & Dhariwal's (2021) f(t) = cos²(((t + s)/(1 + s))·π/2), rescaled so that
      ᾱ(1) = ``alpha_bar_end`` instead of 0: ᾱ(t) = 1 − (1 − ᾱ_end)(1 − f(t)/f(0)).
    * ``"table"`` — ``alpha_bar`` values at t_j = j/T, j = 1..T (e.g. a pretrained DDPM's
      cumulative products), interpolated linearly in log ᾱ between the nodes and ᾱ(0) = 1.

    A pytree (equinox module): the floats are array leaves, traced under ``jit``/``vmap`` (one
    compilation serves every value); ``kind`` is static. A network trained on integer timesteps
    0..T−1 of a table schedule is called at ``t·T − 1``.

    Args:
        kind: ``"linear"``, ``"cosine"`` or ``"table"``.
        beta_min, beta_max: linear schedule, 0 ≤ β_min < β_max (defaults 0.1, 20).
        offset: cosine offset s > 0 (default 0.008).
        alpha_bar_end: cosine ᾱ(1) in (0, 1) (default 10⁻⁴).
        alpha_bar: table values, non-increasing, in (0, 1).

    Example:
        >>> import jax.numpy as jnp
        >>> s = VPSchedule("cosine")
        >>> [round(float(v), 4) for v in s.alpha_bar(jnp.array([0.0, 0.5, 1.0]))]
        [1.0, 0.4939, 0.0001]
        >>> t = VPSchedule("table", alpha_bar=[0.9, 0.5, 0.1])
        >>> round(float(t.alpha_bar(jnp.float32(2 / 3))), 4)
        0.5
    """

    kind: str = eqx.field(static=True)
    beta_min: jax.Array | None
    beta_max: jax.Array | None
    offset: jax.Array | None
    alpha_bar_end: jax.Array | None
    table: jax.Array | None

    def __init__(self, kind: str = "linear", *, beta_min=None, beta_max=None, offset=None,
                 alpha_bar_end=None, alpha_bar=None):
        self.kind = check_choice("kind", kind, KINDS)
        given = {"beta_min": beta_min, "beta_max": beta_max, "offset": offset,
                 "alpha_bar_end": alpha_bar_end, "alpha_bar": alpha_bar}
        allowed = {"linear": ("beta_min", "beta_max"), "cosine": ("offset", "alpha_bar_end"),
                   "table": ("alpha_bar",)}[kind]
        for name, value in given.items():
            if value is not None and name not in allowed:
                raise ValueError(f"{name} is not a parameter of the {kind!r} schedule "
                                 f"(its parameters: {', '.join(allowed)})")
        self.beta_min = self.beta_max = self.offset = self.alpha_bar_end = self.table = None
        if kind == "linear":
            self.beta_min = check_hyperparameter("beta_min", 0.1 if beta_min is None else beta_min,
                                                 positive=False)
            self.beta_max = check_hyperparameter("beta_max", 20.0 if beta_max is None else beta_max)
            if is_concrete((self.beta_min, self.beta_max)) and not self.beta_max > self.beta_min:
                raise ValueError(f"beta_max must be > beta_min, got {float(self.beta_max)} <= "
                                 f"{float(self.beta_min)}")
        elif kind == "cosine":
            self.offset = check_hyperparameter("offset", 0.008 if offset is None else offset)
            end = check_hyperparameter("alpha_bar_end", 1e-4 if alpha_bar_end is None
                                       else alpha_bar_end, maximum=1.0)
            if is_concrete(end) and float(end) >= 1:
                raise ValueError(f"alpha_bar_end must lie in (0, 1), got {float(end)}")
            self.alpha_bar_end = end
        else:
            if alpha_bar is None:
                raise ValueError("the 'table' schedule needs alpha_bar (values at t = j/T)")
            table = check_array("alpha_bar", alpha_bar, ndim=1, finite=True, min_rows=1,
                                lower=0, upper=1, lower_inclusive=False, upper_inclusive=False)
            if is_concrete(table) and np.any(np.diff(np.asarray(table)) > 0):
                raise ValueError("alpha_bar must be non-increasing in t")
            self.table = table

    def alpha_bar(self, t: jax.Array) -> jax.Array:
        """ᾱ(t), elementwise, in the dtype of ``t`` (floating)."""
        t = jnp.asarray(t)
        dtype = t.dtype
        if self.kind == "linear":
            lo = jnp.asarray(self.beta_min, dtype)
            hi = jnp.asarray(self.beta_max, dtype)
            return jnp.exp(-(lo * t + 0.5 * (hi - lo) * t * t))
        if self.kind == "cosine":
            s = jnp.asarray(self.offset, dtype)
            end = jnp.asarray(self.alpha_bar_end, dtype)
            f = jnp.cos((t + s) / (1 + s) * (math.pi / 2)) ** 2
            f0 = jnp.cos(s / (1 + s) * (math.pi / 2)) ** 2
            return 1 - (1 - end) * (1 - f / f0)
        table = jnp.asarray(self.table, dtype)
        size = table.shape[0]
        nodes = jnp.arange(size + 1, dtype=dtype) / size
        log_values = jnp.concatenate([jnp.zeros(1, dtype), jnp.log(table)])
        return jnp.exp(jnp.interp(t, nodes, log_values))

    def sigma(self, t: jax.Array) -> jax.Array:
        """σ(t) = √(1 − ᾱ(t))."""
        return jnp.sqrt(1 - self.alpha_bar(t))

