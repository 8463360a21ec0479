"""Spreading particles over devices.

Particle samplers in jaxsample are written for one array of positions ``(n, d)``; they run unchanged
on an array sharded along its first axis. XLA's partitioner splits the per-particle work and inserts
the collectives the interactions need (all-gathers for pairwise terms, reductions for weights):
no home-made distribution layer, and the same code scales to many hosts.

**Many hosts.** When the particles outgrow one machine, start one process per host (or per group of
devices) and call ``jax.distributed.initialize(coordinator_address="host0:port",
num_processes=P, process_id=i)`` in each before anything else touches JAX (on CPU hosts also
``jax.config.update("jax_cpu_collectives_implementation", "gloo")``). :func:`particle_mesh` then
spans every process's devices, and :func:`shard_particles`, given the same host array on every
process, builds the global array from each process's own rows; ``alg.init``, ``jaxsample.run``
and the samplers run unchanged, and
``jax.experimental.multihost_utils.process_allgather(x, tiled=True)`` brings the particles back to
every host. ``tests/test_multiprocess.py`` runs this with two local processes and checks it
against the single-process result.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from jax.sharding import PartitionSpec
    >>> from jaxsample.sharding import particle_mesh, shard_particles
    >>> mesh = particle_mesh()                      # every local device on one axis
    >>> x = shard_particles(jnp.zeros((8 * jax.device_count(), 2)), mesh)
    >>> x.sharding.spec == PartitionSpec("particles")
    True
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxsample._checks import check_int

__all__ = ["particle_mesh", "particle_sharding", "shard_particles"]


def particle_mesh(num_devices: int | None = None, axis_name: str = "particles") -> Mesh:
    """A 1-D device mesh over the first ``num_devices`` devices (default: all)."""
    devices = jax.devices()
    if num_devices is None:
        num_devices = len(devices)
    check_int("num_devices", num_devices, 1)
    if num_devices > len(devices):
        raise ValueError(f"num_devices={num_devices} but only {len(devices)} device(s) are visible")
    return Mesh(np.asarray(devices[:num_devices]), (axis_name,))


def particle_sharding(mesh: Mesh | None = None) -> NamedSharding:
    """``NamedSharding`` that splits axis 0 (particles) over the mesh's single axis."""
    mesh = particle_mesh() if mesh is None else mesh
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be 1-D, got axes {mesh.axis_names}")
    return NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))


def shard_particles(x, mesh: Mesh | None = None):
    """Places ``x`` (and every leaf of a pytree) split along axis 0 over ``mesh``.

    Args:
        x: array or pytree of arrays with a leading particle axis, its length divisible by the
            number of devices in the mesh.
        mesh: a 1-D mesh; default :func:`particle_mesh` over all devices.

    Returns:
        The same values, sharded; pass them to ``alg.init`` / ``alg.step`` as usual.
    """
    sharding = particle_sharding(mesh)
    size = sharding.mesh.size

    def put(leaf):
        if leaf.ndim < 1 or leaf.shape[0] % size:
            raise ValueError(
                f"x: leading axis of shape {leaf.shape} must be divisible by the {size} devices"
            )
        if jax.process_count() == 1:
            return jax.device_put(leaf, sharding)
        # multi-process: every process holds the same host value; each places its own rows
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, x)
