"""Contract entries: alien-space tilted sampling (``jaxsample.choice.alien``), and its two
closed-form summaries (effective vocabulary, reciprocal rank fusion) in one program."""

import functools
import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import choice, datasets


@functools.cache
def _world():
    """The world of tests/choice/test_alien.py (9 atoms, 3 topics), built on first use, as NumPy."""
    world = datasets.synthetic_community(jax.random.key(0), num_atoms=9, num_topics=3,
                                         dtype=jnp.float32)
    return np.asarray(world.coherence_logits), np.asarray(world.availability_logits)


def _inputs(dtype):
    return tuple(jnp.asarray(v, dtype) for v in _world())


def _sample(dtype):
    coherence, availability = _inputs(dtype)
    return lambda key: choice.tilted_sample(key, coherence, availability, num_samples=4000, a=1.0,
                                            b=1.0)


def _hyper(dtype):
    coherence, availability = _inputs(dtype)
    return lambda key, b: choice.tilted_sample(key, coherence, availability, num_samples=4000,
                                               a=1.0, b=b)


def _sir(**kwargs):
    return choice.tilted_sample(KEY, *_world(), num_samples=4, method="sir", **kwargs)


def _exact(infinite=False, atoms=9, **kwargs):
    coherence, availability = _world()
    if infinite:
        coherence = np.where(np.eye(len(coherence), dtype=bool), np.inf, coherence)
    return choice.tilted_sample(KEY, coherence, availability[:, :atoms],
                                num_samples=4,
                                **kwargs)


class LearnedCoherence(eqx.Module):
    """A learned pairwise coherence model on ``(batch, L)`` sets (its weights traced)."""

    logits: jax.Array

    def __call__(self, sets):
        total = jnp.sum(self.logits[sets, sets], axis=-1)
        for i, j in itertools.combinations(range(sets.shape[-1]), 2):
            total = total + self.logits[sets[..., i], sets[..., j]]
        return total


class LearnedAvailability(eqx.Module):
    """A learned mixture-of-communities availability model on ``(batch, L)`` sets."""

    logits: jax.Array

    def __call__(self, sets):
        log_p = jax.nn.log_softmax(self.logits, axis=-1)
        return jax.nn.logsumexp(jnp.sum(log_p[:, sets], axis=-1), axis=0) - jnp.log(
            jnp.asarray(self.logits.shape[0], self.logits.dtype))


def _models(dtype):
    coherence, availability = _inputs(dtype)
    return LearnedCoherence(coherence), LearnedAvailability(availability)


def _callables(dtype):
    coherence, availability = _models(dtype)
    return lambda key: choice.tilted_sample(key, log_coherence_fn=coherence,
                                            log_availability_fn=availability, num_atoms=9,
                                            num_samples=64)


def _callables_hyper(dtype):
    coherence, availability = _models(dtype)
    return lambda key, b: choice.tilted_sample(key, log_coherence_fn=coherence,
                                               log_availability_fn=availability, num_atoms=9,
                                               num_samples=64, b=b)


def _with_fn(**kwargs):
    coherence, availability = _world()
    return choice.tilted_sample(KEY, coherence, num_samples=4, **kwargs)


def _finite_at(sets):
    return jnp.zeros(sets.shape[0])


# 5 draws of 3 atoms out of 9; two rankings of 6 items
_SETS = np.array([[0, 1, 2], [0, 3, 4], [1, 3, 5], [0, 1, 6], [2, 7, 8]])
_RANKINGS = (np.array([3.0, 2.0, 1.0, 0.5, 4.0, 0.0]), np.array([1.0, 3.0, 2.0, 0.0, 5.0, 0.5]))


def _summaries(dtype, k):
    return (choice.effective_vocabulary(_SETS, num_atoms=9, dtype=dtype),
            choice.reciprocal_rank_fusion(*(jnp.asarray(r, dtype) for r in _RANKINGS), k=k))


def _summaries_build(dtype):
    def fn(key):
        del key  # closed forms: deterministic
        return _summaries(dtype, 60.0)

    return fn


def _summaries_hyper(dtype):
    def fn(key, k):
        del key
        return _summaries(dtype, k)

    return fn


