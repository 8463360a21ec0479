"""A small exact-GP baseline for spherical BO (demo and benchmark): GP-UCB on the sphere in JAX.

RBF kernel on unit vectors, :math:`k(u, v) = \\exp(−\\|u − v\\|^2/(2ℓ^2))`, fixed ℓ and noise,
y standardised by the running mean and deviation; each iteration refits the exact posterior
(an N×N Cholesky, O(N³)) and maximises UCB over random candidates: half uniform directions, half
perturbations of the best point (angle ~ ℓ/2). The whole loop is one ``lax.scan`` over a
fixed-size buffer whose unused rows are masked out of the kernel matrix (identity block), so the
posterior over the used rows is exact. It is the cheap JAX stand-in for a GP-based BO library, not
a replacement for one (no hyper-parameter fit, no gradient-based acquisition optimiser).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxsample.kernels import sphere


@functools.partial(jax.jit, static_argnames=("objective", "dim", "num_iterations", "num_initial",
                                             "num_candidates"))
def gp_ucb_run(key, objective, dim: int, num_iterations: int, *, num_initial: int = 10,
               num_candidates: int = 1024, lengthscale=0.5, noise=1e-2, beta=2.0):
    """GP-UCB on S^{D−1}; returns the ``(num_initial + num_iterations,)`` observed values.

    ``objective`` maps ``(q, D)`` unit vectors to ``(q,)`` values (float32).
    """
    with jax.named_scope("gp_ucb"):
        total = num_initial + num_iterations
        key_init, key_loop = jax.random.split(key)
        x0 = sphere.uniform(key_init, (num_initial,), dim)
        y0 = objective(x0)
        xs = jnp.zeros((total, dim)).at[:num_initial].set(x0)
        ys = jnp.zeros(total).at[:num_initial].set(y0)
        index = jnp.arange(total)

        def kernel(a, b):
            return jnp.exp(-(1 - a @ b.T) / lengthscale**2)

        def body(carry, inputs):
            xs, ys = carry
            step, step_key = inputs
            n = num_initial + step
            mask = (index < n).astype(xs.dtype)
            mean_y = jnp.sum(ys * mask) / n
            std_y = jnp.sqrt(jnp.sum(((ys - mean_y) * mask) ** 2) / n) + 1e-9
            z = (ys - mean_y) / std_y * mask
            gram = kernel(xs, xs) * mask[:, None] * mask[None, :]
            gram = gram + jnp.diag(noise * mask + (1 - mask))
            chol = jnp.linalg.cholesky(gram)
            alpha = jax.scipy.linalg.cho_solve((chol, True), z)
            key_uniform, key_local = jax.random.split(step_key)
            best = xs[jnp.argmax(jnp.where(mask > 0, ys, -jnp.inf))]
            half = num_candidates // 2
            uniform = sphere.uniform(key_uniform, (num_candidates - half,), dim)
            local = sphere.retract(best[None] + lengthscale / 2 / jnp.sqrt(dim)
                                   * sphere.normal(key_local, (half, dim)))
            candidates = jnp.concatenate([uniform, local])
            cross = kernel(candidates, xs) * mask[None, :]
            mean = cross @ alpha
            v = jax.scipy.linalg.solve_triangular(chol, cross.T, lower=True)
            var = jnp.maximum(1 - jnp.sum(v * v, axis=0), 1e-12)
            pick = candidates[jnp.argmax(mean + beta * jnp.sqrt(var))]
            value = objective(pick[None])[0]
            return (xs.at[n].set(pick), ys.at[n].set(value)), value

        inputs = (jnp.arange(num_iterations), jax.random.split(key_loop, num_iterations))
        _, values = jax.lax.scan(body, (xs, ys), inputs)
        return jnp.concatenate([y0, values])
