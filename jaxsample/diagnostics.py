"""Sample-quality and convergence diagnostics; all jittable.

Two-sample distances between ``x`` of shape ``(n, d)`` and ``y`` of shape ``(m, d)``:

- :func:`energy_distance` — ``2E‖X−Y‖ − E‖X−X'‖ − E‖Y−Y'‖`` (Székely & Rizzo), V-statistic.
- :func:`mmd` — squared maximum mean discrepancy with a Gaussian kernel.
- :func:`sliced_wasserstein` — sliced W_p over random directions.

The O(n·m) sums run in row chunks of ``chunk_size`` rows (``lax.map``), so memory stays at
``chunk_size × m`` whatever n is; ``chunk_size=None`` computes the dense matrix (fast for small n).

Particle diagnostics: :func:`damv`, the dimension-averaged marginal variance, which exposes the
variance collapse of kernel methods in high dimension. Chain diagnostics: :func:`rhat` and
:func:`ess`, the rank-normalised split-R̂ and bulk effective sample size of Vehtari, Gelman,
Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and localization".
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxsample._checks import check_chunk_size, check_int

__all__ = ["damv", "energy_distance", "ess", "mmd", "rhat", "sliced_wasserstein"]


def _check_pair(x, y):
    x, y = jnp.asarray(x), jnp.asarray(y)
    for name, a in (("x", x), ("y", y)):
        if a.ndim != 2:
            raise ValueError(f"{name} must have shape (num_samples, dim), got {a.shape}")
        if a.shape[0] < 1:
            raise ValueError(f"{name} must hold at least one sample")
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(f"{name} must be floating, got dtype {a.dtype}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same dim, got {x.shape[1]} and {y.shape[1]}")
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    return x, y


def _sq_dists(a, b):
    """Squared Euclidean distances (n, m), clipped at 0 against round-off."""
    cross = a @ b.T
    sq = jnp.sum(a * a, axis=1)[:, None] + jnp.sum(b * b, axis=1)[None, :] - 2 * cross
    return jnp.maximum(sq, 0)


def _pairwise_sum(fn: Callable, x, y, chunk_size):
    """Σ_ij fn(‖x_i − y_j‖²), dense or in row chunks of x (padded rows are masked)."""
    if chunk_size is None or chunk_size >= x.shape[0]:
        return jnp.sum(fn(_sq_dists(x, y)))
    n = x.shape[0]
    num_chunks = -(-n // chunk_size)
    pad = num_chunks * chunk_size - n
    xp = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]).reshape(
        num_chunks, chunk_size, x.shape[1])
    valid = (jnp.arange(num_chunks * chunk_size) < n).reshape(num_chunks, chunk_size)

    def chunk(args):
        rows, mask = args
        return jnp.sum(jnp.where(mask[:, None], fn(_sq_dists(rows, y)), 0))

    return jnp.sum(jax.lax.map(chunk, (xp, valid)))


def _safe_sqrt(sq):
    """sqrt with a finite gradient at 0 (coincident points) that still propagates NaN."""
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1)), sq)


def energy_distance(x, y, *, chunk_size: int | None = None):
    """Energy distance ``2E‖X−Y‖ − E‖X−X'‖ − E‖Y−Y'‖`` between two samples (V-statistic).

    Zero for identical samples, non-negative, zero in the population iff the laws are equal.

    Args:
        x: ``(n, d)``; y: ``(m, d)``, same dtype.
        chunk_size: rows per chunk for the pairwise sums (None: dense).

    Returns:
        A scalar of the inputs' dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[0.0], [1.0]])
        >>> float(energy_distance(x, x))
        0.0
    """
    x, y = _check_pair(x, y)
    check_chunk_size(chunk_size)
    n, m = x.shape[0], y.shape[0]
    xy = _pairwise_sum(_safe_sqrt, x, y, chunk_size) / (n * m)
    xx = _pairwise_sum(_safe_sqrt, x, x, chunk_size) / (n * n)
    yy = _pairwise_sum(_safe_sqrt, y, y, chunk_size) / (m * m)
    return 2 * xy - xx - yy


def _median_bandwidth(x, y):
    z = jnp.concatenate([x, y])
    sq = _sq_dists(z, z)
    iu = jnp.triu_indices(z.shape[0], k=1)
    return jnp.sqrt(jnp.median(sq[iu]))


def mmd(x, y, bandwidth=None, *, unbiased: bool = True, chunk_size: int | None = None):
    """Squared MMD with the Gaussian kernel ``k(a, b) = exp(−‖a−b‖² / (2h²))``.

    ``MMD² = E k(X,X') + E k(Y,Y') − 2 E k(X,Y)``. The unbiased U-statistic (default) drops the
    diagonal terms, so its expectation is exactly MMD² (it can be slightly negative); with
    ``unbiased=False`` the V-statistic is returned (non-negative, biased upward).

    Args:
        x: ``(n, d)``; y: ``(m, d)``; n, m ≥ 2 for the unbiased estimate.
        bandwidth: ``h > 0``; None uses the median pairwise distance of the pooled sample
            (computed densely: pass a bandwidth for large samples).
        unbiased: U- or V-statistic.
        chunk_size: rows per chunk for the pairwise sums (None: dense).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (200, 2))
        >>> abs(float(mmd(x, x + 0.0, bandwidth=1.0, unbiased=False))) < 1e-6
        True
    """
    x, y = _check_pair(x, y)
    check_chunk_size(chunk_size)
    n, m = x.shape[0], y.shape[0]
    if unbiased and min(n, m) < 2:
        raise ValueError("the unbiased MMD needs at least 2 samples in x and in y")
    if bandwidth is None:
        # identical samples have a zero median distance: floor it so the kernel stays defined
        h = jnp.maximum(_median_bandwidth(x, y), jnp.finfo(x.dtype).tiny ** 0.25)
    else:
        h = jnp.asarray(bandwidth, x.dtype)
        if h.shape != ():
            raise ValueError(f"bandwidth must be a scalar, got shape {h.shape}")
        if not isinstance(h, jax.core.Tracer) and not bool(h > 0):
            raise ValueError(f"bandwidth must be > 0, got {bandwidth}")

    def kernel(sq):
        return jnp.exp(-sq / (2 * h * h))

    kxy = _pairwise_sum(kernel, x, y, chunk_size) / (n * m)
    kxx = _pairwise_sum(kernel, x, x, chunk_size)
    kyy = _pairwise_sum(kernel, y, y, chunk_size)
    if unbiased:  # k(a, a) = 1 on the diagonal
        kxx, kyy = (kxx - n) / (n * (n - 1)), (kyy - m) / (m * (m - 1))
    else:
        kxx, kyy = kxx / (n * n), kyy / (m * m)
    return kxx + kyy - 2 * kxy


def _quantiles(sorted_proj, num_levels):
    """Empirical quantile function at the midpoints (k + ½)/num_levels, per row."""
    n = sorted_proj.shape[-1]
    levels = (jnp.arange(num_levels, dtype=sorted_proj.dtype) + 0.5) / num_levels
    index = jnp.floor(levels * n).astype(jnp.int32)
    return sorted_proj[..., index]


def sliced_wasserstein(key, x, y, num_projections: int = 128, *, p: int = 2):
    """Sliced Wasserstein-p distance ``(E_θ W_pᵖ(θᵀX, θᵀY))^{1/p}``, θ uniform on the sphere.

    Each 1-D distance compares empirical quantile functions at ``max(n, m)`` levels (exact when
    ``n == m``: it is then the sorted-sample matching).

    Args:
        key: PRNG key for the directions.
        x: ``(n, d)``; y: ``(m, d)``.
        num_projections: number of random directions.
        p: order (≥ 1).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (100, 3))
        >>> round(float(sliced_wasserstein(jax.random.key(1), x, x + 1.0, 256)), 1)  # 1/√3·√3
        1.0
    """
    x, y = _check_pair(x, y)
    check_int("num_projections", num_projections, 1)
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    theta = jax.random.normal(key, (num_projections, x.shape[1]), x.dtype)
    theta = theta / jnp.linalg.norm(theta, axis=1, keepdims=True)
    levels = max(x.shape[0], y.shape[0])
    qx = _quantiles(jnp.sort(theta @ x.T, axis=1), levels)
    qy = _quantiles(jnp.sort(theta @ y.T, axis=1), levels)
    return jnp.mean(jnp.abs(qx - qy) ** p) ** (1.0 / p)


def damv(x, target_var=None):
    """Dimension-averaged marginal variance ``(1/d) Σ_k Var̂(x_k) / σ_k²`` (ideal value 1).

    Args:
        x: particles ``(n, d)``, n ≥ 2 (unbiased variances, ddof = 1).
        target_var: the target's marginal variances ``(d,)`` or a scalar; None means 1.

    Example:
        >>> import jax.numpy as jnp
        >>> float(damv(jnp.array([[0.0, 0.0], [2.0, 2.0]])))
        2.0
    """
    x = jnp.asarray(x)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x must have shape (num_particles >= 2, dim), got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must be floating, got dtype {x.dtype}")
    var = jnp.var(x, axis=0, ddof=1)
    if target_var is not None:
        target_var = jnp.asarray(target_var, x.dtype)
        if target_var.shape not in ((), (x.shape[1],)):
            raise ValueError(f"target_var must be a scalar or shape ({x.shape[1]},), "
                             f"got {target_var.shape}")
        if not isinstance(target_var, jax.core.Tracer) and not bool(jnp.all(target_var > 0)):
            raise ValueError("target_var must be > 0")
        var = var / target_var
    return jnp.mean(var)


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
    split = _as_chains(raw)
    bulk = _rhat_basic(_rank_normalise(split))
    folded = jnp.abs(split - jnp.median(split.reshape(-1, split.shape[-1]), axis=0)[None, None])
    tail = _rhat_basic(_rank_normalise(folded))
    out = jnp.maximum(bulk, tail)
    return out[0] if raw.ndim == 2 else out


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
    out = _ess_basic(_rank_normalise(_as_chains(raw)))
    return out[0] if raw.ndim == 2 else out
