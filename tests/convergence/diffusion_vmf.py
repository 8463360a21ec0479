"""Convergence entries: vMF spherical flows ``diffusion.vmf.sample`` at its defaults (the ODE
sampler; and the predictor–corrector sampler with the path's default corrector, the paper's
vanishing rule) on a Markov chain with its exact forward–backward posterior.

The chain (V = 3, L = 4: 81 sequences) and the d = 8 embeddings are not those the method's tests
use. The path is ``VMFPath(8)`` with every setting at its default (κ_max = 50, linear schedule,
``corrector="vanishing"``). The statistic is the total variation between the empirical law of the
4 000 decoded sequences and the exact law; its floor is the same TV of 4 000 exact multinomial
draws. ``num_steps`` is a traced loop bound and the seeds are one ``vmap``: one compilation per
sampler serves every budget.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry, multinomial_tv_floor, tv_counts
from jaxsample.diffusion import vmf

INIT = np.array([0.40, 0.35, 0.25])
TRANSITION = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]])
VOCAB, SEQ_LEN, DIM, NUM_SAMPLES = 3, 4, 8, 4_000

_SEQUENCES = np.array(list(itertools.product(range(VOCAB), repeat=SEQ_LEN)))
_PROBS = INIT[_SEQUENCES[:, 0]] * np.prod(TRANSITION[_SEQUENCES[:, :-1], _SEQUENCES[:, 1:]],
                                          axis=1)
_CODES = VOCAB ** np.arange(SEQ_LEN - 1, -1, -1)


def _setup():
    e = np.random.default_rng(1).normal(size=(VOCAB, DIM))
    emb = jnp.asarray(e / np.linalg.norm(e, axis=-1, keepdims=True), jnp.float32)
    path = vmf.VMFPath(DIM)
    return emb, path, vmf.MarkovChainOracle(INIT, TRANSITION, emb, path)


def _error(**settings):
    def error(num_steps, keys):
        emb, path, oracle = _setup()
        tokens, info = jax.vmap(lambda key: vmf.sample(
            key, oracle, emb, path, seq_len=SEQ_LEN, num_samples=NUM_SAMPLES,
            num_steps=num_steps, **settings))(keys)
        assert not np.any(np.asarray(info.nonfinite))
        codes = np.asarray(tokens) @ _CODES
        return np.array([tv_counts(np.bincount(c, minlength=_PROBS.size), _PROBS)
                         for c in codes])
    return error


def _floor(keys):
    return multinomial_tv_floor(keys, _PROBS[None], NUM_SAMPLES)


_PROBLEM = ("V = 3, L = 4 Markov chain seen through vMF noise on S^7 (random unit embeddings), "
            "its exact forward-backward posterior; the exact law of the 81 sequences")
_FLOOR = ("sequence TV 0.5 Σ|n_x/4000 − p(x)| of 4 000 exact multinomial draws of the "
          "81-sequence law")

ENTRIES = [
    Entry(
        name="diffusion.vmf/markov-chain-ode",
        covers=("diffusion.vmf.sample",),
        problem=_PROBLEM,
        knob="num_steps",
        budgets=(4, 16, 64),
        error=_error(),
        floor=_floor,
        floor_formula=_FLOOR,
    ),
    Entry(
        name="diffusion.vmf/markov-chain-pc",
        covers=("diffusion.vmf.sample",),
        problem=_PROBLEM + " (sampler='pc', the path's default corrector)",
        knob="num_steps",
        budgets=(4, 16, 64),
        error=_error(sampler="pc"),
        floor=_floor,
        floor_formula=_FLOOR,
    ),
]
