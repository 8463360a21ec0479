"""Reward laws for Best-of-N analysis: Normal, Gumbel, GPD and a smoothed Empirical law.

Each law is an equinox Module (a pytree: its parameters are array leaves, so laws pass through
``jit`` and ``vmap`` and their parameters can be traced or differentiated) exposing

* ``logpdf(x)``, ``logcdf(x)``, ``logsf(x)`` (log survival ``log P(R > x)``, accurate far in the
  upper tail where ``logcdf`` rounds to 0);
* ``bracket(log_sf) -> (lo, hi)`` with ``logsf(lo) >= log_sf >= logsf(hi)`` (``lo = hi`` is the
  exact upper quantile for the parametric laws);
* ``breakpoints()``: the ends of the support (``±inf`` where unbounded), where a density may jump;
* ``sample(key, shape, dtype)``.

Parameters are stored as given; every method computes in the dtype of its argument ``x`` (or the
``dtype`` asked for). Constructors check concrete parameters (positive scales, finite values).
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtri

from jaxsample._checks import check_array, check_chunk_size, is_concrete
from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.extremes import (
    expm1_ratio,
    gpd_inverse_logsf,
    gpd_logpdf,
    gpd_logsf,
    log1p_ratio,
)
from jaxsample.kernels.logspace import log1mexp

__all__ = ["GPD", "Empirical", "Gumbel", "Normal", "RewardLaw"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _parameter(name, value, *, positive=False):
    """A real scalar parameter, finite (and ``> 0`` where ``positive``) when concrete."""
    bound = dict(lower=0, lower_inclusive=False) if positive else {}
    return check_array(name, value, shape=(), kind="numeric", finite=True, **bound)


def _cast(value, dtype):
    return jnp.asarray(value).astype(dtype)


def standard_normal_isf(log_sf):
    """``z`` with ``log Φ̄(z) = log_sf``, accurate in both tails.

    ``Φ̄⁻¹(q) = −Φ⁻¹(q)`` (``jax.scipy.special.ndtri``) in the upper tail and ``Φ⁻¹(1 − q)`` with
    ``1 − q = −expm1(log q)`` formed exactly in the lower. ``jax.scipy.stats.norm.isf(q)`` is
    ``ppf(1 − q)``: it loses relative accuracy as ``q → 0`` and returns ``+inf`` once ``1 − q``
    rounds to 1 (``q ≲ 3·10⁻⁸`` in float32, ``6·10⁻¹⁷`` in float64), tail levels these laws are
    inverted at; and it takes ``q``, not ``log q``.
    """
    upper = log_sf < math.log(0.5)
    low_arg = jnp.where(upper, jnp.full_like(log_sf, -1.0), log_sf)
    return jnp.where(upper, -ndtri(jnp.exp(log_sf)), ndtri(-jnp.expm1(low_arg)))


class RewardLaw(eqx.Module):
    """Base of the reward laws (see the module docstring for the interface)."""

    # ``bracket`` returns the exact quantile (lo = hi): no bisection needed to invert the law
    exact_quantile: ClassVar[bool] = False

    def logpdf(self, x):
        raise NotImplementedError

    def logcdf(self, x):
        raise NotImplementedError

    def logsf(self, x):
        raise NotImplementedError

    def bracket(self, log_sf):
        raise NotImplementedError

    def breakpoints(self, dtype):
        return jnp.zeros((0,), dtype)

    def sample(self, key, shape, dtype):
        raise NotImplementedError


class Normal(RewardLaw):
    """Normal rewards ``N(mean, sd²)``.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(jnp.exp(Normal(0.0, 1.0).logsf(jnp.array(1.96)))), 4)
        0.025
    """

    exact_quantile: ClassVar[bool] = True
    mean: jax.Array
    sd: jax.Array

    def __init__(self, mean, sd):
        self.mean = _parameter("mean", mean)
        self.sd = _parameter("sd", sd, positive=True)

    def _z(self, x):
        return (x - _cast(self.mean, x.dtype)) / _cast(self.sd, x.dtype)

    def logpdf(self, x):
        z = self._z(x)
        return -0.5 * z * z - jnp.log(_cast(self.sd, x.dtype)) - _HALF_LOG_2PI

    def logcdf(self, x):
        return log_ndtr(self._z(x))

    def logsf(self, x):
        return log_ndtr(-self._z(x))

    def bracket(self, log_sf):
        x = _cast(self.mean, log_sf.dtype) + _cast(self.sd, log_sf.dtype) * standard_normal_isf(
            log_sf)
        return x, x

    def sample(self, key, shape, dtype):
        z = jax.random.normal(key, shape, dtype)
        return _cast(self.mean, dtype) + _cast(self.sd, dtype) * z


class Gumbel(RewardLaw):
    """Gumbel (maximum) rewards: ``F(x) = exp(−exp(−(x − loc)/scale))``, exponential right tail.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(jnp.exp(Gumbel(0.0, 1.0).logcdf(jnp.array(0.0)))), 4)  # 1/e
        0.3679
    """

    exact_quantile: ClassVar[bool] = True
    loc: jax.Array
    scale: jax.Array

    def __init__(self, loc, scale):
        self.loc = _parameter("loc", loc)
        self.scale = _parameter("scale", scale, positive=True)

    def _z(self, x):
        z = (x - _cast(self.loc, x.dtype)) / _cast(self.scale, x.dtype)
        # exp(−z) must stay finite: below this every probability is already 0 or 1
        return jnp.maximum(z, -0.9 * math.log(jnp.finfo(x.dtype).max))

    def logpdf(self, x):
        z = self._z(x)
        return -jnp.log(_cast(self.scale, x.dtype)) - z - jnp.exp(-z)

    def logcdf(self, x):
        return -jnp.exp(-self._z(x))

    def logsf(self, x):
        z = self._z(x)
        # log(1 − exp(−t)), t = e^{−z}: −z + log(expm1(−t)/(−t)), exact for small t
        return -z + jnp.log(expm1_ratio(-jnp.exp(-z)))

    def bracket(self, log_sf):
        q = jnp.exp(log_sf)
        # t = −log(1 − q), log t = log_sf + log(log1p(−q)/(−q))
        z = -log_sf - jnp.log(log1p_ratio(-q))
        x = _cast(self.loc, log_sf.dtype) + _cast(self.scale, log_sf.dtype) * z
        return x, x

    def sample(self, key, shape, dtype):
        return _cast(self.loc, dtype) + _cast(self.scale, dtype) * jax.random.gumbel(
            key, shape, dtype)


class GPD(RewardLaw):
    """Generalised Pareto rewards: ``P(R > loc + y) = (1 + shape·y/scale)^{−1/shape}``, ``y >= 0``.

    ``shape > 0``: Pareto-type heavy tail (index ``1/shape``); ``shape = 0``: the shifted
    exponential; ``shape < 0``: bounded support ending at ``loc − scale/shape``.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(GPD(1.0, 2.0, 0.0).logsf(jnp.array(3.0))), 4)  # exponential: −y/scale
        -1.0
    """

    exact_quantile: ClassVar[bool] = True
    loc: jax.Array
    scale: jax.Array
    shape: jax.Array

    def __init__(self, loc, scale, shape):
        self.loc = _parameter("loc", loc)
        self.scale = _parameter("scale", scale, positive=True)
        self.shape = _parameter("shape", shape)

    def _args(self, x):
        return (x - _cast(self.loc, x.dtype), _cast(self.shape, x.dtype),
                _cast(self.scale, x.dtype))

    def logpdf(self, x):
        return gpd_logpdf(*self._args(x))

    def logsf(self, x):
        return gpd_logsf(*self._args(x))

    def logcdf(self, x):
        return log1mexp(self.logsf(x))

    def bracket(self, log_sf):
        dtype = log_sf.dtype
        x = _cast(self.loc, dtype) + gpd_inverse_logsf(log_sf, _cast(self.shape, dtype),
                                                       _cast(self.scale, dtype))
        return x, x

    def breakpoints(self, dtype):
        shape, scale = _cast(self.shape, dtype), _cast(self.scale, dtype)
        safe = jnp.where(shape < 0, shape, -jnp.ones_like(shape))
        upper = jnp.where(shape < 0, -scale / safe, jnp.inf)
        loc = _cast(self.loc, dtype)
        return jnp.stack([loc, loc + upper])

    def sample(self, key, shape, dtype):
        log_u = jnp.log(jax.random.uniform(key, shape, dtype, minval=jnp.finfo(dtype).tiny))
        return self.bracket(log_u)[0]


class Empirical(RewardLaw):
    """A Gaussian-kernel-smoothed empirical law of observed reward scores.

    ``F(x) = (1/m)·Σ_j Φ((x − s_j)/h)``: a continuous law (a density, so Best-of-N accuracy is
    well defined without ties) whose bulk follows the scores. Its upper tail beyond ``max s_j``
    is Gaussian of width ``h``: for ``N`` far beyond the number of scores, extrapolate with fitted
    tails (:func:`jaxsample.risk.tail_tension`) rather than with this law.

    Args:
        scores: ``(m,)`` finite reward scores, ``m >= 2``.
        bandwidth: kernel width ``h > 0``; default Silverman's rule
            ``0.9·min(sd, IQR/1.34)·m^{−1/5}``.
        chunk_size: evaluation points processed at once (each meets all ``m`` scores); ``None``
            evaluates all points densely (``points × m`` memory).

    Example:
        >>> import jax.numpy as jnp
        >>> law = Empirical(jnp.array([0.0, 1.0, 2.0, 3.0]), bandwidth=0.1)
        >>> round(float(jnp.exp(law.logcdf(jnp.array(1.5)))), 4)
        0.5
    """

    scores: jax.Array
    bandwidth: jax.Array
    chunk_size: int | None = eqx.field(static=True)

    def __init__(self, scores, bandwidth=None, *, chunk_size=None):
        scores = check_array("scores", scores, ndim=1, finite=True, min_rows=2)
        self.chunk_size = check_chunk_size(chunk_size)
        if bandwidth is None:
            if not is_concrete(scores):
                raise ValueError("bandwidth must be given when scores are traced")
            host = np.asarray(scores, np.float64)
            iqr = np.subtract(*np.percentile(host, [75, 25]))
            spread = min(host.std(ddof=1), iqr / 1.34) if iqr > 0 else host.std(ddof=1)
            if not spread > 0:
                raise ValueError("scores have no spread; give a bandwidth")
            bandwidth = 0.9 * spread * host.shape[0] ** -0.2
        self.scores = scores
        self.bandwidth = _parameter("bandwidth", bandwidth, positive=True)

    def _reduce(self, x, fn):
        s = self.scores.astype(x.dtype)
        h = _cast(self.bandwidth, x.dtype)
        flat = x.reshape(-1, 1)

        def rows(block):
            return jax.nn.logsumexp(fn((block - s[None, :]) / h, h), axis=1)

        out = map_rows(rows, flat, chunk_size=self.chunk_size)
        return (out - jnp.log(jnp.asarray(s.shape[0], x.dtype))).reshape(x.shape)

    def logpdf(self, x):
        return self._reduce(x, lambda z, h: -0.5 * z * z - jnp.log(h) - _HALF_LOG_2PI)

    def logcdf(self, x):
        return self._reduce(x, lambda z, h: log_ndtr(z))

    def logsf(self, x):
        return self._reduce(x, lambda z, h: log_ndtr(-z))

    def bracket(self, log_sf):
        s = self.scores.astype(log_sf.dtype)
        z = _cast(self.bandwidth, log_sf.dtype) * standard_normal_isf(log_sf)
        return jnp.min(s) + z, jnp.max(s) + z

    def sample(self, key, shape, dtype):
        key_index, key_noise = jax.random.split(key)
        index = jax.random.randint(key_index, shape, 0, self.scores.shape[0])
        noise = jax.random.normal(key_noise, shape, dtype)
        return self.scores.astype(dtype)[index] + _cast(self.bandwidth, dtype) * noise
