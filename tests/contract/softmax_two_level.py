"""Contract entry: two-level softmax sampling (``jaxsample.softmax.two_level``)."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.softmax import two_level

_IDS = np.repeat(np.arange(3), [2, 5, 3])


def tiny_index(dtype):
    """10 items in d = 2, clusters of 2, 5 and 3 (tests/test_softmax.py reuses it, so the
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
]
