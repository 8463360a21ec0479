"""Contract entries: two-level softmax sampling (``jaxsample.softmax.two_level``) and the
index it draws from (built by k-means or from given clusters: host-side, not jittable)."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.softmax import two_level

_IDS = np.repeat(np.arange(3), [2, 5, 3])


def tiny_index(dtype):
    """10 items in d = 2, clusters of 2, 5 and 3 (tests/softmax/test_softmax.py reuses it, so the
    compilations are shared)."""
    x = jnp.asarray(np.linspace(-1.0, 1.0, 20).reshape(10, 2), dtype)
    return two_level.index_from_clusters(x, jnp.asarray(_IDS, jnp.int32))[0]


def tiny_queries(dtype):
    return jnp.asarray([[0.5, -1.0], [2.0, 0.3]], dtype)


def _sample(dtype):
    index, queries = tiny_index(dtype), tiny_queries(dtype)
    return lambda key: two_level.sample(key, index, queries, num_samples=4)


def _hyper(dtype):
    index, queries = tiny_index(dtype), tiny_queries(dtype)
    return lambda key, h: two_level.sample(key, index, queries, num_samples=4, temperature=h)


def _index(dtype):
    x = jnp.asarray(np.linspace(-1.0, 1.0, 20).reshape(10, 2), dtype)

    def fn(key):
        return (two_level.build_index(key, x, num_clusters=3, max_iterations=3),
                two_level.index_from_clusters(x, jnp.asarray(_IDS, jnp.int32)))

    return fn


def _bad_queries():
    two_level.sample(KEY, tiny_index(jnp.float32), jnp.ones((2, 3), jnp.float32), num_samples=4)


def _bad_num_samples():
    two_level.sample(KEY, tiny_index(jnp.float32), tiny_queries(jnp.float32), num_samples=0)


def _bad_temperature():
    two_level.sample(KEY, tiny_index(jnp.float32), tiny_queries(jnp.float32), num_samples=2,
                     temperature=-1.0)


def _bad_variant():
    two_level.sample(KEY, tiny_index(jnp.float32), tiny_queries(jnp.float32), num_samples=2,
                     variant="exact")


def _bad_exclude():
    two_level.sample(KEY, tiny_index(jnp.float32), tiny_queries(jnp.float32), num_samples=2,
                     exclude=jnp.asarray([[0, 10], [1, 2]]))


def _bad_key():
    two_level.sample(None, tiny_index(jnp.float32), tiny_queries(jnp.float32), num_samples=2)


ENTRIES = [
    Entry(
        name="softmax.two_level",
        module="jaxsample.softmax.two_level",
        build=_sample,
        covers=("softmax.sample",),
        hyper=_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(_bad_queries, ValueError, "queries"),
            BadInput(_bad_num_samples, ValueError, "num_samples"),
            BadInput(_bad_temperature, ValueError, "temperature"),
            BadInput(_bad_variant, ValueError, "variant"),
            BadInput(_bad_exclude, ValueError, "exclude"),
            BadInput(_bad_key, TypeError, "key"),
        ),
        note="sample(key, index, queries, *, num_samples) -> (items, SoftmaxInfo); temperature "
             "is traced; the index is built eagerly outside the traced function",
    ),
    Entry(
        name="softmax.two_level/index",
        module="jaxsample.softmax.two_level",
        build=_index,
        covers=("softmax.build_index", "softmax.index_from_clusters"),
        info=lambda outputs: tuple(info for _, info in outputs),
        traceable=False,
        bad_inputs=(
            BadInput(lambda: two_level.build_index(None, np.ones((4, 2))), TypeError, "key"),
            BadInput(lambda: two_level.build_index(KEY, np.ones((4, 2)), init="forgy"),
                     ValueError, "init"),
            BadInput(lambda: two_level.index_from_clusters(np.ones((4, 2)),
                                                           np.array([0, 0, 2, 2])),
                     ValueError, "cluster_ids"),
        ),
        note="build_index (k-means, 3 clusters, 3 iterations; keyed, with the legacy-key case) "
             "and index_from_clusters on the sampler entry's 10 items: not jittable (the "
             "cluster bookkeeping that sets the index's shapes runs on the host), so the "
             "float32/float64 index, its Info and nonfinite flag are checked; the draws from "
             "such an index are the softmax.two_level entry's",
    ),
]
