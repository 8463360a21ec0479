"""Small dense linear algebra shared by the samplers: shrunk covariances, a Cholesky that does not
fail, the inverse of a triangular factor, norm clipping, and the effective rank of a point cloud.

Inputs are valid (the public entry point checked them); every function keeps the input dtype and
is jittable and vmappable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["clip_by_norm", "effective_rank", "fisher_covariance", "ledoit_wolf",
           "safe_cholesky", "triangular_inverse"]


def ledoit_wolf(x: jax.Array, shrinkage=None) -> jax.Array:
    """Covariance of the rows of ``x`` shrunk towards ``(tr S / d) I``.

    ``Σ̂ = λ μ I + (1 − λ) S`` with ``S`` the (biased) sample covariance and ``μ = tr S / d``;
    ``λ = min(1, β̄²/δ²)`` is Ledoit & Wolf's (2004, *A well-conditioned estimator for
    large-dimensional covariance matrices*) estimate when ``shrinkage`` is None, else the given
    value in ``[0, 1]``.

    Args:
        x: ``(n, d)`` points.
        shrinkage: ``λ`` or None (estimated).

    Returns:
        ``(d, d)`` symmetric positive semi-definite matrix (definite when ``λ > 0`` and ``μ > 0``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (500, 3))
        >>> bool(jnp.allclose(ledoit_wolf(x), jnp.eye(3), atol=0.15))
        True
    """
    n, d = x.shape
    centred = x - jnp.mean(x, axis=0, keepdims=True)
    sample = centred.T @ centred / n
    mu = jnp.trace(sample) / d
    eye = jnp.eye(d, dtype=x.dtype)
    if shrinkage is None:
        delta2 = jnp.sum(jnp.square(sample - mu * eye)) / d
        sq = jnp.sum(centred * centred, axis=1)
        per = sq**2 - 2 * jnp.sum((centred @ sample) * centred, axis=1) + jnp.sum(sample**2)
        beta2 = jnp.minimum(jnp.sum(per) / (n * n * d), delta2)
        lam = jnp.where(delta2 > 0, beta2 / jnp.maximum(delta2, jnp.finfo(x.dtype).tiny),
                        jnp.ones_like(delta2))
    else:
        lam = jnp.asarray(shrinkage, x.dtype)
    return lam * mu * eye + (1 - lam) * sample


def fisher_covariance(cov: jax.Array, score_cov: jax.Array) -> jax.Array:
    """The covariance that explains both a cloud and its scores: the geometric mean
    ``C # S⁻¹ = C^{1/2} (C^{1/2} S C^{1/2})^{-1/2} C^{1/2}`` of the points' covariance ``C`` and
    the inverse of their scores' covariance ``S``.

    For a Gaussian ``π = N(μ, Σ)`` the score is ``−Σ⁻¹(x − μ)``, so any cloud with covariance
    ``C`` has score covariance ``S = Σ⁻¹ C Σ⁻¹``, and ``Σ`` is the unique symmetric positive
    definite solution of ``Σ S Σ = C``: this mean. It recovers ``Σ`` from a cloud of any
    (full-rank) spread, too narrow or too wide; outside the Gaussian case it is the Gaussian
    that minimises the Fisher divergence to ``π`` over the cloud's law (Seyboldt, Carlson &
    Carpenter 2025, *If only my posterior were normal: introducing Fisher HMC*, the full-rank
    form of nutpie's mass matrix; its diagonal is ``√(var x_k / var s_k)``). No well-kept JAX
    library offers it; two symmetric eigendecompositions, eigenvalues floored at
    ``10⁻¹²·max`` so a rank-deficient input stays finite.

    Args:
        cov: ``C`` ``(d, d)``, symmetric positive semi-definite.
        score_cov: ``S`` ``(d, d)``, symmetric positive semi-definite.

    Example:
        >>> sigma = jnp.array([[4.0, 1.0], [1.0, 2.0]])
        >>> c = jnp.array([[0.5, 0.1], [0.1, 0.3]])            # any cloud's covariance
        >>> s = jnp.linalg.solve(sigma, jnp.linalg.solve(sigma, c).T)
        >>> bool(jnp.allclose(fisher_covariance(c, s), sigma, atol=1e-4))
        True
    """
    def sym_power(m, power):
        m = 0.5 * (m + m.T)
        values, vectors = jnp.linalg.eigh(m)
        values = jnp.maximum(values, 1e-12 * jnp.max(values) + jnp.finfo(m.dtype).tiny)
        return (vectors * (values**power)[None, :]) @ vectors.T

    root = sym_power(cov, 0.5)
    middle = sym_power(root @ score_cov @ root, -0.5)
    mean = root @ middle @ root
    return 0.5 * (mean + mean.T)


def safe_cholesky(cov: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``chol(cov + 10⁻⁶·mean(diag)·I)``, falling back to ``diag(√diag cov)`` when that is not
    finite (an indefinite or NaN matrix). Returns ``(factor, fell_back)``.

    Example:
        >>> import jax.numpy as jnp
        >>> factor, fell_back = safe_cholesky(jnp.array([[4.0, 0.0], [0.0, -1.0]]))
        >>> bool(fell_back), bool(jnp.all(jnp.isfinite(factor)))
        (True, True)
    """
    d = cov.shape[0]
    jitter = 1e-6 * jnp.maximum(jnp.mean(jnp.diagonal(cov)), jnp.finfo(cov.dtype).tiny)
    chol = jnp.linalg.cholesky(cov + jitter * jnp.eye(d, dtype=cov.dtype))
    ok = jnp.all(jnp.isfinite(chol))
    fallback = jnp.diag(jnp.sqrt(jnp.maximum(jnp.diagonal(cov), jitter)))
    return jnp.where(ok, chol, fallback), ~ok


