r"""Baselines of the particle family: the peers ETD and MM-SOLD are compared with.

* :func:`smoothed_langevin` — naive score-smoothed Langevin: MM-SOLD's dynamics without the moment
  constraint (it targets :math:`e^{-V}` itself).
* :func:`cfdm_sample` — σ-CFDM, the smoothed closed-form diffusion model (Scarvelis, Sáez de
  Ocáriz Borde & Solomon, TMLR 2025), as in the MM-SOLD reference baseline.
* :func:`svgd` — BlackJAX SVGD (RBF kernel, median heuristic, Adam), the peer of ETD. BlackJAX is
  an optional dependency (the ``test`` extra): it is imported when :func:`svgd` is called.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample import _pytree
from jaxsample._checks import (
    check_array,
    check_callable,
    check_chunk_size,
    check_finite_start,
    check_hyperparameter,
    check_int,
    check_key,
    check_position,
)
from jaxsample.core import SamplingAlgorithm
from jaxsample.kernels.interactions import antithetic_normal, smoothed_kde_score
from jaxsample.particles._validation import check_data, check_num_smoothing_samples
from jaxsample.particles.mmsold import DEFAULT_CHUNK_SIZE, build_algorithm

__all__ = ["CFDMInfo", "SVGDInfo", "cfdm_sample", "smoothed_langevin", "svgd"]


class SVGDInfo(NamedTuple):
    """What :func:`svgd` reports besides the particles.

    Attributes:
        nonfinite: a returned particle (any snapshot) is NaN/inf.
    """

    nonfinite: jax.Array


def smoothed_langevin(data, *, bandwidth: float, smoothing: float,
                      num_smoothing_samples: int = 8, step_size: float,
                      integrator: str = "leimkuhler_matthews", estimator: str = "exact",
                      chunk_size: int | None = DEFAULT_CHUNK_SIZE, num_neighbours: int = 20,
                      num_remainder: int = 20) -> SamplingAlgorithm:
    r"""Naive score-smoothed Langevin: :func:`~jaxsample.mmsold` without the moment constraint.

    Independent particles follow the same ``Sigma*``-preconditioned dynamics
    :math:`y \leftarrow y - h L^\top \nabla V(\mu^* + L y) + \text{noise}` (no projection, no
    retraction), so they target ``e^{-V}`` itself; the ``Info`` residuals show how far its moments
    drift from ``(mu*, Sigma*)``. Same arguments, state and ``init`` as :func:`~jaxsample.mmsold`
    (``B >= 1``; the initial particles are kept as given).

    Example:
        >>> import jax
        >>> from jaxsample.particles import sample_kde, smoothed_langevin
        >>> data = jax.random.normal(jax.random.key(0), (50, 2))
        >>> alg = smoothed_langevin(data, bandwidth=0.3, smoothing=0.1, step_size=1e-2)
        >>> state = alg.init(sample_kde(jax.random.key(1), data, num_samples=8,
        ...                             bandwidth=0.3)[0])
        >>> alg.step(jax.random.key(2), state)[0].positions.shape
        (8, 2)
    """
    return build_algorithm(data, bandwidth, smoothing, num_smoothing_samples, step_size,
                           integrator, estimator, chunk_size, num_neighbours, num_remainder,
                           constrained=False)


class CFDMInfo(NamedTuple):
    """``nonfinite``: ``True`` if any returned sample is non-finite."""

    nonfinite: jax.Array


def cfdm_sample(key: jax.Array, data, *, num_samples: int, smoothing: float, num_steps: int = 100,
                num_smoothing_samples: int = 8, chunk_size: int | None = None
                ) -> tuple[jax.Array, CFDMInfo]:
    r"""σ-CFDM (closed-form diffusion model; Scarvelis, Sáez de Ocáriz Borde & Solomon, TMLR 2025).

    Euler integration of the smoothed closed-form flow of the linear path
    :math:`z_t = t x + (1 - t)\varepsilon_0` from :math:`z \sim N(0, I)` at ``t = h`` to ``t = 1``
    (``h = 1/num_steps``, ``num_steps - 1`` updates), as in the MM-SOLD reference baseline:

    .. math::
        z \leftarrow z + h\,\frac{z + (1 - t)\hat s}{t}, \qquad
        \hat s = \frac{\mathbb E_\varepsilon[\sum_i w_i(z;\varepsilon)\, t x_i] - z}{(1-t)^2},
        \quad w(z;\varepsilon) = \mathrm{softmax}_i\Big(-\frac{\|z - t x_i\|^2
        - 2 s t\langle\varepsilon, x_i\rangle}{2(1-t)^2}\Big).

    ``hat s`` is the smoothed KDE score of the centres ``t x_i`` with bandwidth ``1 - t``
    (:func:`~jaxsample.kernels.interactions.smoothed_kde_score`), ``M`` antithetic draws.

    Args:
        key: PRNG key.
        data: ``(n, d)`` training data.
        num_samples: number of samples.
        smoothing: ``s >= 0`` (a traced value); ``s = 0`` reproduces the training points
            (memorisation).
        num_steps: ``>= 2``.
        num_smoothing_samples: ``M``, even.
        chunk_size: samples per chunk of the score computation.

    Returns:
        ``(samples (num_samples, d), CFDMInfo)``.

    Example:
        >>> import jax
        >>> data = jax.random.normal(jax.random.key(0), (20, 2))
        >>> samples, info = cfdm_sample(jax.random.key(1), data, num_samples=8, smoothing=0.1,
        ...                             num_steps=20)
        >>> samples.shape, bool(info.nonfinite)
        ((8, 2), False)
    """
    key = check_key("key", key)
    data = check_data(data)
    num_samples = check_int("num_samples", num_samples, 1)
    smoothing = check_hyperparameter("smoothing", smoothing, positive=False)
    num_steps = check_int("num_steps", num_steps, 2)
    num_smoothing_samples = check_num_smoothing_samples(num_smoothing_samples)
    chunk_size = check_chunk_size(chunk_size)
    return _cfdm(key, data, num_samples, smoothing, num_steps, num_smoothing_samples, chunk_size)


@functools.partial(jax.jit, static_argnums=(2, 4, 5, 6))
def _cfdm(key, data, num_samples, smoothing, num_steps, num_smoothing_samples, chunk_size):
    dtype = data.dtype
    dim = data.shape[1]
    h = 1.0 / num_steps
    smoothing = jnp.asarray(smoothing, dtype)
    key_start, key_steps = jax.random.split(key)

    def body(z, xs):
        t, step_key = xs
        noise = antithetic_normal(step_key, num_samples, num_smoothing_samples, dim, dtype)
        score = smoothed_kde_score(z, t * data, 1 - t, smoothing, noise, chunk_size=chunk_size)
        return z + h * (z + (1 - t) * score) / t, None

    times = h * jnp.arange(1, num_steps, dtype=dtype)
    z0 = jax.random.normal(key_start, (num_samples, dim), dtype)
    samples, _ = jax.lax.scan(body, z0, (times, jax.random.split(key_steps, num_steps - 1)))
    return samples, CFDMInfo(nonfinite=~jnp.all(jnp.isfinite(samples)))


def svgd(logdensity_fn: Callable, position, *, num_steps: int,
         learning_rate: float = 0.1, keep_every: int | None = None
         ) -> tuple[jax.Array, SVGDInfo]:
    """BlackJAX SVGD from ``position``: RBF kernel, median-heuristic bandwidth, Adam.

    ``blackjax.svgd(jax.grad(logdensity_fn), optax.adam(learning_rate),
    kernel=rbf_kernel, update_kernel_parameters=update_median_heuristic)`` run for ``num_steps``
    steps (BlackJAX's RBF is ``exp(−‖x − y‖²/ℓ)`` with ``ℓ = median(‖x_i − x_j‖)² / log N``). The
    one SVGD set-up the examples, the demo and the benchmarks compare ETD with. Jittable (wrap the
    call in ``jax.jit``); BlackJAX is imported here, so it is needed only when this is called.

    Positions may be pytrees (:mod:`jaxsample._pytree`): SVGD runs on the flat particles and
    hands them back in the user's structure.

    Args:
        logdensity_fn: ``log π(x)`` for one point: an array ``(d,)`` or a pytree of arrays.
        position: initial particles ``(N, d)``, or a pytree whose leaves have a leading ``N``.
        num_steps: SVGD steps (``>= 1``).
        learning_rate: Adam's learning rate (a traced value).
        keep_every: if given, return the particles every ``keep_every`` steps instead of only the
            last (``num_steps`` must be a multiple of it).

    Returns:
        ``(particles, SVGDInfo)``: ``(N, d)`` final particles, or
        ``(num_steps // keep_every, N, d)`` snapshots (pytrees: leaves with those leading
        axes).

    Raises:
        ImportError: BlackJAX (or optax) is not installed.
        ValueError: called eagerly, ``logdensity_fn`` is not finite at any initial particle.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x0 = jax.random.normal(jax.random.key(0), (16, 2))
        >>> particles, info = svgd(lambda x: -0.5 * jnp.sum(x**2), x0, num_steps=5)
        >>> particles.shape, bool(info.nonfinite)
        ((16, 2), False)
    """
    blackjax, optax = _import_blackjax()
    position, structure, logdensity_fn = _checked_start(logdensity_fn, position)
    num_steps = check_int("num_steps", num_steps, 1)
    keep_every = check_int("keep_every", keep_every, 1, allow_none=True)
    if keep_every is not None and num_steps % keep_every:
        raise ValueError(f"num_steps ({num_steps}) must be a multiple of keep_every "
                         f"({keep_every})")
    learning_rate = jnp.asarray(check_hyperparameter("learning_rate", learning_rate),
                                position.dtype)
    sampler = blackjax.svgd(
        jax.grad(logdensity_fn),
        optax.adam(learning_rate),
        kernel=blackjax.vi.svgd.rbf_kernel,
        update_kernel_parameters=blackjax.vi.svgd.update_median_heuristic,
    )
    state = sampler.init(position, {"length_scale": jnp.ones((), position.dtype)})
    particles = _svgd_particles(sampler, state, num_steps, keep_every)
    info = SVGDInfo(~jnp.all(jnp.isfinite(particles)))
    return _pytree.unravel(particles, structure), info


def _import_blackjax():
    """``(blackjax, optax)``, imported on first use: BlackJAX is an optional dependency."""
    try:
        import blackjax
        import optax
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "jaxsample.particles.svgd needs BlackJAX and optax: pip install 'jaxsample[test]' "
            "(or pip install blackjax)") from err
    return blackjax, optax


def _checked_start(logdensity_fn, position):
    """``(particles (N, d), structure, logdensity_fn on flat points)`` from a checked start.

    ``position`` is raveled once (pytree positions: each particle one flat row), needs at least
    two particles, and ``logdensity_fn`` must be finite at one of them (checked when eager).
    """
    check_callable("logdensity_fn", logdensity_fn)
    position = check_position("position", position, batch_ndim=1)
    position, structure = _pytree.ravel(position, batch_ndim=1)
    if structure is None:
        position = check_array("position", position, ndim=2, min_rows=2,
                               layout="(num_particles, dim)")
    elif position.shape[0] < 2:
        raise ValueError(f"position needs at least 2 particles, got {position.shape[0]}")
    check_finite_start("logdensity_fn", logdensity_fn, _pytree.unravel(position, structure))
    return position, structure, _pytree.on_flat(logdensity_fn, structure)


def _svgd_particles(sampler, state, num_steps, keep_every):
    """The particles after ``num_steps`` SVGD steps, or every ``keep_every`` steps, stacked."""
    def advance(state, length):
        # optax's Adam raises a float decay to an int32 count, which strict dtype promotion
        # (a user's or a test suite's setting) refuses; its internals run under standard promotion
        with jax.numpy_dtype_promotion("standard"):
            return jax.lax.fori_loop(0, length, lambda _, s: sampler.step(s), state)

    if keep_every is None:
        return advance(state, num_steps).particles

    def snapshot(state, _):
        state = advance(state, keep_every)
        return state, state.particles

    return jax.lax.scan(snapshot, state, None, length=num_steps // keep_every)[1]
