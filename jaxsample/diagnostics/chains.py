"""Chain diagnostics: rank-normalised split-R̂ and bulk effective sample size; all jittable.

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R̂ for assessing convergence of MCMC", Bayesian Analysis.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["ESSInfo", "RhatInfo", "ess", "rhat"]


class RhatInfo(NamedTuple):
    """What :func:`rhat` reports besides R̂.

    Attributes:
        bulk: bulk R̂ (rank-normalised split chains), scalar or ``(dim,)``.
        tail: tail R̂ (the same on ``|x − median|``), scalar or ``(dim,)``.
        nonfinite: bool scalar, a draw or the statistic is NaN/inf (ranks of NaN draws are
            meaningless: the value is then not trustworthy).
    """

    bulk: jax.Array
    tail: jax.Array
    nonfinite: jax.Array


class ESSInfo(NamedTuple):
    """What :func:`ess` reports besides the effective sample size.

    Attributes:
        nonfinite: bool scalar, a draw or the estimate is NaN/inf.
    """

    nonfinite: jax.Array


def _as_chains(chains):
    chains = jnp.asarray(chains)
    if chains.ndim not in (2, 3):
        raise ValueError("chains must have shape (num_chains, num_draws) or "
                         f"(num_chains, num_draws, dim), got {chains.shape}")
    if chains.shape[1] < 4:
        raise ValueError(f"chains need at least 4 draws each, got {chains.shape[1]}")
    if not jnp.issubdtype(chains.dtype, jnp.floating):
        chains = chains.astype(jnp.result_type(float))
    if chains.ndim == 2:
        chains = chains[..., None]
    half = chains.shape[1] // 2
    # split each chain in two halves (dropping the middle draw of an odd-length chain)
    return jnp.concatenate([chains[:, :half], chains[:, -half:]], axis=0)


def _rank_normalise(chains):
    """z-scores of the pooled ranks: Φ⁻¹((r − 3/8) / (S + 1/4)), per parameter."""
    m, n, d = chains.shape
    flat = chains.reshape(m * n, d)
    ranks = jnp.argsort(jnp.argsort(flat, axis=0), axis=0).astype(chains.dtype) + 1
    z = jax.scipy.special.ndtri((ranks - 0.375) / (m * n + 0.25))
    return z.reshape(m, n, d)


def _rhat_basic(chains):
    m, n, _ = chains.shape
    chain_mean = jnp.mean(chains, axis=1)
    between = n * jnp.var(chain_mean, axis=0, ddof=1)
    within = jnp.mean(jnp.var(chains, axis=1, ddof=1), axis=0)
    var_plus = (n - 1) / n * within + between / n
    return jnp.sqrt(var_plus / within)


def _nonfinite(split, value):
    return ~(jnp.all(jnp.isfinite(split)) & jnp.all(jnp.isfinite(value)))


def rhat(chains) -> tuple[jax.Array, RhatInfo]:
    """Rank-normalised split-R̂: the larger of bulk-R̂ and tail (folded) R̂ (Vehtari et al. 2021).

    Each chain is split in two halves; the draws are replaced by the normal scores of their
    pooled ranks, ``z = Φ⁻¹((r − 3/8)/(S + 1/4))``, and
    ``R̂ = sqrt(((N − 1)/N · W + B/N) / W)`` with ``W`` the mean within-chain variance and
    ``B/N`` the variance of the chain means. Tail R̂ is the same on ``|x − median|``.

    Args:
        chains: ``(num_chains, num_draws)`` or ``(num_chains, num_draws, dim)``, at least 4
            draws per chain.

    Returns:
        ``(rhat, RhatInfo)``: a scalar, or ``(dim,)``; values above ~1.01 signal chains that
        disagree. The Info holds the bulk and tail values.

    Example:
        >>> import jax
        >>> value, info = rhat(jax.random.normal(jax.random.key(0), (4, 500)))
        >>> bool(value < 1.01), bool(info.nonfinite)
        (True, False)
    """
    raw = jnp.asarray(chains)
    split = _as_chains(raw)
    value, info = _rhat(split)
    if raw.ndim == 2:
        return value[0], info._replace(bulk=info.bulk[0], tail=info.tail[0])
    return value, info


@jax.jit
def _rhat(split):
    bulk = _rhat_basic(_rank_normalise(split))
    folded = jnp.abs(split - jnp.median(split.reshape(-1, split.shape[-1]), axis=0)[None, None])
    tail = _rhat_basic(_rank_normalise(folded))
    value = jnp.maximum(bulk, tail)
    return value, RhatInfo(bulk, tail, _nonfinite(split, value))


def _autocovariance(x):
    """Biased autocovariance along axis 1 via FFT, for every chain and parameter."""
    n = x.shape[1]
    centred = x - jnp.mean(x, axis=1, keepdims=True)
    size = 2 * n
    f = jnp.fft.rfft(centred, n=size, axis=1)
    acov = jnp.fft.irfft(f * jnp.conj(f), n=size, axis=1)[:, :n]
    return (acov / n).astype(x.dtype)


def _ess_basic(chains):
    """ESS with Geyer's initial monotone sequence over the multi-chain autocorrelation."""
    m, n, _ = chains.shape
    acov = _autocovariance(chains)  # (m, n, d)
    chain_var = acov[:, 0] * n / (n - 1)
    within = jnp.mean(chain_var, axis=0)
    between_term = jnp.var(jnp.mean(chains, axis=1), axis=0, ddof=1) if m > 1 else 0.0
    var_plus = within * (n - 1) / n + between_term
    rho = 1 - (within[None] - jnp.mean(acov, axis=0)) / var_plus[None]  # (n, d)
    rho = rho.at[0].set(1)  # lag 0 is 1 by definition (the formula gives 1 − O(1/n))
    pairs = n // 2
    pair_sums = rho[0:2 * pairs:2] + rho[1:2 * pairs:2]  # P_k = ρ_2k + ρ_2k+1
    positive = jnp.cumprod(pair_sums > 0, axis=0).astype(bool)  # initial positive sequence
    monotone = jax.lax.cummin(jnp.where(positive, pair_sums, jnp.inf), axis=0)
    # Stan's refinement: the even lag of the first non-positive pair counts once if positive
    first_out = jnp.minimum(2 * jnp.sum(positive, axis=0), n - 1)
    next_even = jnp.take_along_axis(rho, first_out[None, :], axis=0)[0]
    tau = -1 + 2 * jnp.sum(jnp.where(positive, monotone, 0), axis=0)
    tau = tau + jnp.maximum(next_even, 0)
    tau = jnp.maximum(tau, 1 / jnp.log10(jnp.asarray(m * n, chains.dtype)))
    return m * n / tau