def triangular_inverse(factor: jax.Array, *, lower: bool = True) -> jax.Array:
    """``factor⁻¹`` of a ``(d, d)`` triangular matrix, to apply to many right-hand sides as a
    matmul: ``x @ triangular_inverse(L).T`` solves ``L uᵢ = xᵢ`` for every row of ``x`` ``(n, d)``.

    Why not ``solve_triangular(L, x.T)``: on XLA:CPU that lowers to one LAPACK ``trsm`` call whose
    result comes back column-major, and inside a larger program the layout change spreads into
    its consumers. Measured on ETD's step (N = 100 particles, 2 500 proposals, d = 20, one
    Sinkhorn iteration): the solve of the 100 × 20 whitening cost ~12 ms of CPU time per step
    against 0.01 ms when timed alone; the ``d × d`` inverse and a matmul cost nothing
    measurable, and the same held for the Cholesky-QR of ``kernels.stiefel`` (~200× at d = 2).
    Forming the inverse is as accurate as the solve for the well-conditioned factors the
    samplers use (a Cholesky factor of a shrunk covariance; relative error ``O(κ(L)·ε)``).

    Example:
        >>> import jax.numpy as jnp
        >>> inv = triangular_inverse(jnp.array([[2.0, 0.0], [1.0, 1.0]]))
        >>> inv.tolist()
        [[0.5, 0.0], [-0.5, 1.0]]
    """
    identity = jnp.eye(factor.shape[-1], dtype=factor.dtype)
    return jax.scipy.linalg.solve_triangular(factor, identity, lower=lower)


def clip_by_norm(v: jax.Array, max_norm: jax.Array) -> jax.Array:
    """Rows of ``v`` rescaled to norm ``<= max_norm``; ``max_norm = 0`` means no clipping.

    Example:
        >>> import jax.numpy as jnp
        >>> clip_by_norm(jnp.array([[3.0, 4.0]]), jnp.asarray(1.0)).tolist()
        [[0.6000000238418579, 0.800000011920929]]
    """
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    floor = jnp.asarray(1e-8, v.dtype)
    factor = jnp.minimum(jnp.ones_like(norm), max_norm / jnp.maximum(norm, floor))
    return v * jnp.where(max_norm > 0, factor, jnp.ones_like(factor))


def effective_rank(x: jax.Array) -> jax.Array:
    """Roy & Vetterli's effective rank ``exp H(p)`` of the centred cloud ``x`` ``(n, d)``, with
    ``p`` its normalised singular values: ``min(n − 1, d)`` for a cloud spread evenly in every
    direction, 1 for points on a line, 0 when every point is the same.

    Scale-free (a cloud and a rescaled copy have the same rank), so a collapse shows whatever the
    target's units.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (200, 4))
        >>> round(float(effective_rank(x)), 1), float(effective_rank(jnp.ones((5, 3))))
        (4.0, 0.0)
    """
    centred = x - jnp.mean(x, axis=0, keepdims=True)
    s = jnp.linalg.svd(centred, compute_uv=False)
    total = jnp.sum(s)
    p = s / jnp.where(total > 0, total, jnp.ones_like(total))
    entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, jnp.ones_like(p))), 0))
    return jnp.where(total > 0, jnp.exp(entropy), jnp.zeros_like(total))
