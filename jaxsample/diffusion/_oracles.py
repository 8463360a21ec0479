"""Exact token posteriors for the spherical-flow sampler, so it can be tested without training.

Both oracles take any path of :mod:`jaxsample.diffusion.vmf` (its ``log_likelihood`` gives the
per-position evidence log p_t(x_l | e_k)) and return π_l(k) = p(g_l = k | x, t):

* :class:`Sudoku4Oracle` — data uniform over the 288 valid 4×4 Sudoku grids (every row, column
  and 2×2 box holds each of 4 symbols once); the posterior over grids is enumerated in log space:
  logits_g = Σ_l log p_t(x_l | e_{g_l}), a softmax over the 288 grids, then token marginals;
* :class:`MarkovChainOracle` — data from a first-order Markov chain; noisy positions are HMM
  observations, so forward–backward in log space (``lax.scan``) gives the exact marginals.

Log-likelihoods of −inf (outside the support of the geodesic path's conditional law) are floored
at ``finfo.min/(4·L·V)``: the softmax then gives such grids/states zero weight exactly as −inf
would, but a point outside every support gets the least-violating explanation instead of NaN.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_array
from jaxsample.datasets import sudoku4_grids
from jaxsample.diffusion._paths import FlowPath
from jaxsample.kernels import logspace

__all__ = ["MarkovChainOracle", "Sudoku4Oracle"]

SUDOKU_LEN, SUDOKU_VOCAB = 16, 4


def _floored(log_likelihood):
    size = log_likelihood.size
    floor = jnp.finfo(log_likelihood.dtype).min / (4 * size)
    return jnp.maximum(log_likelihood, floor)


def _evidence(oracle, x, t):
    """Per-position log-evidence ``(L, V)``: the path's log-likelihood, floored; at the clamped
    positions (``oracle.clean``) the token whose embedding is nearest to ``x_l`` (``x_l = e_c``
    there) is observed without noise (0, every other token the floor)."""
    log_lik = _floored(oracle.path.log_likelihood(x, t, oracle.embeddings))
    if oracle.clean is None:
        return log_lik
    nearest = jax.nn.one_hot(jnp.argmax(x @ oracle.embeddings.T, axis=-1), log_lik.shape[-1],
                             dtype=bool)
    exact = jnp.where(nearest, jnp.zeros((), log_lik.dtype),
                      jnp.finfo(log_lik.dtype).min / (4 * log_lik.size))
    return jnp.where(oracle.clean[:, None], exact, log_lik)


def _clamped(oracle, mask):
    mask = jnp.asarray(check_array("mask", mask, ndim=1, kind="bool"))
    return eqx.tree_at(lambda o: o.clean, oracle, mask, is_leaf=lambda leaf: leaf is None)


def _check_embeddings(embeddings, path, vocab=None):
    if not isinstance(path, FlowPath):
        raise TypeError(f"path must be a VMFPath, GeodesicPath or EuclideanPath, got "
                        f"{type(path).__name__}")
    shape = (vocab, path.dim)
    embeddings = check_array("embeddings", embeddings, shape=shape, finite=True)
    path.check_embeddings(embeddings)
    return embeddings


class Sudoku4Oracle(eqx.Module):
    """Exact posterior of the 4×4 Sudoku data (uniform over the 288 valid grids) under a path.

    The grid prior is uniform and the path's normaliser does not depend on the token, so

    .. math::  p(g \\mid x, t) ∝ \\exp\\Big(Σ_l \\log p_t(x_l \\mid e_{g_l})\\Big),
               \\qquad π_l(k) = Σ_g p(g \\mid x, t)\\,[g_l = k]

    (for the vMF path the logits are κ(t)·Σ_l e_{g_l}ᵀx_l). Two ``(288 × 64)`` products per
    sequence; jittable and batched by ``vmap``.

    Args:
        embeddings: ``(4, d)`` token embeddings (unit rows for the spherical paths).
        path: the noise path (its ``log_likelihood``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import vmf
        >>> path = vmf.VMFPath(4, 40.0)
        >>> oracle = vmf.Sudoku4Oracle(jnp.eye(4), path)
        >>> from jaxsample.datasets import sudoku4_grids
        >>> x = jnp.eye(4)[jnp.asarray(sudoku4_grids()[7])]    # a clean grid, (16, 4)
        >>> probs = oracle(x, jnp.float32(1.0))
        >>> int(jnp.argmax(oracle.grid_posterior(x, jnp.float32(1.0)))), probs.shape
        (7, (16, 4))
    """

    embeddings: jax.Array
    path: eqx.Module
    clean: jax.Array | None

    def __init__(self, embeddings, path):
        self.embeddings = _check_embeddings(embeddings, path, SUDOKU_VOCAB)
        self.path = path
        self.clean = None

    def clamped(self, mask) -> Sudoku4Oracle:
        """A copy that reads the positions in ``mask`` (``(L,)`` bool) as *clean*: ``x_l = e_c``
        is token c observed without noise, not a vMF observation at κ(t). What
        :func:`jaxsample.diffusion.vmf.sample` needs for ``clamp=(mask, tokens)`` to give the
        exact conditional law."""
        return _clamped(self, mask)

    def _logits(self, x, t):
        log_lik = _evidence(self, x, t)
        one_hot = jax.nn.one_hot(jnp.asarray(sudoku4_grids()), SUDOKU_VOCAB,
                                 dtype=log_lik.dtype)
        return one_hot.reshape(one_hot.shape[0], -1) @ log_lik.reshape(-1), one_hot

    @eqx.filter_jit
    def grid_posterior(self, x: jax.Array, t: jax.Array) -> jax.Array:
        """p(g | x, t) over :func:`jaxsample.datasets.sudoku4_grids`, ``(288,)``, for ``x``
        ``(16, d)``."""
        return jax.nn.softmax(self._logits(x, t)[0])

    @eqx.filter_jit
    def log_partition(self, x: jax.Array, t: jax.Array) -> jax.Array:
        """log Σ_g exp(logits_g): its gradient in x is the (Euclidean) marginal score."""
        return jax.nn.logsumexp(self._logits(x, t)[0])

    @eqx.filter_jit
    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        """Token marginals π_l(k), ``(16, 4)``, for one noisy grid ``x`` ``(16, d)``."""
        with jax.named_scope("sudoku4_oracle"):
            logits, one_hot = self._logits(x, t)
            posterior = jax.nn.softmax(logits)
            return (posterior @ one_hot.reshape(one_hot.shape[0], -1)).reshape(
                SUDOKU_LEN, SUDOKU_VOCAB)

    def sample_grids(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Uniform draws of valid grids, ``(num_samples, 16)`` int32 (the data law)."""
        index = jax.random.randint(key, (num_samples,), 0, sudoku4_grids().shape[0])
        return jnp.asarray(sudoku4_grids())[index]


class MarkovChainOracle(eqx.Module):
    """Exact token posterior of a first-order Markov chain observed through a path's noise.

    Data: g_1 ~ ``initial``, g_{l+1} | g_l ~ ``transition[g_l]``. Given x, position l is an HMM
    observation with emission log p_t(x_l | e_k), so the forward–backward recursions

    .. math::  α_l(k) = \\log p_t(x_l|e_k) + \\mathrm{LSE}_j(α_{l−1}(j) + \\log T_{jk}),\\quad
               β_l(j) = \\mathrm{LSE}_k(\\log T_{jk} + \\log p_t(x_{l+1}|e_k) + β_{l+1}(k))

    (normalised per step) give π_l ∝ exp(α_l + β_l) in O(L·V²).

    Args:
        initial: ``(V,)`` initial distribution.
        transition: ``(V, V)`` row-stochastic matrix (zeros allowed: forbidden bigrams).
        embeddings: ``(V, d)`` token embeddings.
        path: the noise path.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import vmf
        >>> path = vmf.VMFPath(3, 30.0)
        >>> oracle = vmf.MarkovChainOracle(jnp.full(3, 1 / 3), jnp.array(
        ...     [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]), jnp.eye(3), path)
        >>> probs = oracle(jnp.eye(3)[jnp.array([0, 1, 0, 2])], jnp.float32(1.0))
        >>> jnp.argmax(probs, axis=-1).tolist()
        [0, 1, 0, 2]
    """

    initial: jax.Array
    transition: jax.Array
    embeddings: jax.Array
    path: eqx.Module
    clean: jax.Array | None

    def __init__(self, initial, transition, embeddings, path):
        self.embeddings = _check_embeddings(embeddings, path)
        vocab = self.embeddings.shape[0]
        dtype = self.embeddings.dtype
        self.initial = check_array("initial", initial, shape=(vocab,), finite=True).astype(dtype)
        self.transition = check_array("transition", transition, shape=(vocab, vocab),
                                      finite=True).astype(dtype)
        self.path = path
        self.clean = None

    def clamped(self, mask) -> MarkovChainOracle:
        """A copy that reads the positions in ``mask`` (``(L,)`` bool) as *clean*: ``x_l = e_c``
        is token c observed without noise, not a vMF observation at κ(t). What
        :func:`jaxsample.diffusion.vmf.sample` needs for ``clamp=(mask, tokens)`` to give the
        exact conditional law."""
        return _clamped(self, mask)

    def _passes(self, x, t):
        log_lik = _evidence(self, x, t)
        log_t = jnp.log(self.transition)
        alpha0 = jnp.log(self.initial) + log_lik[0]
        norm0 = jax.nn.logsumexp(alpha0)

        def forward(carry, evidence):
            alpha, total = carry
            alpha = evidence + jax.nn.logsumexp(alpha[:, None] + log_t, axis=0)
            norm = jax.nn.logsumexp(alpha)
            return (alpha - norm, total + norm), alpha - norm

        (_, log_z), alphas = jax.lax.scan(forward, (alpha0 - norm0, norm0), log_lik[1:])
        alphas = jnp.concatenate([(alpha0 - norm0)[None], alphas])

        def backward(beta, evidence):
            beta = jax.nn.logsumexp(log_t + (evidence + beta)[None, :], axis=1)
            beta = beta - jax.nn.logsumexp(beta)
            return beta, beta

        _, betas = jax.lax.scan(backward, jnp.zeros_like(alpha0), log_lik[1:], reverse=True)
        betas = jnp.concatenate([betas, jnp.zeros_like(alpha0)[None]])
        return alphas, betas, log_z

    @eqx.filter_jit
    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        """Token marginals π_l(k), ``(L, V)``, for one noisy sequence ``x`` ``(L, d)``."""
        with jax.named_scope("markov_oracle"):
            alphas, betas, _ = self._passes(x, t)
            return jnp.exp(logspace.log_normalize(alphas + betas))

    @eqx.filter_jit
    def log_partition(self, x: jax.Array, t: jax.Array) -> jax.Array:
        """log Σ_g p(g) Π_l exp(log p_t(x_l | e_{g_l})) (the forward pass's total)."""
        return self._passes(x, t)[2]
