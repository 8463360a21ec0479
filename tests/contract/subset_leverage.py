"""Contract entries: leverage-score subset selection (``jaxsample.subset.leverage``)."""

import jax.numpy as jnp
import numpy as np

from contract import BadInput, Entry
from jaxsample.subset import leverage

# 12 tie-free rows in 3-D (a fixed, generic draw: distinct norms, no collinear pairs)
_ROWS = np.random.default_rng(0).normal(size=(12, 3))


def _x(dtype):
    return jnp.asarray(_ROWS, dtype)


_QUALITY = np.linspace(0.5, 1.5, 12)


def _sample(dtype):
    x, quality = _x(dtype), jnp.asarray(_QUALITY, dtype)
    return lambda key: leverage.leverage_sample(key, x, 4, quality=quality, normalize=True)


def _sample_hyper(dtype):
    x, quality = _x(dtype), jnp.asarray(_QUALITY, dtype)
    return lambda key, h: leverage.leverage_sample(key, x, 4, ridge=h, quality=quality,
                                                   normalize=True)


def _vendi(dtype):
    x = _x(dtype)
    return lambda key: leverage.vendi_score(x, q=2.0)   # deterministic: the key is unused


def _vendi_hyper(dtype):
    x = _x(dtype)
    return lambda key, q: leverage.vendi_score(x, q=q)


def _greedy(dtype):
    x, quality = _x(dtype), jnp.asarray(_QUALITY, dtype)

    def fn(key):
        del key  # greedy is deterministic
        return leverage.leverage_select(x, 4, quality=quality, normalize=True)

    return fn


def _greedy_hyper(dtype):
    x = _x(dtype)

    def fn(key, h):
        del key
        return leverage.leverage_select(x, 4, ridge=h, normalize=True)

    return fn


def _sharded(dtype):
    x, quality = _x(dtype), jnp.asarray(_QUALITY, dtype)

    def fn(key):
        del key  # greedy per shard, then on the union: deterministic
        return leverage.leverage_select_sharded(x, 4, quality=quality, normalize=True)

    return fn


def _sharded_hyper(dtype):
    x = _x(dtype)

    def fn(key, h):
        del key
        return leverage.leverage_select_sharded(x, 4, ridge=h, normalize=True)

    return fn


def _call(**kwargs):
    args = dict(embeddings=_x(jnp.float32), k=3)
    args.update(kwargs)
    embeddings, k = args.pop("embeddings"), args.pop("k")
    return lambda: leverage.leverage_select(embeddings, k, **args)


_NAN = _ROWS.copy()
_NAN[2, 1] = np.nan

ENTRIES = [
    Entry(
        name="subset.leverage/sample",
        module="jaxsample.subset.leverage",
        build=_sample,
        covers=("subset.leverage_sample",),
        hyper=_sample_hyper,
        hyper_values=(1e-2, 1.0),
        bad_inputs=(
            BadInput(_call(k=13), ValueError, "k"),
            BadInput(_call(k=0), ValueError, "k"),
            BadInput(_call(embeddings=jnp.asarray(_NAN, jnp.float32)), ValueError, "embeddings"),
            BadInput(_call(embeddings=np.ones(5)), ValueError, "embeddings"),
            BadInput(_call(ridge=0.0), ValueError, "ridge"),
            BadInput(_call(ridge=-1.0), ValueError, "ridge"),
            BadInput(_call(quality=-jnp.ones(12)), ValueError, "quality"),
            BadInput(_call(quality=jnp.ones(11)), ValueError, "quality"),
            BadInput(lambda: leverage.leverage_sample(None, _x(jnp.float32), 3), TypeError, "key"),
            BadInput(_call(chunk_size=0), ValueError, "chunk_size"),
            BadInput(_call(normalize=1), TypeError, "normalize"),
            BadInput(lambda: leverage.leverage_sample("seed", _x(jnp.float32), 3), TypeError,
                     "key must be a PRNG key"),
            BadInput(lambda: leverage.vendi_score(_x(jnp.float32), kernel="rbf"), ValueError,
                     "kernel"),
            BadInput(lambda: leverage.vendi_score(_x(jnp.float32), q=-1.0), ValueError, "q"),
            BadInput(lambda: leverage.vendi_score(jnp.asarray(_NAN)), ValueError, "embeddings"),
            BadInput(lambda: leverage.leverage_select_sharded(_x(jnp.float32)[:10], 2),
                     ValueError, "embeddings"),
            BadInput(lambda: leverage.leverage_select_sharded(_x(jnp.float32), 2,
                                                              per_shard_k=4), ValueError,
                     "per_shard_k"),
        ),
        note=("leverage_sample with quality and normalize=True on tie-free rows (jit and eager "
              "draw the same indices); its law is tested in tests/subset/test_leverage.py"),
    ),
    Entry(
        name="subset.leverage/greedy",
        module="jaxsample.subset.leverage",
        build=_greedy,
        covers=("subset.leverage_select",),
        hyper=_greedy_hyper,
        hyper_values=(1e-2, 1.0),
        bad_inputs=(BadInput(_call(k=0), ValueError, "k"),),
        note="leverage_select (deterministic: the key is unused) on the same rows",
    ),
    Entry(
        name="subset.leverage/vendi_score",
        module="jaxsample.subset.leverage",
        build=_vendi,
        covers=("subset.vendi_score",),
        hyper=_vendi_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: leverage.vendi_score(_x(jnp.float32), kernel="rbf"), ValueError,
                     "kernel"),
            BadInput(lambda: leverage.vendi_score(_x(jnp.float32), q=-1.0), ValueError, "q"),
        ),
        note="a deterministic estimator (the key is unused); the order q is traced",
    ),
    Entry(
        name="subset.leverage/sharded",
        module="jaxsample.subset.leverage",
        build=_sharded,
        covers=("subset.leverage_select_sharded",),
        hyper=_sharded_hyper,
        hyper_values=(1e-2, 1.0),
        bad_inputs=(
            BadInput(lambda: leverage.leverage_select_sharded(_x(jnp.float32), 0), ValueError,
                     "k"),
        ),
        note="leverage_select_sharded on the same 12 rows over the test's fake CPU devices "
             "(shard_map; deterministic: the key is unused); the ridge is traced",
    ),
]
