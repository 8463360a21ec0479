"""Baselines for two-level softmax sampling: the exact softmax draw and uniform negatives.

:func:`exact_sample` computes all N logits per query and draws from ``softmax(X q / tau)``, either
by inverse CDF (one uniform per draw, :func:`jaxsample.kernels.resampling.categorical`) or by
``jax.random.categorical`` (Gumbel-max: one Gumbel per item per draw); it is what a user picks
when the two-level proposal is not wanted. :func:`uniform_sample` is the negative sampler of the
simplest sampled-softmax losses.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from jaxsample._checks import (
    check_array,
    check_choice,
    check_chunk_size,
    check_hyperparameter,
    check_int,
    check_key,
)
from jaxsample.kernels.chunking import map_rows
from jaxsample.kernels.resampling import categorical
from jaxsample.softmax.two_level import SoftmaxInfo

__all__ = ["METHODS", "exact_sample", "uniform_sample"]

METHODS = ("inverse_cdf", "gumbel")


def exact_sample(key, embeddings, queries, *, num_samples: int, temperature=1.0,
                 method: str = "inverse_cdf", chunk_size: int | None = None):
    """Draws from the exact softmax ``p(i) = softmax(X q / tau)_i``, all N logits per query.

    Args:
        key: PRNG key.
        embeddings: ``(N, d)`` item table.
        queries: ``(B, d)`` in the embeddings' dtype.
        num_samples: S draws per query (with replacement).
        temperature: tau > 0 (traced).
        method: ``"inverse_cdf"`` (cumulative sum + binary search, one uniform per draw) or
            ``"gumbel"`` (``jax.random.categorical``, ``S x N`` Gumbels per query).
        chunk_size: queries per chunk (at most ``chunk_size x N`` logits at once); None for all.

    Returns:
        ``(items, info)``: ``(B, S)`` int32 and a :class:`~jaxsample.softmax.SoftmaxInfo` whose
        ``log_q`` is the exact ``log p`` of each draw.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> items, info = exact_sample(jax.random.key(0), jnp.eye(3), jnp.zeros((2, 3)),
        ...                            num_samples=4)
        >>> items.shape, round(float(jnp.exp(info.log_q[0, 0])), 4)
        ((2, 4), 0.3333)
    """
    key = check_key("key", key)
    embeddings = check_array("embeddings", embeddings, ndim=2)
    queries = check_array("queries", queries, shape=(None, embeddings.shape[1]),
                          dtype=embeddings.dtype)
    num_samples = check_int("num_samples", num_samples, 1)
    method = check_choice("method", method, METHODS)
    tau = check_hyperparameter("temperature", temperature)
    return _exact_sample(key, embeddings, queries, tau, num_samples, method,
                         check_chunk_size(chunk_size))


@functools.partial(jax.jit, static_argnames=("num_samples", "method", "chunk_size"))
def _exact_sample(key, embeddings, queries, temperature, num_samples, method, chunk_size):
    tau = jnp.asarray(temperature, queries.dtype)

    def block(keys, rows):
        log_p = jax.nn.log_softmax(rows @ embeddings.T / tau, axis=-1)
        if method == "gumbel":
            draw = lambda k, lp: jax.random.categorical(k, lp, shape=(num_samples,))
        else:
            draw = lambda k, lp: categorical(k, lp, num_samples)
        items = jax.vmap(draw)(keys, log_p)
        return items, jnp.take_along_axis(log_p, items, axis=1)

    with jax.named_scope("exact_sample"):
        keys = jax.random.split(key, queries.shape[0])
        items, log_p = map_rows(block, keys, queries, chunk_size=chunk_size)
        nonfinite = ~(jnp.all(jnp.isfinite(queries), axis=-1) & jnp.all(jnp.isfinite(log_p), -1))
        return items.astype(jnp.int32), SoftmaxInfo(log_p, nonfinite)


def uniform_sample(key, num_items: int, num_queries: int, *, num_samples: int,
                   dtype=jnp.float32):
    """Uniform negatives: ``(num_queries, num_samples)`` ids, each with ``log q = -log N``.

    Example:
        >>> import jax
        >>> items, info = uniform_sample(jax.random.key(0), 10, 2, num_samples=3)
        >>> items.shape, round(float(info.log_q[0, 0]), 4)
        ((2, 3), -2.3026)
    """
    key = check_key("key", key)
    n = check_int("num_items", num_items, 1)
    b = check_int("num_queries", num_queries, 1)
    s = check_int("num_samples", num_samples, 1)
    items = jax.random.randint(key, (b, s), 0, n, dtype=jnp.int32)
    log_q = jnp.full((b, s), -math.log(n), dtype)
    return items, SoftmaxInfo(log_q, jnp.zeros((b,), bool))