def ess(chains) -> tuple[jax.Array, ESSInfo]:
    """Bulk effective sample size: rank-normalised split chains, Geyer's initial monotone sequence.

    ``ESS = M·N / τ`` with ``τ = −1 + 2 Σ_k P_k + ρ̂_{2K+2}⁺``, ``P_k = ρ̂_{2k} + ρ̂_{2k+1}`` summed
    while positive (k ≤ K) and made non-increasing, and
    ``ρ̂_t = 1 − (W − mean_m acov_{m,t}) / var⁺`` (Stan; Vehtari et al. 2021).
    For an AR(1) chain with coefficient φ, ESS/N → (1 − φ)/(1 + φ).

    Args:
        chains: ``(num_chains, num_draws)`` or ``(num_chains, num_draws, dim)``, at least 4
            draws per chain.

    Returns:
        ``(ess, ESSInfo)``: a scalar, or ``(dim,)``.

    Example:
        >>> import jax
        >>> value, info = ess(jax.random.normal(jax.random.key(0), (4, 500)))
        >>> bool(1000 < value < 3000), bool(info.nonfinite)
        (True, False)
    """
    raw = jnp.asarray(chains)
    value, info = _ess(_as_chains(raw))
    return (value[0] if raw.ndim == 2 else value), info


@jax.jit
def _ess(split):
    value = _ess_basic(_rank_normalise(split))
    return value, ESSInfo(_nonfinite(split, value))
