"""Convergence entry: SHS's sampler ``diffusion.shs.sample`` at its defaults (CTMC process,
``jumps="bernoulli"``, clipped coins, denoise last step) on a Markov chain with its exact
denoiser, against the exact sequence law.

The chain (K = 3, L = 5: 243 sequences, one forbidden bigram) is not one the method's tests use.
The statistic is the total variation between the empirical law of the 4 000 sequences and the
exact law (enumerated); its floor is the same TV of 4 000 exact multinomial draws. ``num_steps``
is a traced loop bound and the seeds are one ``vmap``: one compilation serves every budget.
"""

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry, multinomial_tv_floor, tv_counts
from jaxsample.diffusion import shs

INIT = (0.25, 0.45, 0.30)
TRANSITION = ((0.50, 0.30, 0.20), (0.15, 0.35, 0.50), (0.40, 0.00, 0.60))
VOCAB, SEQ_LEN, NUM_SAMPLES = 3, 5, 4_000

_DATA = shs.MarkovChainData(jnp.asarray(INIT, jnp.float32), jnp.asarray(TRANSITION, jnp.float32))
_PROBS = np.exp(np.asarray(shs.MarkovChainData(np.asarray(INIT), np.asarray(TRANSITION))
                           .log_prob(np.array(np.meshgrid(*[np.arange(VOCAB)] * SEQ_LEN,
                                                          indexing="ij")).reshape(SEQ_LEN, -1).T),
                           np.float64))
_CODES = VOCAB ** np.arange(SEQ_LEN - 1, -1, -1)


def _error(num_steps, keys):
    tokens, info = jax.vmap(lambda key: shs.sample(
        key, _DATA.denoiser, vocab_size=VOCAB, seq_len=SEQ_LEN, num_samples=NUM_SAMPLES,
        num_steps=num_steps))(keys)
    assert not np.any(np.asarray(info.nonfinite))
    codes = np.asarray(tokens) @ _CODES
    return np.array([tv_counts(np.bincount(c, minlength=_PROBS.size), _PROBS) for c in codes])


ENTRIES = [
    Entry(
        name="diffusion.shs/markov-chain",
        covers=("diffusion.shs.sample",),
        problem="K = 3, L = 5 Markov chain (one forbidden bigram) with its exact forward-backward "
                "denoiser; the exact law of the 243 sequences by enumeration",
        knob="num_steps",
        budgets=(4, 16, 64),
        error=_error,
        floor=lambda keys: multinomial_tv_floor(keys, _PROBS[None], NUM_SAMPLES),
        floor_formula="sequence TV 0.5 Σ|n_x/4000 − p(x)| of 4 000 exact multinomial draws "
                      "of the 243-sequence law",
    ),
]
