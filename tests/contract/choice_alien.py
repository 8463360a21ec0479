"""Contract entry: alien-space tilted sampling (``jaxsample.choice.alien``)."""

import jax
import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import choice

_WORLD = choice.synthetic_community(jax.random.key(0), num_atoms=8, num_topics=2,
                                    dtype=jnp.float32)
_COHERENCE = np.asarray(_WORLD.coherence_logits)
_AVAILABILITY = np.asarray(_WORLD.availability_logits)


def _sample(dtype):
    coherence, availability = jnp.asarray(_COHERENCE, dtype), jnp.asarray(_AVAILABILITY, dtype)
    return lambda key: choice.tilted_sample(key, coherence, availability, 6, a=1.0, b=1.0)


def _hyper(dtype):
    coherence, availability = jnp.asarray(_COHERENCE, dtype), jnp.asarray(_AVAILABILITY, dtype)
    return lambda key, b: choice.tilted_sample(key, coherence, availability, 6, a=1.0, b=b)


def _sir(**kwargs):
    return choice.tilted_sample(KEY, _COHERENCE, _AVAILABILITY, 4, method="sir", **kwargs)


ENTRIES = [
    Entry(
        name="choice.alien",
        module="jaxsample.choice.alien",
        build=_sample,
        hyper=_hyper,
        hyper_values=(0.0, 1.0),
        rtol=1e-4,
        bad_inputs=(
            BadInput(lambda: _sir(a=0.0, b=0.0), ValueError, "a = b = 0 with method='sir'"),
            BadInput(lambda: choice.tilted_sample(KEY, _COHERENCE * np.inf, _AVAILABILITY, 4),
                     ValueError, "coherence_logits must be finite"),
            BadInput(lambda: choice.tilted_sample(KEY, _COHERENCE, _AVAILABILITY[:, :5], 4),
                     ValueError, "coherence_logits must have shape"),
            BadInput(lambda: choice.tilted_sample(KEY, _COHERENCE, _AVAILABILITY, 4,
                                                  method="mcmc"), ValueError, "method"),
            BadInput(lambda: choice.tilted_sample(KEY, _COHERENCE, _AVAILABILITY, 4, b=-1.0),
                     ValueError, "b must be"),
            BadInput(lambda: _sir(num_proposals=0), ValueError, "num_proposals"),
            BadInput(lambda: choice.reciprocal_rank_fusion(np.ones(3), np.ones(4)),
                     ValueError, "same length"),
            BadInput(lambda: choice.effective_vocabulary(np.array([[0, 5]]), num_atoms=3),
                     ValueError, "samples must lie in"),
        ),
        note="tilted_sample(key, coherence_logits, availability_logits, n, *, a, b) -> "
             "(sets, TiltedInfo), exact enumeration of the 56 sets of 3 of 8 atoms; the "
             "traced hyper-parameter is b (0 is coherence sampling). The SIR path's vmap over "
             "keys runs in tests/test_alien.py",
    ),
]
