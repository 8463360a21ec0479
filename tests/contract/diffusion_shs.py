"""Contract entry: SHS and the other jump rules of ``jaxsample.diffusion.shs``.

The configuration (CTMC, ``jumps="weyl_window"``, K = 3, L = 4, B = 8 000, NFE 3, the 3-token
Markov chain's exact denoiser) is also the one tests/diffusion/test_shs.py runs to NFE 128 for
consistency and feeds a NaN model, so a joint run compiles it once; B is large for that test's sake
(a step costs milliseconds, the compilation seconds).
"""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.diffusion import shs

INIT = (0.5, 0.3, 0.2)
TRANSITION = ((0.1, 0.6, 0.3), (0.0, 0.5, 0.5), (0.7, 0.3, 0.0))
CONFIG = dict(vocab_size=3, seq_len=4, num_samples=8_000, num_steps=3, jumps="weyl_window")


def chain(dtype=jnp.float32):
    return shs.MarkovChainData(jnp.asarray(INIT, dtype), jnp.asarray(TRANSITION, dtype))


def _sample(dtype):
    data = chain(dtype)
    return lambda key: shs.sample(key, data.denoiser, process=shs.CTMC(), **CONFIG)


def _min_signal(dtype):
    data = chain(dtype)
    return lambda key, h: shs.sample(key, data.denoiser, process=shs.CTMC(min_signal=h),
                                     **CONFIG)


_DATA = chain()
_CLAMP = (np.array([True, False, False, True]), np.array([2, 0, 0, 1]))


def _clamped(dtype):
    data = chain(dtype)
    return lambda key: shs.sample(key, data.clamped_denoiser(_CLAMP[0]), process=shs.CTMC(),
                                  clamp=_CLAMP, **dict(CONFIG, num_samples=8))


def _clamped_min_signal(dtype):
    data = chain(dtype)
    return lambda key, h: shs.sample(key, data.clamped_denoiser(_CLAMP[0]),
                                     process=shs.CTMC(min_signal=h), clamp=_CLAMP,
                                     **dict(CONFIG, num_samples=8))


def _call(**change):
    kwargs = dict(CONFIG, num_samples=8, jumps="stratified") | change
    key = kwargs.pop("key", KEY)
    denoiser = kwargs.pop("denoiser", _DATA.denoiser)
    return lambda: shs.sample(key, denoiser, **kwargs)


def _truncated(tokens, signal):
    return _DATA.denoiser(tokens, signal)[..., :2]


def _integer_logits(tokens, signal):
    return jnp.zeros((*tokens.shape, 3), jnp.int32)


_NOTE = ("sample(key, denoiser, *, vocab_size, seq_len, num_samples, num_steps, process, jumps, "
         "jump_probability, last_step, window_length, blacklist, allocate_phases, sharding, "
         "clamp) -> "
         "(tokens int32, SHSInfo). Traced hyper-parameter: CTMC.min_signal, the signal level of "
         "the first model call; num_steps and window_length are traced loop values, "
         "jump_probability and last_step traced switches (tests/diffusion/test_shs.py).")

ENTRIES = [
    Entry(
        name="diffusion.shs",
        module="jaxsample.diffusion.shs",
        build=_sample,
        covers=("diffusion.shs.sample",),
        hyper=_min_signal,
        hyper_values=(1e-3, 0.05),
        bad_inputs=(
            BadInput(_call(num_samples=0), ValueError, "num_samples"),
            BadInput(_call(num_samples=4.0), TypeError, "num_samples"),
            BadInput(_call(vocab_size=1), ValueError, "vocab_size"),
            BadInput(_call(num_steps=0), ValueError, "num_steps"),
            BadInput(_call(key=None), TypeError, "key"),
            BadInput(_call(denoiser="model"), TypeError, "denoiser"),
            BadInput(_call(denoiser=_truncated), ValueError, "denoiser"),
            BadInput(_call(denoiser=_integer_logits), TypeError, "floating"),
            BadInput(_call(process="sde"), ValueError, "process"),
            BadInput(_call(process=3), TypeError, "process"),
            BadInput(_call(jumps="poisson"), ValueError, "jumps"),
            BadInput(_call(jumps="weyl_window", window_length=0), ValueError, "window_length"),
            BadInput(_call(jumps="weyl_window", window_length=2.0), TypeError, "window_length"),
            BadInput(_call(jumps="weyl", window_length=4), ValueError, "window_length"),
            BadInput(_call(jump_probability="clipped"), ValueError, "jump_probability"),
            BadInput(_call(jumps="bernoulli", jump_probability="poisson"), ValueError,
                     "jump_probability"),
            BadInput(_call(last_step="final"), ValueError, "last_step"),
            BadInput(lambda: shs.DTMC(kernel="udlm"), ValueError, "kernel"),
            BadInput(_call(blacklist=[0, 1, 2]), ValueError, "whole vocabulary"),
            BadInput(_call(blacklist=[3]), ValueError, "blacklist"),
            BadInput(_call(blacklist=[0.5]), TypeError, "blacklist"),
            BadInput(_call(allocate_phases=True), ValueError, "allocate_phases"),
            BadInput(_call(allocate_phases=1), TypeError, "allocate_phases"),
            BadInput(_call(sharding="batch"), TypeError, "sharding"),
            BadInput(lambda: shs.CTMC(min_signal=0.0), ValueError, "min_signal"),
            BadInput(lambda: shs.CTMC(min_signal=1.0), ValueError, "min_signal"),
            BadInput(lambda: shs.MarkovChainData(np.full(3, 1 / 3), np.full((3, 2), 0.5)),
                     ValueError, "square"),
            BadInput(lambda: shs.MarkovChainData(np.full(2, 0.5), np.eye(2) * 1.2),
                     ValueError, "sum to 1"),
            BadInput(_call(clamp=(np.ones(3, bool), np.zeros(4, np.int32))), ValueError,
                     "clamp"),
            BadInput(_call(clamp=(np.ones(4), np.zeros(4, np.int32))), TypeError, "clamp"),
            BadInput(_call(clamp=(np.ones(4, bool), np.full(4, 3))), ValueError, "clamp"),
            BadInput(_call(clamp=np.ones(4, bool)), TypeError, "clamp"),
        ),
        note=_NOTE,
    ),
    Entry(
        name="diffusion.shs/clamp",
        module="jaxsample.diffusion.shs",
        build=_clamped,
        covers=("diffusion.shs.sample",),
        hyper=_clamped_min_signal,
        hyper_values=(1e-3, 0.05),
        bad_inputs=(BadInput(_call(clamp=(np.ones(4, bool),)), TypeError, "clamp"),),
        note="clamp=(mask, tokens) with the chain's clamped denoiser (an equinox module), the "
             "default Bernoulli rule; clamped positions never move (tests/diffusion/test_shs.py "
             "checks the exact conditional law).",
    ),
]
