"""Bridges to the libraries a user's model and analysis live in: NumPyro in, ArviZ out.

* :func:`from_numpyro` turns a NumPyro model into what every jaxsample sampler takes: a
  log-density over the unconstrained space, in the model's own pytree (a dict of sample sites),
  an initial position, and ``constrain`` mapping draws back to the constrained space.
* :func:`to_inference_data` turns traces (chains × draws) and particle clouds (one chain) into an
  ArviZ ``InferenceData``, pytree leaves as named variables and the ``Info`` as ``sample_stats``.

BlackJAX needs no bridge: :func:`jaxsample.run` takes any algorithm with ``init`` and ``step``
of BlackJAX's shape (``run(key, blackjax.nuts(logdensity_fn, step_size, inverse_mass_matrix),
state, num_steps)``), and BlackJAX's samplers take the same pytree log-densities as jaxsample's.

NumPyro and ArviZ are optional (the ``interop`` extra: ``pip install 'jaxsample[interop]'``);
each is imported when its bridge is called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_callable

__all__ = ["NumPyroModel", "from_numpyro", "to_inference_data"]

PyTree = Any


def _missing(bridge: str, library: str) -> ImportError:
    return ImportError(f"jaxsample.interop.{bridge} needs {library}: pip install "
                       "'jaxsample[interop]'")


class NumPyroModel(NamedTuple):
    """A NumPyro model as jaxsample samplers take it.

    Attributes:
        logdensity_fn: ``log p(z, data)`` of one point ``z`` of the unconstrained space, a dict
            of the latent sample sites (the Jacobians of the constraining transforms included:
            NumPyro's ``-potential_fn``).
        position: the initial point, a dict of the sites: every unconstrained value 0 (NumPyro's
            ``init_to_uniform(radius=0)``; a positive scale starts at 1, a location at 0).
        constrain: ``constrain(draws) -> dict``: draws of the unconstrained sites with any
            leading axes (one point, chains × draws, particles) mapped to the constrained space,
            with the model's deterministic sites added, under the model's site names.
    """

    logdensity_fn: Callable[[dict], jax.Array]
    position: dict
    constrain: Callable[[dict], dict]


def from_numpyro(model: Callable, *args, **kwargs) -> NumPyroModel:
    """The log-density, start and constraining map of a NumPyro model given its data.

    Built by ``numpyro.infer.util.initialize_model`` with the model's arguments fixed, so every
    call builds new functions: build once and reuse ``logdensity_fn`` to reuse the compiled
    sampler (a sampler's cache key is its density). The density runs under standard dtype
    promotion (NumPyro's distributions rely on it). Only continuous latent sites are supported.

    Args:
        model: a NumPyro model function.
        *args: the model's positional arguments (data).
        **kwargs: the model's keyword arguments (e.g. observed data).

    Returns:
        A :class:`NumPyroModel`.

    Raises:
        ImportError: NumPyro is not installed (the ``interop`` extra).

    Example:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import jaxsample
        >>> from jaxsample.interop import from_numpyro
        >>> def model(y):
        ...     scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        ...     numpyro.sample("y", dist.Normal(0.0, scale), obs=y)
        >>> bridge = from_numpyro(model, jnp.array([0.5, -1.0, 1.5]))
        >>> alg = jaxsample.mcmc.mala(bridge.logdensity_fn, step_size=0.1)
        >>> state, trace = jaxsample.run(jax.random.key(0), alg, alg.init(bridge.position), 200,
        ...                              transform=lambda s, i: s.position)
        >>> draws = bridge.constrain(trace)
        >>> draws["scale"].shape, bool(jnp.all(draws["scale"] > 0))
        ((200,), True)
    """
    check_callable("model", model)
    try:
        from numpyro.infer import init_to_uniform
        from numpyro.infer.util import initialize_model
    except ImportError as err:
        raise _missing("from_numpyro", "NumPyro") from err
    with jax.numpy_dtype_promotion("standard"):
        # the key only feeds the initial draw, which radius 0 makes the constant 0
        info = initialize_model(jax.random.key(0), model, model_args=args, model_kwargs=kwargs,
                                init_strategy=init_to_uniform(radius=0.0))
    potential_fn, postprocess_fn = info.potential_fn, info.postprocess_fn
    position = info.param_info.z
    point_ndim = {name: jnp.ndim(value) for name, value in position.items()}

    def logdensity_fn(z):
        with jax.numpy_dtype_promotion("standard"):
            return -potential_fn(z)

    def constrain(draws):
        name = next(iter(point_ndim))
        batch = jnp.shape(draws[name])[:jnp.ndim(draws[name]) - point_ndim[name]]
        flat = jax.tree.map(lambda leaf: jnp.reshape(leaf, (-1,) + jnp.shape(leaf)[len(batch):]),
                            draws)
        with jax.numpy_dtype_promotion("standard"):
            out = jax.vmap(postprocess_fn)(flat)
        return jax.tree.map(lambda leaf: jnp.reshape(leaf, batch + leaf.shape[1:]), out)

    return NumPyroModel(logdensity_fn, position, constrain)


def _key_name(key) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _named_leaves(tree: PyTree, names: Sequence[str] | None, default: str) -> dict[str, Any]:
    """``{name: leaf}``: leaf paths joined by ``.`` (``default`` for a bare array), or ``names``."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    if names is not None:
        names = list(names)
        if len(names) != len(leaves):
            raise ValueError(f"names must give one name per leaf ({len(leaves)}), got "
                             f"{len(names)}: {names}")
        return {name: leaf for name, (_, leaf) in zip(names, leaves, strict=True)}
    return {(".".join(_key_name(k) for k in path) or default): leaf for path, leaf in leaves}


def _is_particle_state(value) -> bool:
    return hasattr(value, "_fields") and "positions" in value._fields


def to_inference_data(samples_or_trace: PyTree, *, names: Sequence[str] | None = None,
                      info: PyTree | None = None, particles: bool | None = None):
    """An ArviZ ``InferenceData`` from a trace or a particle cloud, with named variables.

    * **MCMC traces**: every leaf is ``(chain, draw, ...)``, ArviZ's convention; e.g. the
      positions kept by ``jax.vmap`` of :func:`jaxsample.run` over chains with
      ``transform=lambda state, info: state.position`` (add a leading axis to one chain's
      trace). ``info`` (the same run's trace of the ``Info``) has leaves ``(chain, draw, ...)``.
    * **Particle clouds** (``particles=True``, or a state with a ``positions`` field such as
      ``ETDState``): every leaf is ``(N, ...)``, the particles of one "chain" of ``N`` draws.
      ``info`` is the run's per-step trace, leaves ``(num_steps, ...)``; its dimension is named
      ``step``, not ``draw``, since a step is not a particle.

    Pytree leaves become variables named by their paths (``{"mu": ..., "tau": ...}`` gives ``mu``
    and ``tau``; nested keys are joined by ``.``; a bare array is ``x``), or by ``names`` (one per
    leaf, in ``jax.tree.leaves`` order). ``info``'s fields go to ``sample_stats`` under their
    own names. Arrays are copied to the host.

    Args:
        samples_or_trace: a pytree of draws (see above) or a particle state.
        names: optional variable names, one per leaf.
        info: optional ``Info`` trace for ``sample_stats``.
        particles: read leaves as one cloud ``(N, ...)``; default: only for particle states.

    Returns:
        ``arviz.InferenceData`` with ``posterior`` (and ``sample_stats`` when ``info`` is given).

    Raises:
        ImportError: ArviZ is not installed (the ``interop`` extra).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.interop import to_inference_data
        >>> alg = jaxsample.mcmc.mala(lambda p: -0.5 * (p["mu"] ** 2 + jnp.sum(p["b"] ** 2)),
        ...                           step_size=0.5)
        >>> def chain(key):
        ...     state = alg.init({"mu": jnp.zeros(()), "b": jnp.zeros(2)})
        ...     return jaxsample.run(key, alg, state, 100,
        ...                          transform=lambda s, i: (s.position, i))[1]
        >>> draws, info = jax.vmap(chain)(jax.random.split(jax.random.key(0), 4))
        >>> idata = to_inference_data(draws, info=info)
        >>> dict(idata.posterior.sizes), sorted(idata.posterior.data_vars)
        ({'chain': 4, 'draw': 100, 'b_dim_0': 2}, ['b', 'mu'])
        >>> float(idata.sample_stats.acceptance_rate.mean()) > 0.5
        True
    """
    try:
        import arviz as az
    except ImportError as err:
        raise _missing("to_inference_data", "ArviZ") from err
    if particles is None:
        particles = _is_particle_state(samples_or_trace)
    if _is_particle_state(samples_or_trace):
        samples_or_trace = samples_or_trace.positions
    variables = {name: np.asarray(leaf)
                 for name, leaf in _named_leaves(samples_or_trace, names, "x").items()}
    minimum = 1 if particles else 2
    for name, value in variables.items():
        if value.ndim < minimum:
            layout = "(N, ...)" if particles else "(chain, draw, ...)"
            raise ValueError(f"variable {name!r} must have shape {layout}, got {value.shape}")
    if particles:
        variables = {name: value[None] for name, value in variables.items()}
    posterior = az.dict_to_dataset(variables, library=None)
    groups = {"posterior": posterior}
    if info is not None:
        stats = {name: np.asarray(leaf) for name, leaf in _named_leaves(info, None, "info").items()}
        if particles:
            stats = {name: value[None] for name, value in stats.items()}
            groups["sample_stats"] = az.dict_to_dataset(stats).rename({"draw": "step"})
        else:
            groups["sample_stats"] = az.dict_to_dataset(stats)
    return az.InferenceData(**groups)
