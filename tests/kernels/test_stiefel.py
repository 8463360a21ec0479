"""Tests of jaxsample.kernels.stiefel: the centred QR retraction and the tangent projector."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.kernels import stiefel

# jitted once per shape: eager op-by-op dispatch would dominate the test time
retract = jax.jit(stiefel.retract)
tangent_project = jax.jit(stiefel.tangent_project)


def _tol(dtype):
    return 1e-10 if dtype == jnp.float64 else 2e-4


def _on_manifold(dtype, num_rows=9, dim=3, seed=0):
    return retract(jax.random.normal(jax.random.key(seed), (num_rows, dim), dtype))


def test_retraction_lands_on_manifold_and_fixes_it(dtype):
    num_rows, dim = 9, 3
    y = _on_manifold(dtype, num_rows, dim)
    assert y.dtype == dtype
    tol = _tol(dtype) * num_rows
    np.testing.assert_allclose(y.T @ y, num_rows * jnp.eye(dim, dtype=dtype), atol=tol)
    np.testing.assert_allclose(jnp.sum(y, axis=0), 0.0, atol=tol)
    # identity on the manifold (needs the sign fix), including after a column sign flip of Q
    np.testing.assert_allclose(retract(y), y, atol=tol)
    flipped = y * jnp.asarray([1.0, -1.0, 1.0], dtype)[None, :]
    np.testing.assert_allclose(retract(flipped), flipped, atol=tol)
    # and onto the manifold from an ill-scaled, uncentred full-rank input
    wild = jax.random.normal(jax.random.key(5), (num_rows, dim), dtype) * jnp.asarray(
        [1e-2, 1.0, 30.0], dtype)[None, :] + 7.0
    out = retract(wild)
    np.testing.assert_allclose(out.T @ out, num_rows * jnp.eye(dim, dtype=dtype), atol=tol)
    np.testing.assert_allclose(jnp.sum(out, axis=0), 0.0, atol=tol)


def test_projector_is_idempotent_and_tangent(dtype):
    y = _on_manifold(dtype)
    g = jax.random.normal(jax.random.key(2), y.shape, dtype)
    v = tangent_project(y, g)
    tol = 10 * _tol(dtype)
    np.testing.assert_allclose(tangent_project(y, v), v, atol=tol)
    np.testing.assert_allclose(y.T @ v + v.T @ y, 0.0, atol=tol)
    np.testing.assert_allclose(jnp.sum(v, axis=0), 0.0, atol=tol)
    # orthogonal projector: the residual g - P(g) is orthogonal to every tangent vector
    w = tangent_project(y, jax.random.normal(jax.random.key(3), y.shape, dtype))
    np.testing.assert_allclose(jnp.sum((g - v) * w), 0.0, atol=tol * 10)
