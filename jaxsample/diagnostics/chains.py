"""Chain diagnostics: rank-normalised split-R̂ and bulk effective sample size; all jittable.

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R̂ for assessing convergence of MCMC", Bayesian Analysis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["ess", "rhat"]


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


def rhat(chains):
    """Rank-normalised split-R̂: the larger of bulk-R̂ and tail (folded) R̂ (Vehtari et al. 2021).

    Args:
        chains: ``(num_chains, num_draws)`` or ``(num_chains, num_draws, dim)``.

    Returns:
        Scalar, or ``(dim,)``. Values above ~1.01 signal chains that disagree.
    """
    raw = jnp.asarray(chains)
    out = _rhat(_as_chains(raw))
    return out[0] if raw.ndim == 2 else out


@jax.jit
def _rhat(split):
    bulk = _rhat_basic(_rank_normalise(split))
    folded = jnp.abs(split - jnp.median(split.reshape(-1, split.shape[-1]), axis=0)[None, None])
    tail = _rhat_basic(_rank_normalise(folded))
    return jnp.maximum(bulk, tail)


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


def ess(chains):
    """Bulk effective sample size: rank-normalised split chains, Geyer's initial monotone sequence.

    ``ESS = M·N / τ`` with ``τ = −1 + 2 Σ_k P_k + ρ̂_{2K+2}⁺``, ``P_k = ρ̂_{2k} + ρ̂_{2k+1}`` summed
    while positive (k ≤ K) and made non-increasing, and
    ``ρ̂_t = 1 − (W − mean_m acov_{m,t}) / var⁺`` (Stan; Vehtari et al. 2021).
    For an AR(1) chain with coefficient φ, ESS/N → (1 − φ)/(1 + φ).

    Args:
        chains: ``(num_chains, num_draws)`` or ``(num_chains, num_draws, dim)``.

    Returns:
        Scalar, or ``(dim,)``.
    """
    raw = jnp.asarray(chains)
    out = _ess(_as_chains(raw))
    return out[0] if raw.ndim == 2 else out


@jax.jit
def _ess(split):
    return _ess_basic(_rank_normalise(split))
