"""Particles sharded over the 4 fake CPU devices; pmap over independent chains."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample import SamplingAlgorithm, diagnostics, run
from jaxsample.sharding import particle_mesh, shard_particles


def test_shard_particles_places_rows_on_every_device():
    assert jax.device_count() == 4
    x = shard_particles(jnp.arange(16.0).reshape(8, 2))
    assert len(x.sharding.device_set) == 4
    assert x.addressable_shards[0].data.shape == (2, 2)


def test_sharded_interaction_equals_unsharded():
    x = jax.random.normal(jax.random.key(0), (64, 3))
    y = jax.random.normal(jax.random.key(1), (64, 3)) + 0.2
    expected, _ = diagnostics.energy_distance(x, y)
    sharded, _ = jax.jit(diagnostics.energy_distance)(shard_particles(x), shard_particles(y))
    np.testing.assert_allclose(sharded, expected, rtol=1e-5)


def test_run_on_sharded_particles_keeps_sharding():
    alg = SamplingAlgorithm(
        init=lambda x: x,
        step=lambda k, x: (x - 0.1 * (x - jnp.mean(x, axis=0, keepdims=True)), None))
    x = jax.random.normal(jax.random.key(0), (16, 2))
    final, _ = run(jax.random.key(0), alg, shard_particles(x), 5)
    expected, _ = run(jax.random.key(0), alg, x, 5)
    np.testing.assert_allclose(final, expected, rtol=1e-5)
    assert len(final.sharding.device_set) == 4


def test_pmap_over_independent_chains():
    alg = SamplingAlgorithm(init=lambda x: x,
                            step=lambda k, x: (0.5 * x + jax.random.normal(k, x.shape), None))
    keys = jax.random.split(jax.random.key(0), 4)
    x0 = jnp.zeros((4, 3))
    finals, _ = jax.pmap(lambda k, x: run(k, alg, x, 10))(keys, x0)
    for i in range(4):
        np.testing.assert_allclose(finals[i], run(keys[i], alg, x0[i], 10)[0], rtol=1e-5)


def test_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        shard_particles(jnp.zeros((6, 2)))
    with pytest.raises(ValueError, match="num_devices"):
        particle_mesh(99)
