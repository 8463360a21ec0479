"""Contract entries for learned trajectory termination (jaxsample.mcmc.stopping).

A stopped MALA chain batch (σ = 0.3, cap 4) on a 2-D Gaussian; the MALA step size is the traced
hyper-parameter (it lives in the wrapped algorithm's step pytree). The multilevel entry runs a
two-level classifier (constant per level) through ``sample_multilevel`` with MALA kernels on the
two levels of the path from ``p₀ = N(0, 4I)`` to the Gaussian. The training entry runs
``train_stopping`` for 2 optimiser steps on a tiny network (the code path, not the fit).
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from contract import BadInput, Entry
from jaxsample.mcmc import (
    StoppingNet,
    adaptive_stop,
    mala,
    sample_multilevel,
    sample_until_stopped,
    train_stopping,
)


def _logdensity(x):
    return -0.5 * jnp.sum(x * x)


def _stop(x):
    return 0.3


def _run(key, dtype, step_size):
    wrapped = adaptive_stop(mala(_logdensity, step_size=step_size), _stop, max_steps=4)
    start = jnp.asarray(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype)
    return sample_until_stopped(key, wrapped, start)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.5)


def _start(dtype):
    """One stopped chain, σ = 0.1 and a cap of 3: a 4-step run crosses the cap, and steps
    after a chain stopped are frozen but still counted."""
    wrapped = adaptive_stop(mala(_logdensity, step_size=0.5), _stop_rarely, max_steps=3)
    return wrapped, wrapped.init(jnp.asarray([0.5, -0.5], dtype))


def _stop_rarely(x):
    return 0.1


def _hyper(dtype):
    return lambda key, step_size: _run(key, dtype, step_size)


_ALG = mala(_logdensity, step_size=0.5)


def _init_logdensity(x):
    return -0.125 * jnp.sum(x * x)


def _level_model(x, level):
    """Logit −f: σ = sigmoid(−f) is 0.62 on level 0 and 0.38 on level 1."""
    return level.astype(x.dtype) - 0.5 + 0.0 * jnp.sum(x)


def _multilevel(key, dtype, step_size):
    net = StoppingNet(_level_model, jnp.zeros(2, dtype), num_levels=2)
    start = jnp.asarray(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype)
    return sample_multilevel(key, lambda f: mala(f, step_size=step_size), _logdensity,
                             _init_logdensity, net, start, max_steps=4)


_NET = StoppingNet(_level_model, jnp.zeros(2), num_levels=2)


def _train(dtype):
    start = jnp.asarray(np.linspace(-2.0, 2.0, 8).reshape(4, 2), dtype)

    def fn(key):
        net, info = train_stopping(key, mala(_logdensity, step_size=0.5), _logdensity,
                                   _init_logdensity, start, num_steps=2, pool_steps=2,
                                   batch_size=4, width=4, depth=1)
        # the net's arrays (its MLP also holds the activation function, not an array)
        return eqx.filter(net, eqx.is_array), info

    return fn


ENTRIES = [Entry(
    name="mcmc.stopping",
    module="jaxsample.mcmc.stopping",
    build=_build,
    covers=("mcmc.adaptive_stop", "mcmc.sample_until_stopped", "mcmc.mala"),
    hyper=_hyper,
    hyper_values=(0.3, 0.5),
    start=_start,
    bad_inputs=(
        BadInput(lambda: adaptive_stop(_ALG, _stop, max_steps=0), ValueError, "max_steps"),
        BadInput(lambda: adaptive_stop(_ALG, 0.3, max_steps=3), TypeError, "stop_prob_fn"),
        BadInput(lambda: mala(_logdensity, step_size=-1.0), ValueError, "step_size"),
        BadInput(lambda: sample_until_stopped(None, adaptive_stop(_ALG, _stop, max_steps=2),
                                              np.zeros((2, 2))), TypeError, "key"),
    ),
    note="lengths and truncation flags are integers/bools compared exactly; the step size of "
         "the wrapped MALA is the traced float.",
), Entry(
    name="mcmc.stopping/multilevel",
    module="jaxsample.mcmc.stopping",
    build=lambda dtype: lambda key: _multilevel(key, dtype, 0.5),
    covers=("mcmc.sample_multilevel", "mcmc.mala"),
    hyper=lambda dtype: lambda key, step_size: _multilevel(key, dtype, step_size),
    hyper_values=(0.3, 0.5),
    bad_inputs=(
        BadInput(lambda: sample_multilevel(None, _ALG, _logdensity, _init_logdensity, _NET,
                                           np.zeros((2, 2)), max_steps=2), TypeError, "key"),
        BadInput(lambda: sample_multilevel(jnp.zeros(2, jnp.uint32), _ALG, _logdensity,
                                           _init_logdensity, _NET, np.zeros((2, 2)),
                                           max_steps=2), TypeError, "algorithm"),
        BadInput(lambda: sample_multilevel(jnp.zeros(2, jnp.uint32), mala, _logdensity,
                                           _init_logdensity, "net", np.zeros((2, 2)),
                                           max_steps=2), TypeError, "net"),
        BadInput(lambda: _NET.at_level(2), ValueError, "level"),
    ),
    note="two levels, each a stopped MALA run by sample_until_stopped; the step size of both "
         "levels' MALA kernels is the traced float.",
), Entry(
    name="mcmc.stopping/train",
    module="jaxsample.mcmc.stopping",
    build=_train,
    covers=("mcmc.train_stopping", "mcmc.mala"),
    exact_ints=False,
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: train_stopping(None, _ALG, _logdensity, _init_logdensity,
                                        np.zeros((4, 2)), num_steps=2), TypeError, "key"),
        BadInput(lambda: train_stopping(jnp.zeros(2, jnp.uint32), _ALG, _logdensity,
                                        _init_logdensity, np.zeros((4, 2)), num_steps=0),
                 ValueError, "num_steps"),
        BadInput(lambda: train_stopping(jnp.zeros(2, jnp.uint32), _ALG, _logdensity,
                                        _init_logdensity, np.zeros((4, 2)), num_steps=2,
                                        optimizer="adam"), TypeError, "optimizer"),
    ),
    note="train_stopping for 2 Adam steps on 4 chains' pools of 2 MALA steps, a width-4 "
         "one-layer net: the training code path (its fit to the tabular optimum is "
         "tests/mcmc/test_stopping.py's). Keyed, with the legacy-key case. No traced float: "
         "learning_rate and flow_penalty are concrete settings of the optimiser and the loss",
)]
