"""Chunked particle–data interactions: (smoothed) KDE scores, nearest-neighbour scores, and the
Lyapunov solve of moment matching (its manifold is :mod:`jaxsample.kernels.stiefel`'s).

Conventions: ``data`` is ``(n, d)``, particles ``z`` are ``(B, d)``, smoothing noise is
``(B, M, d)``. Every kernel preserves the dtype of ``z``/``data`` (float32 or float64), works in
the log domain (softmax over data points through ``jax.nn.softmax``), and has a ``chunk_size``
path that processes ``chunk_size`` particles at a time through
:func:`jaxsample.kernels.chunking.map_rows`, so at most ``chunk_size * M * n`` logits exist at
once instead of ``B * M * n``. The KDE logits are ``-‖w - x_i‖² / (2σ²)`` from
:func:`jaxsample.kernels.pairwise.sq_distances`.

For accuracy in float32 pass data and particles centred at the data mean: the expanded squared
distances lose precision as ``|x_i|`` grows. Inputs are valid: the sampler that calls these
checked them (even ``M``, ``1 <= K_nn``, ``K_nn + K_rem <= n``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample.kernels import chunking, pairwise

__all__ = [
    "antithetic_normal",
    "kde_score",
    "knn_smoothed_kde_score",
    "smoothed_kde_score",
    "symmetric_lyapunov_solve",
]


def _posterior_mean(points, data, data_sq_norms, bandwidth, log_weights=None):
    """``sum_i softmax_i(-‖w - x_i‖² / (2 bandwidth²) + log_weights_i) x_i`` per row ``w``.

    ``points`` is ``(P, d)``, ``data`` ``(m, d)``; returns ``(P, d)``. This is the KDE "denoiser"
    ``k(w)``: the mean of the Gaussian-kernel posterior over the centres ``x_i``.
    """
    sq = pairwise.sq_distances(points, data, y_sq_norms=data_sq_norms)
    logits = -sq / (2 * jnp.square(bandwidth))
    if log_weights is not None:
        logits = logits + log_weights[None, :]
    return jax.nn.softmax(logits, axis=-1) @ data


def antithetic_normal(key: jax.Array, num_rows: int, num_samples: int, dim: int,
                      dtype=jnp.float32) -> jax.Array:
    """Standard normal draws in antithetic pairs, independent per row.

    Args:
        key: PRNG key.
        num_rows: number of particles ``B``.
        num_samples: ``M``, even (valid input); ``M/2`` draws ``eps`` are used as ``+eps`` and
            ``-eps``.
        dim: dimension ``d``.
        dtype: floating dtype of the result.

    Returns:
        ``(B, M, d)`` array whose sample axis holds ``[eps_1..eps_{M/2}, -eps_1..-eps_{M/2}]``.

    Example:
        >>> import jax
        >>> eps = antithetic_normal(jax.random.key(0), 3, 4, 2)
        >>> bool(jax.numpy.all(eps[:, :2] == -eps[:, 2:]))
        True
    """
    half = jax.random.normal(key, (num_rows, num_samples // 2, dim), dtype)
    return jnp.concatenate([half, -half], axis=1)


def kde_score(z: jax.Array, data: jax.Array, bandwidth, *, chunk_size: int | None = None
              ) -> jax.Array:
    r"""Score of the Gaussian KDE of ``data`` at each row of ``z``.

    .. math::
        \nabla \log \sum_i e^{-\|z - x_i\|^2 / (2\sigma^2)} = (k(z) - z) / \sigma^2, \qquad
        k(z) = \sum_i \mathrm{softmax}_i\big(-\|z - x_i\|^2 / (2\sigma^2)\big)\, x_i .

    Args:
        z: ``(B, d)`` evaluation points.
        data: ``(n, d)`` centres.
        bandwidth: kernel bandwidth ``sigma > 0`` (scalar, may be traced).
        chunk_size: rows of ``z`` per chunk; ``None`` is the dense path (``B x n`` logits).

    Returns:
        ``(B, d)`` scores, dtype of ``z``.

    Example:
        >>> import jax.numpy as jnp
        >>> kde_score(jnp.zeros((1, 2)), jnp.ones((1, 2)), 0.5)
        Array([[4., 4.]], dtype=float32)
    """
    no_noise = jnp.zeros((z.shape[0], 1, z.shape[1]), z.dtype)
    return smoothed_kde_score(z, data, bandwidth, 0.0, no_noise, chunk_size=chunk_size)


def smoothed_kde_score(z: jax.Array, data: jax.Array, bandwidth, smoothing, noise: jax.Array,
                       *, chunk_size: int | None = None) -> jax.Array:
    r"""Monte Carlo estimate of the LDS-smoothed KDE score ``-grad V``, ``V = U * N(0, s^2 I)``.

    With ``U`` the KDE potential (see :func:`kde_score`),
    :math:`\nabla V(z) = \mathbb{E}_\varepsilon[\nabla U(z + s\varepsilon)]
    = (z - \mathbb{E}_\varepsilon[k(z + s\varepsilon)]) / \sigma^2`, estimated with the ``M``
    given draws (antithetic pairs from :func:`antithetic_normal` make the estimate exact for
    quadratic ``U``). Smoothing of LDS type: Yao & Paulin (2026), Eq. 8, arXiv:2605.14276.

    Args:
        z: ``(B, d)`` particles.
        data: ``(n, d)`` centres.
        bandwidth: kernel bandwidth ``sigma > 0`` (may be traced).
        smoothing: smoothing scale ``s >= 0`` (may be traced); ``s = 0`` gives the KDE score.
        noise: ``(B, M, d)`` standard normal draws, one set per particle.
        chunk_size: particles per chunk; memory is ``chunk_size * M * n`` logits.

    Returns:
        ``(B, d)`` estimate of ``-grad V``, dtype of ``z``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> eps = antithetic_normal(jax.random.key(0), 1, 4, 2)
        >>> smoothed_kde_score(jnp.zeros((1, 2)), jnp.ones((1, 2)), 0.5, 0.3, eps)
        Array([[4., 4.]], dtype=float32)
    """
    bandwidth = jnp.asarray(bandwidth, z.dtype)
    smoothing = jnp.asarray(smoothing, z.dtype)
    data_sq_norms = pairwise.sq_norms(data)

    def row(z_b, eps_b):
        points = z_b[None, :] + smoothing * eps_b
        mean = jnp.mean(_posterior_mean(points, data, data_sq_norms, bandwidth), axis=0)
        return (mean - z_b) / jnp.square(bandwidth)

    with jax.named_scope("smoothed_kde_score"):
        return chunking.map_rows(jax.vmap(row), z, noise, chunk_size=chunk_size)


def knn_smoothed_kde_score(key: jax.Array, z: jax.Array, data: jax.Array, bandwidth, smoothing,
                           noise: jax.Array, *, num_neighbours: int = 20,
                           num_remainder: int = 20, chunk_size: int | None = None) -> jax.Array:
    r"""Smoothed KDE score over ``K_nn`` nearest centres plus ``K_rem`` reweighted random others.

    Per particle, the softmax over all ``n`` centres is replaced by one over ``K_nn`` exact nearest
    neighbours of ``z`` (``lax.top_k`` of ``-‖z - x_i‖²``) and ``K_rem`` centres drawn
    uniformly without replacement from the other ``n - K_nn``; each of those stands for
    ``alpha = (n - K_nn) / K_rem`` points, so ``log alpha`` is added to its logit (Yao & Paulin
    2026, Algorithm 2). The smoothing noise is drawn in ``d`` dimensions (the same ``noise`` as
    :func:`smoothed_kde_score`), so with ``K_nn + K_rem = n`` the two estimators agree exactly.
    Cost per particle: ``O(n d)`` for the neighbour search plus ``O(M (K_nn + K_rem) d)``.

    Args:
        key: PRNG key for the remainder draw.
        z: ``(B, d)`` particles.
        data: ``(n, d)`` centres.
        bandwidth: ``sigma > 0``.
        smoothing: ``s >= 0``.
        noise: ``(B, M, d)`` standard normal draws.
        num_neighbours: ``K_nn >= 1``.
        num_remainder: ``K_rem >= 0``, with ``K_nn + K_rem <= n``.
        chunk_size: particles per chunk.

    Returns:
        ``(B, d)`` estimate of ``-grad V``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> data = jax.random.normal(jax.random.key(1), (30, 2))
        >>> eps = antithetic_normal(jax.random.key(2), 5, 4, 2)
        >>> z = jnp.zeros((5, 2))
        >>> approx = knn_smoothed_kde_score(jax.random.key(3), z, data, 0.5, 0.1, eps,
        ...                                 num_neighbours=10, num_remainder=20)
        >>> bool(jnp.allclose(approx, smoothed_kde_score(z, data, 0.5, 0.1, eps), atol=1e-4))
        True
    """
    n = data.shape[0]
    bandwidth = jnp.asarray(bandwidth, z.dtype)
    smoothing = jnp.asarray(smoothing, z.dtype)
    data_sq_norms = pairwise.sq_norms(data)
    log_alpha = jnp.log(jnp.asarray((n - num_neighbours) / max(num_remainder, 1), z.dtype))
    log_weights = jnp.concatenate([
        jnp.zeros((num_neighbours,), z.dtype), jnp.full((num_remainder,), log_alpha)])
    keys = jax.random.split(key, z.shape[0])

    def row(key_b, z_b, eps_b):
        sq = pairwise.sq_distances(z_b[None, :], data, y_sq_norms=data_sq_norms)[0]
        _, nearest = jax.lax.top_k(-sq, num_neighbours)
        # Uniform draw without replacement from the others: the top K_rem of iid uniforms,
        # with the neighbours pushed to -inf.
        chosen = nearest
        if num_remainder:
            priority = jax.random.uniform(key_b, (n,), z.dtype).at[nearest].set(-jnp.inf)
            chosen = jnp.concatenate([nearest, jax.lax.top_k(priority, num_remainder)[1]])
        points = z_b[None, :] + smoothing * eps_b
        mean = jnp.mean(_posterior_mean(points, data[chosen], data_sq_norms[chosen], bandwidth,
                                        log_weights), axis=0)
        return (mean - z_b) / jnp.square(bandwidth)

    with jax.named_scope("knn_smoothed_kde_score"):
        return chunking.map_rows(jax.vmap(row), keys, z, noise, chunk_size=chunk_size)


def symmetric_lyapunov_solve(a: jax.Array, q: jax.Array) -> jax.Array:
    r"""Solves :math:`A X + X A = Q` for symmetric positive definite ``A`` and symmetric ``Q``.

    With :math:`A = U D U^\top`: :math:`X = U\,[(U^\top Q U)_{ij} / (D_i + D_j)]\,U^\top`. Written
    by hand because ``scipy.linalg.solve_continuous_lyapunov`` (Bartels–Stewart) cannot be traced:
    this form is jittable, differentiable and exact for symmetric ``A``.

    Args:
        a: ``(d, d)`` symmetric positive definite.
        q: ``(d, d)`` symmetric.

    Returns:
        ``(d, d)`` symmetric solution.

    Example:
        >>> import jax.numpy as jnp
        >>> symmetric_lyapunov_solve(2.0 * jnp.eye(2), jnp.eye(2))
        Array([[0.25, 0.  ],
               [0.  , 0.25]], dtype=float32)
    """
    eigenvalues, eigenvectors = jnp.linalg.eigh(a)
    rotated = eigenvectors.T @ q @ eigenvectors
    scaled = rotated / (eigenvalues[:, None] + eigenvalues[None, :])
    solution = eigenvectors @ scaled @ eigenvectors.T
    return 0.5 * (solution + solution.T)
