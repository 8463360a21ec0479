"""One of two JAX processes of tests/test_multiprocess.py: ETD on particles sharded across both.

Usage: python _multiprocess_worker.py PROCESS_ID PORT OUTFILE
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
process_id, port, outfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2,
                           process_id=process_id)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from multiprocess_case import initial_positions, make_algorithm, run_case  # noqa: E402

import jaxsample  # noqa: E402
from jaxsample.sharding import particle_mesh, shard_particles  # noqa: E402

mesh = particle_mesh()
assert jax.process_count() == 2 and mesh.size == jax.device_count() > jax.local_device_count()
positions = shard_particles(initial_positions(), mesh)
assert not positions.is_fully_addressable
final = run_case(jaxsample, make_algorithm(jaxsample, jnp), positions)
gathered = multihost_utils.process_allgather(final, tiled=True)
if process_id == 0:
    np.save(outfile, np.asarray(gathered))
jax.distributed.shutdown()
