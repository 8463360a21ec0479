"""An exactly solvable data model for discrete samplers: a first-order Markov chain over tokens.

Under the uniform channel
:math:`q_\\alpha(x \\mid x_0) = \\alpha\\,\\mathbb{1}[x = x_0] + (1-\\alpha)/K`
a noisy sequence is the observation sequence of a hidden Markov model whose hidden chain is the
data chain, so the Bayes-optimal factorised clean-token denoiser is given by forward–backward
marginals. With it every remaining error of a sampler is the sampler's own.
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_array, check_int, check_simplex, check_stochastic_matrix
from jaxsample.kernels import resampling

__all__ = ["ClampedDenoiser", "MarkovChainData"]

_MAX_ENUMERATION = 2_000_000


class MarkovChainData(eqx.Module):
    """A first-order Markov chain over ``K`` tokens with an exact clean-token denoiser.

    The law of a sequence is :math:`p(x) = \\pi_0(x_1) \\prod_{i > 1} T(x_{i-1}, x_i)`. Zeros in
    ``transition`` are forbidden bigrams, the toy analogue of a language model's hard constraints.

    Args:
        init_probs: :math:`\\pi_0`, shape ``(K,)``, nonnegative, summing to 1.
        transition: :math:`T`, shape ``(K, K)``, rows nonnegative and summing to 1. Both arrays
            keep their floating dtype, which is the dtype of the denoiser's logits.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.diffusion.shs import MarkovChainData
        >>> data = MarkovChainData(jnp.full(2, 0.5), jnp.array([[0.0, 1.0], [1.0, 0.0]]))
        >>> x = jnp.array([[0, 1, 0, 1], [0, 0, 1, 0]])  # the second has a forbidden bigram
        >>> jnp.exp(data.log_prob(x)).tolist()
        [0.5, 0.0]
        >>> data.denoiser(x, jnp.float32(0.5)).shape
        (2, 4, 2)
    """

    log_init: jax.Array
    log_transition: jax.Array

    def __init__(self, init_probs, transition):
        transition = check_stochastic_matrix("transition", transition)
        vocab_size = transition.shape[0]
        if vocab_size < 2:
            raise ValueError(f"transition must have K >= 2 tokens, got K = {vocab_size}")
        init_probs = check_simplex("init_probs", init_probs, shape=(vocab_size,))
        if init_probs.dtype != transition.dtype:
            raise TypeError(
                "init_probs and transition must share a dtype, got "
                f"{init_probs.dtype} and {transition.dtype}"
            )
        self.log_init = jnp.log(init_probs)
        self.log_transition = jnp.log(transition)

    @property
    def vocab_size(self) -> int:
        """Number of tokens ``K``."""
        return self.log_transition.shape[0]

    @property
    def dtype(self):
        """Floating dtype of the chain's parameters and of the denoiser's logits."""
        return self.log_transition.dtype

    def sample(self, key: jax.Array, num_samples: int, seq_len: int) -> jax.Array:
        """Exact ancestral draws, shape ``(num_samples, seq_len)``, ``int32``."""
        check_int("num_samples", num_samples, 1)
        check_int("seq_len", seq_len, 1)
        first_key, rest_key = jax.random.split(key)
        first = resampling.categorical(first_key, self.log_init, num_samples)

        def step(previous, step_key):
            token = resampling.categorical(step_key, self.log_transition[previous])
            return token, token

        _, rest = jax.lax.scan(step, first, jax.random.split(rest_key, seq_len - 1))
        return jnp.concatenate([first[:, None], rest.T], axis=1).astype(jnp.int32)

    @eqx.filter_jit
    def log_prob(self, tokens: jax.Array) -> jax.Array:
        """Exact :math:`\\log p(x)` of sequences ``(..., L)``; ``-inf`` on forbidden bigrams."""
        tokens = jnp.asarray(tokens)
        pair_terms = self.log_transition[tokens[..., :-1], tokens[..., 1:]]
        return self.log_init[tokens[..., 0]] + jnp.sum(pair_terms, axis=-1)

    def marginals(self, seq_len: int) -> jax.Array:
        """Per-position marginals :math:`\\pi_0 T^{i}`, shape ``(seq_len, K)``."""
        transition = jnp.exp(self.log_transition)

        def step(probs, _):
            nxt = probs @ transition
            return nxt, nxt

        first = jnp.exp(self.log_init)
        _, rest = jax.lax.scan(step, first, None, length=seq_len - 1)
        return jnp.concatenate([first[None, :], rest], axis=0)

    @eqx.filter_jit
    def denoiser(self, tokens: jax.Array, signal: jax.Array) -> jax.Array:
        """Bayes-optimal clean-token posterior :math:`\\log p(x_0^i = a \\mid x)` at signal level α.

        Forward–backward in log space over positions (one ``lax.scan`` each way, O(L K²) per
        sequence) on the HMM with hidden chain :math:`T` and emissions
        :math:`e(x^i \\mid a) = \\alpha\\,\\mathbb{1}[x^i = a] + (1 - \\alpha)/K`:

        .. math::
            \\overrightarrow{m}_i(b) = \\log\\sum_a e^{\\overrightarrow{m}_{i-1}(a)} T(a, b)
            + \\log e(x^i \\mid b), \\quad
            \\overleftarrow{m}_i(a) = \\log\\sum_b T(a, b)\\,e(x^{i+1} \\mid b)\\,
            e^{\\overleftarrow{m}_{i+1}(b)},

        and the output is :math:`\\overrightarrow{m}_i + \\overleftarrow{m}_i` normalised
        over ``a``.

        Args:
            tokens: noisy tokens, shape ``(..., L)``, integers in ``[0, K)``.
            signal: α in ``[0, 1)`` (scalar; cast to the chain's dtype).

        Returns:
            Normalised log posteriors, shape ``(..., L, K)``, in the chain's dtype.
        """
        return self._denoise(tokens, signal, None)

    def clamped_denoiser(self, mask) -> ClampedDenoiser:
        """The Bayes-optimal denoiser when the positions in ``mask`` hold *clean* tokens.

        What :func:`jaxsample.diffusion.shs.sample` needs for ``clamp=(mask, tokens)`` to give
        the exact conditional law: at a clamped position the emission is
        :math:`\\mathbb{1}[x^i = a]` (signal 1) instead of the uniform channel's, so the
        forward–backward marginals are :math:`p(x_0 \\mid x^{\\text{free}}, x^{\\text{clamped}}
        = \\text{tokens})`.

        Args:
            mask: ``(L,)`` bool, the clamped positions.

        Returns:
            A :class:`ClampedDenoiser` (an equinox module: ``denoiser(tokens, signal)``).
        """
        return ClampedDenoiser(self, mask)

    @eqx.filter_jit
    def _denoise(self, tokens, signal, clean):
        tokens = jnp.asarray(tokens)
        batch_shape, seq_len = tokens.shape[:-1], tokens.shape[-1]
        alpha = jnp.asarray(signal).astype(self.dtype)
        k = self.vocab_size
        log_noise = jnp.log1p(-alpha) - jnp.log(jnp.asarray(k, self.dtype))
        log_match = jnp.logaddexp(jnp.log(alpha), log_noise)
        flat = tokens.reshape(-1, seq_len)
        return jax.vmap(self._posterior, in_axes=(0, None, None, None))(
            flat, log_match, log_noise, clean
        ).reshape(*batch_shape, seq_len, k)

    def _posterior(self, tokens, log_match, log_noise, clean):
        """Forward–backward for one sequence ``(L,)`` -> log posteriors ``(L, K)``; positions
        in ``clean`` (``(L,)`` bool or None) are observed without noise."""
        k = self.vocab_size
        same = tokens[:, None] == jnp.arange(k, dtype=tokens.dtype)[None, :]
        log_emission = jnp.where(same, log_match, log_noise)
        if clean is not None:
            log_emission = jnp.where(clean[:, None], jnp.where(same, 0.0, -jnp.inf).astype(
                log_emission.dtype), log_emission)
        log_transition = self.log_transition

        def forward(message, emission):
            message = jax.nn.logsumexp(message[:, None] + log_transition, axis=0) + emission
            return message, message

        first = self.log_init + log_emission[0]
        _, rest = jax.lax.scan(forward, first, log_emission[1:])
        forward_messages = jnp.concatenate([first[None, :], rest], axis=0)

        def backward(message, emission):
            message = jax.nn.logsumexp(log_transition + (emission + message)[None, :], axis=1)
            return message, message

        last = jnp.zeros(k, self.dtype)
        _, earlier = jax.lax.scan(backward, last, log_emission[1:], reverse=True)
        backward_messages = jnp.concatenate([earlier, last[None, :]], axis=0)
        return jax.nn.log_softmax(forward_messages + backward_messages, axis=-1)

    # -- exact evaluation (eager, NumPy) -------------------------------------------------------

    def sequence_probs(self, seq_len: int) -> np.ndarray:
        """Exact probabilities of all ``K**seq_len`` sequences, in base-``K`` (lexicographic) order.

        Raises:
            ValueError: if ``K**seq_len`` exceeds two million.
        """
        k = self.vocab_size
        if k**seq_len > _MAX_ENUMERATION:
            raise ValueError(
                f"K**seq_len = {k}**{seq_len} is too many sequences to enumerate "
                f"(limit {_MAX_ENUMERATION})"
            )
        sequences = np.array(list(itertools.product(range(k), repeat=seq_len)), dtype=np.int32)
        return np.exp(np.asarray(self.log_prob(sequences), dtype=np.float64))

    def sequence_tv(self, tokens) -> float:
        """Exact total variation between the empirical law of ``tokens`` ``(n, L)`` and the chain.

        :math:`\\tfrac12 \\sum_x |\\hat p(x) - p(x)|` over all :math:`K^L` sequences. A finite
        sample biases it upwards; compare with the TV of an equally sized exact sample.
        """
        tokens = np.asarray(tokens)
        k, seq_len = self.vocab_size, tokens.shape[-1]
        probs = self.sequence_probs(seq_len)
        codes = tokens.astype(np.int64) @ (k ** np.arange(seq_len - 1, -1, -1, dtype=np.int64))
        empirical = np.bincount(codes, minlength=probs.size) / tokens.shape[0]
        return 0.5 * float(np.abs(empirical - probs).sum())

    def invalid_bigram_rate(self, tokens) -> float:
        """Fraction of adjacent pairs :math:`(x_i, x_{i+1})` with :math:`T(x_i, x_{i+1}) = 0`."""
        tokens = np.asarray(tokens)
        forbidden = np.isneginf(np.asarray(self.log_transition))
        return float(forbidden[tokens[..., :-1], tokens[..., 1:]].mean())


class ClampedDenoiser(eqx.Module):
    """:meth:`MarkovChainData.denoiser` with the positions in ``mask`` observed without noise
    (built by :meth:`MarkovChainData.clamped_denoiser`)."""

    data: MarkovChainData
    mask: jax.Array

    def __init__(self, data, mask):
        self.data = data
        self.mask = jnp.asarray(check_array("mask", mask, ndim=1, kind="bool"))

    def __call__(self, tokens: jax.Array, signal: jax.Array) -> jax.Array:
        """Normalised log posteriors ``(..., L, K)`` given clean tokens at ``mask``."""
        return self.data._denoise(tokens, signal, self.mask)
