"""The case of tests/test_multiprocess.py: one definition, run in one and in two processes."""

import numpy as np

NUM_PARTICLES, DIM, NUM_STEPS = 64, 2, 8


def initial_positions():
    return 2.0 * np.random.default_rng(0).standard_normal((NUM_PARTICLES, DIM)).astype(np.float32)


def make_algorithm(jaxsample, jnp):
    # Gibbs coupling and barycentric moves: a smooth function of the inputs (no Sinkhorn stopping
    # rule, no categorical draw), so the sharded and single-process runs agree to round-off
    return jaxsample.etd(lambda x: -0.5 * jnp.sum(x * x), num_proposals=4, coupling="gibbs",
                         update="barycentric")


def run_case(jaxsample, algorithm, positions):
    import jax

    state = algorithm.init(positions)
    state, _ = jaxsample.run(jax.random.key(1), algorithm, state, NUM_STEPS)
    return state.positions
