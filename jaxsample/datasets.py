"""Small synthetic training sets for generative samplers (deterministic given a key).

- :func:`checkerboard`: uniform on the 8 dark squares of a 4x4 board on ``[-2, 2]^2``;
- :func:`two_spirals`: two interleaved noisy spiral arms (the FFJORD / flow-matching toy set);
- :func:`latent_mixture`: a 64-d Gaussian mixture with a decaying spectrum, a stand-in for the
  latent codes of an autoencoder.

Each returns a ``(num_samples, d)`` array of the requested floating ``dtype``; the same key always
gives the same points.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsample._checks import check_int

__all__ = ["checkerboard", "latent_mixture", "two_spirals"]


def _check(num_samples, dtype):
    check_int("num_samples", num_samples, 1)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")


def checkerboard(key: jax.Array, num_samples: int, dtype=jnp.float32) -> jax.Array:
    """Uniform samples on the dark squares of a 4x4 checkerboard on ``[-2, 2]^2``.

    A point is on a dark square iff ``floor(x) + floor(y)`` is even. Density ``1/8`` there.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = checkerboard(jax.random.key(0), 100)
        >>> x.shape, bool(jnp.all(jnp.floor(x).sum(axis=1) % 2 == 0))
        ((100, 2), True)
    """
    _check(num_samples, dtype)
    key_x, key_y, key_row = jax.random.split(key, 3)
    x = jax.random.uniform(key_x, (num_samples,), dtype, -2.0, 2.0)
    row = 2 * jax.random.randint(key_row, (num_samples,), 0, 2) - 2  # -2 or 0
    y = jax.random.uniform(key_y, (num_samples,), dtype) + row.astype(dtype)
    y = y + jnp.mod(jnp.floor(x), 2)  # shift to the square of matching colour
    return jnp.stack([x, y], axis=1)


def two_spirals(key: jax.Array, num_samples: int, noise: float = 0.1, dtype=jnp.float32
                ) -> jax.Array:
    """Two interleaved spiral arms, scaled to about ``[-3.5, 3.5]^2``, plus Gaussian noise.

    Arm angle ``theta = sqrt(u) * 3 pi``; arm one is ``(-theta cos theta, theta sin theta) / 3``
    (plus ``U(0, 0.5)/3`` jitter per coordinate), arm two its reflection through the origin; then
    ``N(0, noise^2 I)`` is added.

    Example:
        >>> import jax
        >>> two_spirals(jax.random.key(0), 101).shape
        (101, 2)
    """
    _check(num_samples, dtype)
    key_angle, key_jitter, key_arm, key_noise = jax.random.split(key, 4)
    theta = jnp.sqrt(jax.random.uniform(key_angle, (num_samples,), dtype)) * (3 * jnp.pi)
    jitter = 0.5 * jax.random.uniform(key_jitter, (num_samples, 2), dtype)
    arm = jnp.stack([-theta * jnp.cos(theta), theta * jnp.sin(theta)], axis=1) + jitter
    sign = jnp.where(jax.random.bernoulli(key_arm, 0.5, (num_samples,)), 1.0, -1.0).astype(dtype)
    points = sign[:, None] * arm / 3
    return points + noise * jax.random.normal(key_noise, (num_samples, 2), dtype)


def latent_mixture(key: jax.Array, num_samples: int, dim: int = 64, num_components: int = 8,
                   dtype=jnp.float32) -> jax.Array:
    """A fixed Gaussian mixture in ``dim`` dimensions, a stand-in for autoencoder latents.

    Equal weights; component ``k`` has mean ``3 e_k`` (``k < num_components <= dim``) and
    covariance ``diag(0.5 / (1 + j)^(1/2))`` over coordinates ``j`` (a decaying spectrum, as
    latents have). The mixture itself does not depend on the key.

    Example:
        >>> import jax
        >>> latent_mixture(jax.random.key(0), 10).shape
        (10, 64)
    """
    _check(num_samples, dtype)
    if not 1 <= num_components <= dim:
        raise ValueError(f"need 1 <= num_components <= dim, got {num_components} and {dim}")
    key_component, key_noise = jax.random.split(key)
    component = jax.random.randint(key_component, (num_samples,), 0, num_components)
    means = 3 * jnp.eye(num_components, dim, dtype=dtype)
    scales = jnp.sqrt(0.5 / jnp.sqrt(1 + jnp.arange(dim, dtype=dtype)))
    return means[component] + scales[None, :] * jax.random.normal(key_noise, (num_samples, dim),
                                                                  dtype)