ENTRIES = [
    Entry(
        name="choice.alien",
        module="jaxsample.choice.alien",
        build=_sample,
        covers=("choice.tilted_sample",),
        hyper=_hyper,
        hyper_values=(0.0, 1.0),
        rtol=1e-4,
        bad_inputs=(
            BadInput(lambda: _sir(a=0.0, b=0.0), ValueError, "a = b = 0 with method='sir'"),
            BadInput(lambda: _exact(infinite=True), ValueError,
                     "coherence_logits must be finite"),
            BadInput(lambda: _exact(atoms=5), ValueError, "coherence_logits must have shape"),
            BadInput(lambda: _exact(method="mcmc"), ValueError, "method"),
            BadInput(lambda: _exact(b=-1.0), ValueError, "b must be"),
            BadInput(lambda: _sir(num_proposals=0), ValueError, "num_proposals"),
            BadInput(lambda: choice.reciprocal_rank_fusion(np.ones(3), np.ones(4)),
                     ValueError, "same length"),
            BadInput(lambda: choice.effective_vocabulary(np.array([[0, 5]]), num_atoms=3),
                     ValueError, "samples must lie in"),
        ),
        note="tilted_sample(key, coherence_logits, availability_logits, *, num_samples, a, b) -> "
             "(sets, TiltedInfo), exact enumeration of the 84 sets of 3 of 9 atoms (the world "
             "and draw count of tests/choice/test_alien.py, so compilations are shared); the "
             "traced hyper-parameter is b (0 is coherence sampling). The SIR path's vmap over "
             "keys runs in tests/choice/test_alien.py",
    ),
    Entry(
        name="choice.alien/callables",
        module="jaxsample.choice.alien",
        build=_callables,
        covers=("choice.tilted_sample",),
        hyper=_callables_hyper,
        hyper_values=(0.0, 1.0),
        rtol=1e-4,
        bad_inputs=(
            BadInput(lambda: _with_fn(log_availability_fn=lambda sets: jnp.zeros((3,))),
                     ValueError, "log_availability_fn must map input of shape"),
            BadInput(lambda: _with_fn(log_availability_fn=lambda sets: jnp.full(
                sets.shape[0], jnp.inf)), ValueError, "log_availability_fn must return finite"),
            BadInput(lambda: _with_fn(log_availability_fn=lambda sets: sets[:, 0]), TypeError,
                     "log_availability_fn must return a floating"),
            BadInput(lambda: _with_fn(log_availability_fn=lambda sets: jnp.zeros(
                sets.shape[0], jnp.float16)), TypeError, "log_availability_fn must return dtype"),
            BadInput(lambda: _with_fn(log_availability_fn=3.0), TypeError,
                     "log_availability_fn must be callable"),
            BadInput(lambda: _with_fn(availability_logits=_world()[1],
                                      log_availability_fn=_finite_at), ValueError,
                     "give exactly one of availability_logits, log_availability_fn"),
            BadInput(lambda: choice.tilted_sample(KEY, log_coherence_fn=_finite_at,
                                                  log_availability_fn=_finite_at,
                                                  num_samples=4), ValueError, "num_atoms"),
            BadInput(lambda: _with_fn(log_availability=np.zeros(5)), ValueError,
                     "log_availability holds per-candidate scores"),
            BadInput(lambda: _with_fn(log_availability=np.zeros(5), candidates=_SETS,
                                      method="sir"), ValueError, "candidates are drawn from"),
            BadInput(lambda: _with_fn(log_availability=np.zeros(4), candidates=_SETS),
                     ValueError, "log_availability must have shape"),
            BadInput(lambda: _with_fn(log_availability=np.zeros(5), candidates=_SETS + 9),
                     ValueError, "candidates must be atoms in"),
        ),
        note="tilted_sample with learned models: log_coherence_fn and log_availability_fn "
             "equinox Modules (their weights traced) on (batch, 3) sets of 9 atoms, exact "
             "enumeration, 64 draws; b traced. The equality with the array path (exact, SIR, "
             "chunked, per-candidate scores) is in tests/choice/test_alien.py",
    ),
    Entry(
        name="choice.alien/summaries",
        module="jaxsample.choice.alien",
        build=_summaries_build,
        covers=("choice.effective_vocabulary", "choice.reciprocal_rank_fusion"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_summaries_hyper,
        hyper_values=(1.0, 60.0),
        bad_inputs=(
            BadInput(lambda: choice.reciprocal_rank_fusion(*_RANKINGS, k=-1.0), ValueError, "k"),
            BadInput(lambda: choice.reciprocal_rank_fusion(), ValueError, "rankings"),
            BadInput(lambda: choice.effective_vocabulary(_SETS * 1.0), TypeError, "samples"),
        ),
        note="effective_vocabulary (5 sets of 3 of 9 atoms) and reciprocal_rank_fusion (two "
             "rankings of 6): one program, a tuple of (value, Info); RRF's rank offset k is "
             "traced",
    ),
]
