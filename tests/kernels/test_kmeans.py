"""Tests of jaxsample.kernels.kmeans: Lloyd's objective, chunked assignments, mini-batches."""

import functools

import jax
import numpy as np

from jaxsample.kernels import kmeans as km


def clustered(seed, sizes, spread):
    """Points around random centres in 2-D, ``sizes[c]`` in cluster c (NumPy)."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    centres = 2.0 * rng.standard_normal((len(sizes), 2))
    return centres[ids] + spread * rng.standard_normal((ids.shape[0], 2))


def _objective(points, ids, num_clusters):
    ids = np.asarray(ids)  # within-cluster sum of squares of a partition
    return sum(((points[ids == c] - points[ids == c].mean(0)) ** 2).sum()
               for c in range(num_clusters) if np.any(ids == c))


def test_kmeans_objective_non_increasing_and_chunked_equals_dense(x64):
    points = clustered(9, sizes=(30, 50, 40, 20), spread=1.2)
    # max_iterations and tolerance are traced: one compilation
    key = jax.random.key(10)
    history = [km.kmeans(key, points, 4, t, 0.0, chunk_size=32) for t in range(1, 9)]
    objectives = np.array([float(out.objective) for out in history])
    assert np.all(np.diff(objectives) <= 1e-9 * objectives[:-1]), objectives
    assert objectives[-1] < objectives[0]
    for out in history:  # centres are the means of the returned partition; J >= its own SS
        assert int(out.solver.num_iterations) <= 8
        assert float(out.objective) >= _objective(points, out.assignment, 4) - 1e-9
    # the only chunk-dependent step, the assignment, is the same chunked or dense
    centres, origin = history[-2].centres, points.mean(0)  # what the 8th assignment saw
    assign = jax.jit(km.assign, static_argnums=3)
    chunked, dense = assign(points, centres, origin, 32), assign(points, centres, origin, None)
    np.testing.assert_array_equal(chunked[0], dense[0])
    np.testing.assert_allclose(chunked[1], dense[1], rtol=1e-12)
    np.testing.assert_array_equal(chunked[0], history[-1].assignment)
    # random seeding with mini-batch steps lands near the Lloyd optimum on separated clusters
    lloyd = km.kmeans(key, points, 4, 200, 1e-8, chunk_size=32)
    assert bool(lloyd.solver.converged) and int(lloyd.solver.num_iterations) < 200
    minibatch = km.kmeans(key, points, 4, 200, 1e-5, init="random", batch_size=64, chunk_size=32)
    assert bool(minibatch.solver.converged) and int(minibatch.solver.num_iterations) < 200
    assert float(minibatch.objective) <= 1.5 * float(lloyd.objective)


def test_progress_meter_reports_every_iteration():
    """A meter passed to kmeans (and build_index) is called from inside the compiled loop once
    per Lloyd iteration, with max_iterations as its num_steps."""
    from jaxsample.progress import ProgressMeter

    class Record(ProgressMeter):
        def __init__(self):
            super().__init__(every=1)
            self.seen = []

        def on_update(self, step, num_steps, elapsed):
            self.seen.append((step, num_steps))

    points = clustered(3, sizes=(20, 30), spread=0.5)
    meter = Record()
    out = km.kmeans(jax.random.key(0), points, 2, 5, 0.0, chunk_size=16, progress=meter)
    assert meter.seen == [(s, 5) for s in range(1, int(out.solver.num_iterations) + 1)]


def test_status_is_success_only_when_the_stopping_rule_held():
    """Lloyd and mini-batch stopped by the cap report max_iterations_reached under jit; a run
    that meets its rule reports success (with fewer iterations than the cap)."""
    from jaxsample.kernels.solver import RESULTS

    points = clustered(3, sizes=(40, 60, 30), spread=0.8)
    key = jax.random.key(4)

    @functools.partial(jax.jit, static_argnames="batch_size")
    def run(max_iterations, tolerance, batch_size=None):
        return km.kmeans(key, points, 3, max_iterations, tolerance, batch_size=batch_size)

    for batch_size in (None, 32):
        capped = run(1, 0.0, batch_size=batch_size).solver  # tolerance 0: no step meets it
        assert int(capped.num_iterations) == 1
        assert capped.result == RESULTS.max_iterations_reached
        assert not bool(capped.converged)
    done = run(100, 1e-6).solver  # Lloyd reaches a fixed point long before 100 iterations
    assert done.result == RESULTS.successful
    assert int(done.num_iterations) < 100
