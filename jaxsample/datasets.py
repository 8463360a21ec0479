"""Small synthetic data sets (deterministic given a key), shared by the demo, bench/ and examples/.

Training sets for generative samplers, each a ``(num_samples, d)`` array of the requested
floating ``dtype``:

- :func:`checkerboard`: uniform on the 8 dark squares of a 4x4 board on ``[-2, 2]^2``;
- :func:`two_spirals`: two interleaved noisy spiral arms (the FFJORD / flow-matching toy set);
- :func:`latent_mixture`: a 64-d Gaussian mixture with a decaying spectrum, a stand-in for the
  latent codes of an autoencoder.

Clustered tables, drawn on the host with NumPy (:func:`host_generator`: any size, no
compilation):

- :func:`clustered_embeddings`: imbalanced, anisotropic Gaussian clusters (two-level softmax);
- :func:`imbalanced_clusters`: Zipf-sized Gaussian clusters, and :func:`random_fourier_features`
  to map them into a Gaussian kernel's feature space (diverse-subset selection).

:func:`ring_of_gaussians` is a mixture target (:class:`jaxsample.targets.GaussianMixture`), the
test prior of guided diffusion.

Discrete data with an exact law (categorical samplers and their exact oracles):

- :func:`sudoku4_grids`: the 288 valid 4×4 Sudoku grids, and :func:`sudoku4_index` to look a
  token grid up among them (−1 if it is not valid).

Planted worlds of the choice family, each a NamedTuple of arrays:

- :func:`synthetic_panel`: decision-makers of planted value priorities choosing on
  synthetic dilemmas (:mod:`jaxsample.choice.pluralism`);
- :func:`synthetic_community`: idea atoms in topics, communities and a hidden compatibility
  graph (:mod:`jaxsample.choice.alien`).

The same key always gives the same points.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_array, check_choice, check_hyperparameter, check_int, check_key
from jaxsample.kernels import logspace, resampling
from jaxsample.targets import GaussianMixture

__all__ = [
    "Community",
    "Panel",
    "checkerboard",
    "clustered_embeddings",
    "host_generator",
    "imbalanced_clusters",
    "latent_mixture",
    "random_fourier_features",
    "synthetic_community",
    "synthetic_panel",
    "sudoku4_grids",
    "sudoku4_index",
    "ring_of_gaussians",
    "two_spirals",
]


def _check(num_samples, dtype):
    check_int("num_samples", num_samples, 1)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")


def checkerboard(key: jax.Array, num_samples: int, dtype=jnp.float32) -> jax.Array:
    """Uniform samples on the dark squares of a 4x4 checkerboard on ``[-2, 2]^2``.

    A point is on a dark square iff ``floor(x) + floor(y)`` is even. Density ``1/8`` there.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = checkerboard(jax.random.key(0), 100)
        >>> x.shape, bool(jnp.all(jnp.floor(x).sum(axis=1) % 2 == 0))
        ((100, 2), True)
    """
    _check(num_samples, dtype)
    key_x, key_y, key_row = jax.random.split(key, 3)
    x = jax.random.uniform(key_x, (num_samples,), dtype, -2.0, 2.0)
    row = 2 * jax.random.randint(key_row, (num_samples,), 0, 2) - 2  # -2 or 0
    y = jax.random.uniform(key_y, (num_samples,), dtype) + row.astype(dtype)
    y = y + jnp.mod(jnp.floor(x), 2)  # shift to the square of matching colour
    return jnp.stack([x, y], axis=1)


def two_spirals(key: jax.Array, num_samples: int, noise: float = 0.1, dtype=jnp.float32
                ) -> jax.Array:
    """Two interleaved spiral arms, scaled to about ``[-3.5, 3.5]^2``, plus Gaussian noise.

    Arm angle ``theta = sqrt(u) * 3 pi``; arm one is ``(-theta cos theta, theta sin theta) / 3``
    (plus ``U(0, 0.5)/3`` jitter per coordinate), arm two its reflection through the origin; then
    ``N(0, noise^2 I)`` is added.

    Example:
        >>> import jax
        >>> two_spirals(jax.random.key(0), 101).shape
        (101, 2)
    """
    _check(num_samples, dtype)
    key_angle, key_jitter, key_arm, key_noise = jax.random.split(key, 4)
    theta = jnp.sqrt(jax.random.uniform(key_angle, (num_samples,), dtype)) * (3 * jnp.pi)
    jitter = 0.5 * jax.random.uniform(key_jitter, (num_samples, 2), dtype)
    arm = jnp.stack([-theta * jnp.cos(theta), theta * jnp.sin(theta)], axis=1) + jitter
    sign = jnp.where(jax.random.bernoulli(key_arm, 0.5, (num_samples,)), 1.0, -1.0).astype(dtype)
    points = sign[:, None] * arm / 3
    return points + noise * jax.random.normal(key_noise, (num_samples, 2), dtype)


def latent_mixture(key: jax.Array, num_samples: int, dim: int = 64, num_components: int = 8,
                   dtype=jnp.float32) -> jax.Array:
    """A fixed Gaussian mixture in ``dim`` dimensions, a stand-in for autoencoder latents.

    Equal weights; component ``k`` has mean ``3 e_k`` (``k < num_components <= dim``) and
    covariance ``diag(0.5 / (1 + j)^(1/2))`` over coordinates ``j`` (a decaying spectrum, as
    latents have). The mixture itself does not depend on the key.

    Example:
        >>> import jax
        >>> latent_mixture(jax.random.key(0), 10).shape
        (10, 64)
    """
    _check(num_samples, dtype)
    if not 1 <= num_components <= dim:
        raise ValueError(f"need 1 <= num_components <= dim, got {num_components} and {dim}")
    key_component, key_noise = jax.random.split(key)
    component = jax.random.randint(key_component, (num_samples,), 0, num_components)
    means = 3 * jnp.eye(num_components, dim, dtype=dtype)
    scales = jnp.sqrt(0.5 / jnp.sqrt(1 + jnp.arange(dim, dtype=dtype)))
    return means[component] + scales[None, :] * jax.random.normal(key_noise, (num_samples, dim),
                                                                  dtype)


def host_generator(key) -> np.random.Generator:
    """A NumPy generator seeded by a JAX key: host-side data generation needs no compilation, and
    the same key gives the same generator."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())




def clustered_embeddings(key, num_items: int, dim: int, num_clusters: int | None = None):
    """Synthetic item table with imbalanced, anisotropic Gaussian clusters (drawn with NumPy,
    seeded from ``key``: cheap at any size, no compilation).

    ``K = round(sqrt(N))`` clusters by default, log-normal sizes, centres ``N(0, 9/d I)``, within
    spread ``sigma_c in [0.2, 1.2] * 3/sqrt(d)`` per coordinate plus a random direction stretched
    by up to 3, so within-cluster score spread is comparable to the spread of centroid scores.

    Returns:
        ``(embeddings (N, d) float32, cluster_ids (N,) int32)``, ids sorted.
    """
    k = num_clusters or max(2, round(math.sqrt(num_items)))
    rng = host_generator(key)
    weights = np.exp(rng.standard_normal(k))
    sizes = np.maximum(1, np.floor(num_items * weights / weights.sum()).astype(int))
    sizes[np.argmax(sizes)] += num_items - sizes.sum()
    ids = np.repeat(np.arange(k), sizes).astype(np.int32)
    scale = np.float32(3.0 / math.sqrt(dim))
    centres = scale * rng.standard_normal((k, dim), dtype=np.float32)
    spread = scale * rng.uniform(0.2, 1.2, k).astype(np.float32)
    directions = rng.standard_normal((k, dim), dtype=np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    stretch = rng.uniform(0.0, 3.0, k).astype(np.float32)
    x = centres[ids]
    x += spread[ids, None] * rng.standard_normal((num_items, dim), dtype=np.float32)
    x += (stretch[ids] * rng.standard_normal(num_items, dtype=np.float32))[:, None] * \
        directions[ids]
    return jnp.asarray(x), jnp.asarray(ids)




def imbalanced_clusters(key, num_points: int, dim: int, *, num_clusters: int = 50,
                        exponent: float = 1.0, spread: float = 0.5, centre_scale: float = 1.0,
                        dtype=np.float32):
    """Gaussian clusters with Zipf sizes: cluster ``c`` holds a share ``∝ 1/(c + 1)^exponent``.

    Centres are ``centre_scale`` times independent unit vectors (``dim >= 3``) or ``N(0, I)``
    points (``dim < 3``); points are ``centre + spread · N(0, I/dim)``. Every cluster has at least
    one point. Rows come in random order (as in a corpus, so consecutive batches mix clusters).
    Drawn with NumPy from a generator seeded by ``key`` (same key, same points).

    Returns:
        ``(points (num_points, dim), labels (num_points,) int32)`` NumPy arrays.

    Example:
        >>> import jax
        >>> x, labels = imbalanced_clusters(jax.random.key(0), 1000, 8, num_clusters=5)
        >>> import numpy as np
        >>> x.shape, np.bincount(labels).tolist()
        ((1000, 8), [441, 218, 145, 109, 87])
    """
    share = 1.0 / np.arange(1, num_clusters + 1) ** exponent
    sizes = np.maximum(1, np.floor(num_points * share / share.sum()).astype(int))
    sizes[0] += num_points - sizes.sum()
    rng = host_generator(key)
    labels = rng.permutation(np.repeat(np.arange(num_clusters), sizes)).astype(np.int32)
    centres = rng.standard_normal((num_clusters, dim))
    if dim >= 3:
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = rng.standard_normal((num_points, dim), dtype=np.float32).astype(dtype)
    points *= spread / math.sqrt(dim)
    points += (centre_scale * centres).astype(dtype)[labels]
    return points, labels




def random_fourier_features(key, points, num_features: int, bandwidth: float) -> np.ndarray:
    """``φ(x) = √(2/m) cos(Wx + b)``, ``W ~ N(0, I/bandwidth²)``, ``b ~ U[0, 2π)`` (NumPy).

    ``φ(x)·φ(y) ≈ exp(−‖x − y‖² / (2 bandwidth²))`` (Rahimi & Recht 2007), so cosine geometry on
    the features is about Gaussian-kernel geometry on the points.
    """
    rng = host_generator(key)
    points = np.asarray(points)
    weights = rng.standard_normal((points.shape[1], num_features)) / bandwidth
    phase = rng.uniform(0.0, 2 * math.pi, num_features)
    features = math.sqrt(2.0 / num_features) * np.cos(points @ weights + phase)
    return features.astype(points.dtype)


def ring_of_gaussians(*, num_components: int = 8, dim: int = 2, radius=1.0, std=0.1,
                      dtype=None) -> GaussianMixture:
    """Equal-weight N(m_k, std²·I), means on a circle of ``radius`` in the first two coordinates.

    m_k = radius·(cos 2πk/K, sin 2πk/K, 0, …, 0); the other d − 2 coordinates are N(0, std²).

    Example:
        >>> ring = ring_of_gaussians(num_components=8, dim=16)
        >>> ring.means.shape, round(float(ring.means[2, 1]), 4)
        ((8, 16), 1.0)
    """
    num_components = check_int("num_components", num_components, 1)
    dim = check_int("dim", dim, 2)
    radius = float(check_hyperparameter("radius", radius))
    std = float(check_hyperparameter("std", std))
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    angles = 2 * np.pi * np.arange(num_components) / num_components
    means = np.zeros((num_components, dim))
    means[:, 0], means[:, 1] = radius * np.cos(angles), radius * np.sin(angles)
    return GaussianMixture(jnp.asarray(means, dtype), jnp.asarray(std, dtype))


_SUDOKU_CELLS = 16


@functools.lru_cache(maxsize=1)
def _sudoku4_table() -> np.ndarray:
    perms = np.asarray(list(itertools.permutations(range(4))), np.int8)           # (24, 4)
    rows = np.stack(np.meshgrid(*[np.arange(24)] * 4, indexing="ij"), -1).reshape(-1, 4)
    grids = perms[rows]                                                            # (n, 4, 4)
    symbols = np.arange(4)[:, None]
    columns_ok = np.all(np.sort(grids, axis=1) == symbols, axis=(1, 2))
    boxes = grids.reshape(-1, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(-1, 4, 4)
    boxes_ok = np.all(np.sort(boxes, axis=2) == symbols.T, axis=(1, 2))
    valid = grids[columns_ok & boxes_ok].reshape(-1, _SUDOKU_CELLS).astype(np.int32)
    return valid[np.argsort(_sudoku4_codes(valid))]


def _sudoku4_codes(tokens):
    return (tokens.astype(np.uint64) * (4 ** np.arange(_SUDOKU_CELLS, dtype=np.uint64))).sum(-1)


def sudoku4_grids() -> np.ndarray:
    """The 288 valid 4×4 Sudoku grids as ``(288, 16)`` int32 tokens in 0..3 (row-major cells).

    Each row, column and 2×2 box holds every symbol once; the grids are sorted by their base-4
    code (cell i weighs 4**i), the order :func:`sudoku4_index` reports. A fresh copy each call.

    Example:
        >>> grids = sudoku4_grids()
        >>> grids.shape, grids[0].reshape(4, 4)[0].tolist()
        ((288, 16), [0, 1, 2, 3])
    """
    return _sudoku4_table().copy()


@jax.jit
def sudoku4_index(tokens: jax.Array) -> jax.Array:
    """Index in :func:`sudoku4_grids` of each ``(..., 16)`` token grid, −1 if it is not valid.

    Jittable (base-4 codes in uint32, a sorted search).

    Example:
        >>> import jax.numpy as jnp
        >>> grids = jnp.asarray(sudoku4_grids())
        >>> sudoku4_index(grids[:3]).tolist(), int(sudoku4_index(jnp.zeros(16, jnp.int32)))
        ([0, 1, 2], -1)
    """
    codes_sorted = jnp.asarray(_sudoku4_codes(_sudoku4_table()).astype(np.uint32))
    tokens = jnp.asarray(tokens).astype(jnp.uint32)
    powers = jnp.asarray(4 ** np.arange(_SUDOKU_CELLS, dtype=np.uint64), jnp.uint32)
    powers = powers.reshape((1,) * (tokens.ndim - 1) + (_SUDOKU_CELLS,))
    codes = jnp.sum(tokens * powers, axis=-1, dtype=jnp.uint32)
    position = jnp.clip(jnp.searchsorted(codes_sorted, codes), 0, codes_sorted.shape[0] - 1)
    return jnp.where(codes_sorted[position] == codes, position, -1).astype(jnp.int32)


# ------------------------------------------------------------------------------------------------
# planted worlds of the choice family (value priorities, alien-space sampling)


class Panel(NamedTuple):
    """A synthetic panel from :func:`synthetic_panel`.

    Attributes:
        option_features: ``(num_dilemmas, num_options, P)`` annotations in ``{−1, 0, +1}``.
        weights: ``(num_agents, P)`` planted priorities on the simplex.
        decisiveness: ``(num_agents,)`` planted ``β``.
        choices: ``(num_agents, num_dilemmas)`` one decision per agent and dilemma.
    """

    option_features: jax.Array
    weights: jax.Array
    decisiveness: jax.Array
    choices: jax.Array


def synthetic_panel(key: jax.Array, *, num_agents: int, num_dilemmas: int,
                    num_principles: int = 4, concentration: float = 4.0,
                    decisiveness: float = 2.0, design: str = "random", weights=None,
                    dtype=None) -> Panel:
    """A planted panel for :mod:`jaxsample.choice.pluralism`: ``w ~ Dir(concentration·1)``, one
    decision per agent and dilemma.

    Binary dilemmas. ``design="random"``: annotations ``z_{jk}`` uniform on ``{−1, 0, +1}^P``
    (a full-rank design). ``design="contrast"``: option A upholds principle ``p`` and violates
    ``q``, option B the reverse (``p ≠ q`` uniform), so every difference sums to zero and only
    contrasts of ``θ`` are identified. Agent ``m`` decides with ``θ^{(m)} = β·w^{(m)}`` by the
    conditional logit ``softmax_k(θᵀ z_{jk})``.

    Args:
        key: PRNG key.
        num_agents, num_dilemmas: panel size and number of dilemmas.
        num_principles: ``P``.
        concentration: Dirichlet concentration of the planted weights.
        decisiveness: planted ``β`` of every agent; traced.
        design: ``"random"`` or ``"contrast"``.
        weights: ``(num_agents, P)`` planted weights to use instead of Dirichlet draws (a
            decision-maker of known priorities, e.g. a "model" with a low autonomy weight).
        dtype: floating dtype (default: ``weights``' dtype or JAX's default float).

    Example:
        >>> import jax
        >>> panel = synthetic_panel(jax.random.key(0), num_agents=30, num_dilemmas=50)
        >>> panel.option_features.shape, panel.choices.shape
        ((50, 2, 4), (30, 50))
    """
    key = check_key("key", key)
    num_agents = check_int("num_agents", num_agents, 1)
    num_dilemmas = check_int("num_dilemmas", num_dilemmas, 1)
    num_principles = check_int("num_principles", num_principles, 2)
    decisiveness = check_hyperparameter("decisiveness", decisiveness)
    design = check_choice("design", design, ("random", "contrast"))
    key_w, key = jax.random.split(key)
    if weights is None:
        concentration = check_hyperparameter("concentration", concentration)
        dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
        weights = _dirichlet(key_w, concentration, num_agents, num_principles, dtype)
    else:
        weights = check_array("weights", weights, shape=(num_agents, num_principles),
                              finite=True)
        dtype = weights.dtype if dtype is None else jnp.dtype(dtype)
        weights = weights.astype(dtype)
    return _synthetic_panel(key, weights, decisiveness, np.asarray(design == "contrast"),
                            num_dilemmas=num_dilemmas)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _dirichlet(key, concentration, num_agents, num_principles, dtype):
    # its own compilation: JAX's gamma sampler is costly to compile and only its shape matters
    alpha = jnp.full((num_principles,), jnp.asarray(concentration, dtype))
    return jax.random.dirichlet(key, alpha, (num_agents,), dtype=dtype)


@functools.partial(jax.jit, static_argnames="num_dilemmas")
def _synthetic_panel(key, weights, decisiveness, contrast, *, num_dilemmas):
    # both designs in one compilation (the choice between them is a traced flag)
    dtype = weights.dtype
    num_principles = weights.shape[1]
    key_z, key_c = jax.random.split(key)
    random = jax.random.randint(key_z, (num_dilemmas, 2, num_principles), -1, 2).astype(dtype)
    key_p, key_q = jax.random.split(key_z)
    p = jax.random.randint(key_p, (num_dilemmas,), 0, num_principles)
    q = (p + jax.random.randint(key_q, (num_dilemmas,), 1, num_principles)) % num_principles
    upholds = jax.nn.one_hot(p, num_principles, dtype=dtype)
    violates = jax.nn.one_hot(q, num_principles, dtype=dtype)
    pitted = jnp.stack([upholds - violates, violates - upholds], axis=1)
    features = jnp.where(contrast, pitted, random)
    beta = jnp.full((weights.shape[0],), jnp.asarray(decisiveness, dtype))
    logits = jnp.einsum("jkp,mp->mjk", features, weights * beta[:, None])
    choices = resampling.categorical(key_c, logits)
    return Panel(option_features=features, weights=weights, decisiveness=beta, choices=choices)


class Community(NamedTuple):
    """A synthetic world from :func:`synthetic_community`.

    Attributes:
        coherence_logits: ``(V, V)`` symmetric pairwise coherence logits (diagonal: unary).
        availability_logits: ``(K, V)`` per-community atom logits.
        topics: ``(V,)`` topic of each atom.
        compatible: ``(T, T)`` bool, symmetric, ``True`` on the diagonal: topic pairs whose atoms
            combine coherently (the hidden structure of knowledge).
    """

    coherence_logits: jax.Array
    availability_logits: jax.Array
    topics: jax.Array
    compatible: jax.Array

    def coherent(self, samples):
        """``(..., )`` bool: every pair of atoms in each set is within-topic or compatible."""
        t = self.topics[samples]
        ok = self.compatible[t[..., :, None], t[..., None, :]]
        return jnp.all(ok, axis=(-2, -1))


def synthetic_community(key: jax.Array, *, num_atoms: int = 60, num_topics: int = 6,
                        compatibility: float = 0.3, popularity_exponent: float = 1.0,
                        incoherence: float = 4.0, focus: float = 3.0, dtype=None) -> Community:
    """A planted world for :func:`jaxsample.choice.tilted_sample`: atoms, topics, communities
    and a hidden compatibility graph.

    Atoms fall into ``num_topics`` equal topics; atom popularity is Zipf
    (``pop_v ∝ rank_v^{−popularity_exponent}``, ranks in random order): the literature's density.
    A random fraction ``compatibility`` of the cross-topic pairs of topics is compatible (the
    hidden structure: coherent directions nobody has explored). Then

    * ``coherence_logits[v, v] = log pop_v`` and, for ``u ≠ v``, ``−incoherence`` when the
      topics of ``u`` and ``v`` differ and are not compatible, else 0;
    * one community per topic, ``availability_logits[c, v] = log pop_v + focus·[topic_v = c]``.

    Args:
        key: PRNG key.
        num_atoms, num_topics: ``V`` (a multiple of ``T``) and ``T``.
        compatibility: fraction of cross-topic topic pairs that are compatible, in [0, 1].
        popularity_exponent: Zipf exponent ``s >= 0``.
        incoherence: logit penalty of each incompatible pair, ``>= 0``.
        focus: logit bonus of a community's own topic, ``>= 0``.
        dtype: floating dtype (default: JAX's default float).

    Example:
        >>> import jax
        >>> world = synthetic_community(jax.random.key(0), num_atoms=12, num_topics=3)
        >>> world.coherence_logits.shape, world.availability_logits.shape
        ((12, 12), (3, 12))
    """
    key = check_key("key", key)
    num_topics = check_int("num_topics", num_topics, 1)
    num_atoms = check_int("num_atoms", num_atoms, num_topics)
    if num_atoms % num_topics:
        raise ValueError(f"num_atoms must be a multiple of num_topics={num_topics}, got "
                         f"{num_atoms}")
    compatibility = check_hyperparameter("compatibility", compatibility, positive=False,
                                         maximum=1.0)
    popularity_exponent = check_hyperparameter("popularity_exponent", popularity_exponent,
                                               positive=False)
    incoherence = check_hyperparameter("incoherence", incoherence, positive=False)
    focus = check_hyperparameter("focus", focus, positive=False)
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return _synthetic_community(key, compatibility, popularity_exponent, incoherence, focus,
                                num_atoms=num_atoms, num_topics=num_topics, dtype=dtype)


@functools.partial(jax.jit, static_argnames=("num_atoms", "num_topics", "dtype"))
def _synthetic_community(key, compatibility, popularity_exponent, incoherence, focus, *,
                         num_atoms, num_topics, dtype):
    key_rank, key_compat = jax.random.split(key)
    topics = jnp.arange(num_atoms, dtype=jnp.int32) % num_topics
    ranks = jax.random.permutation(key_rank, num_atoms).astype(dtype) + 1
    log_pop = -jnp.asarray(popularity_exponent, dtype) * jnp.log(ranks)
    log_pop = logspace.log_normalize(log_pop)
    upper = jax.random.uniform(key_compat, (num_topics, num_topics), dtype) < jnp.asarray(
        compatibility, dtype)
    upper = jnp.triu(upper, 1)
    compatible = upper | upper.T | jnp.eye(num_topics, dtype=bool)
    pair_ok = compatible[topics[:, None], topics[None, :]]
    pairs = jnp.where(pair_ok, jnp.zeros((), dtype), -jnp.asarray(incoherence, dtype))
    coherence = jnp.where(jnp.eye(num_atoms, dtype=bool), log_pop[None, :], pairs)
    own = (topics[None, :] == jnp.arange(num_topics)[:, None]).astype(dtype)
    availability = log_pop[None, :] + jnp.asarray(focus, dtype) * own
    return Community(coherence_logits=coherence, availability_logits=availability,
                     topics=topics, compatible=compatible)


# ------------------------------------------------------------------------------------------------
# maximum coverage instances (stable maximum coverage, greedy): set systems and their
# one-element neighbours, in the padded-index form of jaxsample.subset.PaddedIncidence

__all__ += ["CoverageInstance", "disc_instance", "random_instance"]


class CoverageInstance(NamedTuple):
    """An instance in padded-index form and its one-element neighbours.

    Attributes:
        indices: ``(n, d)`` int32 set ids per element, padded with -1; the last rows are the
            elements that add-neighbours add (weight 0 in the base instance).
        num_sets: m.
        weights: ``(n,)`` base element weights (1, or 0 for the not-yet-added elements).
        neighbours: ``(N, n)`` weights of the neighbours: one element deleted (its weight set to
            0) or one added (its weight set to 1).
        kinds: ``N`` strings, ``"delete"`` or ``"add"``.
    """

    indices: np.ndarray
    num_sets: int
    weights: np.ndarray
    neighbours: np.ndarray
    kinds: tuple


def _pad_rows(rows, width):
    out = np.full((len(rows), width), -1, np.int32)
    for e, row in enumerate(rows):
        row = np.unique(row)[:width]
        out[e, :row.size] = row
    return out


def _host_greedy(indices, num_sets, weights, steps):
    """Greedy maximum coverage on the host (NumPy, O(nnz) in all) with each step's runner-up.

    Same rule as :func:`jaxsample.subset.greedy_max_coverage` (ties to the lowest id). Used to
    build instances: the runner-ups locate the picks that a one-element change can flip (the
    device greedy reports no runner-ups).

    Returns:
        ``(order, gains, runner_up, runner_gains)``, each ``(steps,)``.
    """
    flat = indices.reshape(-1)
    rows = np.repeat(np.arange(indices.shape[0]), indices.shape[1])
    keep = flat >= 0
    flat, rows = flat[keep], rows[keep]
    by_set = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[by_set], np.arange(num_sets + 1))
    gains = np.bincount(flat, weights[rows], minlength=num_sets).astype(np.float64)
    covered = np.zeros(indices.shape[0], bool)
    chosen = np.zeros(num_sets, bool)
    order, picked, runner, runner_gain = [], [], [], []
    for _ in range(steps):
        masked = np.where(chosen, -1.0, gains)
        best = int(np.argmax(masked))
        second = np.where(np.arange(num_sets) == best, -1.0, masked)
        order.append(best)
        picked.append(masked[best])
        runner.append(int(np.argmax(second)))
        runner_gain.append(second[runner[-1]])
        chosen[best] = True
        members = rows[by_set[starts[best]:starts[best + 1]]]
        new = members[~covered[members]]
        covered[new] = True
        sub = indices[new]
        sub = sub[sub >= 0]
        np.subtract.at(gains, sub, np.repeat(weights[new], (indices[new] >= 0).sum(axis=1)))
    return (np.array(order), np.array(picked), np.array(runner), np.array(runner_gain))


def _neighbours(indices, num_sets, k, rng, num_neighbours, added_rows):
    """Random and greedy-critical one-element neighbours of a unit-weight instance.

    * ``delete``: an element of a contender set (greedy's picks k/2 .. 2k), deleted;
    * ``add``: the rows in ``added_rows`` (elements of contender sets), added;
    * ``critical``: at a greedy step whose pick and runner-up differ by at most one unit of gain
      (and the tie rule lets one element decide) and whose runner-up greedy never picks, an
      element added to the runner-up alone. This flips greedy's pick there and changes its set:
      the adversarial neighbours a sensitivity (a sup over neighbours) is about. Up to a third of
      the neighbours, at the closest steps.
    """
    n = indices.shape[0]
    base = np.ones(n)
    order, gains, runner, runner_gains = _host_greedy(indices, num_sets, base,
                                                     min(2 * k, num_sets))
    contenders = order[k // 2:]
    margin = gains[:k] - runner_gains[:k]
    close = (margin < 1) | ((margin == 1) & (runner[:k] < order[:k]))
    flips = np.flatnonzero(close & ~np.isin(runner[:k], order[:k]))   # the set, not the order
    flips = flips[np.argsort(margin[flips], kind="stable")][:num_neighbours // 3]
    critical_rows = [np.array([runner[t]]) for t in flips]
    num_add = min(len(added_rows), (num_neighbours - len(critical_rows)) // 2)
    added_rows = list(added_rows[:num_add]) + critical_rows
    num_delete = num_neighbours - len(added_rows)
    touches = np.isin(indices, contenders).any(axis=1)
    deleted = rng.choice(np.flatnonzero(touches), size=num_delete, replace=False)
    all_indices = np.concatenate([indices, _pad_rows(added_rows, indices.shape[1])])
    weights = np.r_[base, np.zeros(len(added_rows))]
    neighbours, kinds = [], []
    for e in deleted:
        w = weights.copy()
        w[e] = 0.0
        neighbours.append(w)
        kinds.append("delete")
    for j in range(len(added_rows)):
        w = weights.copy()
        w[n + j] = 1.0
        neighbours.append(w)
        kinds.append("add" if j < num_add else "critical")
    return all_indices, weights, np.stack(neighbours), tuple(kinds), contenders


def disc_instance(seed: int, num_elements: int, num_sets: int, k: int, *, mean_degree=2.5,
                  max_degree: int = 8, num_neighbours: int = 8) -> CoverageInstance:
    """Points uniform in the unit square; set i holds the points within ``r_i`` of centre ``c_i``.

    A disc cover has many near-equal sets, where greedy's picks hinge on small differences: the
    instance of the stable-coverage benchmark, example and demo (NumPy, seeded by ``seed``).

    Radii are ``r̄·U(0.8, 1.2)`` with ``r̄`` such that a point lies in ``mean_degree`` discs on
    average; a point keeps its ``max_degree`` nearest containing discs. Neighbours (see
    ``_neighbours``): deleted points of contender discs (greedy's picks k/2 .. 2k), points added
    uniformly inside contender discs, and greedy-critical additions.
    """
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points = rng.random((num_elements, 2))
    centres = rng.random((num_sets, 2))
    mean_radius = math.sqrt(mean_degree / (math.pi * num_sets))
    radii = mean_radius * rng.uniform(0.8, 1.2, num_sets)
    tree = cKDTree(centres)

    def rows_of(pts):
        dist, idx = tree.query(pts, k=max_degree, distance_upper_bound=radii.max())
        safe = np.minimum(idx, num_sets - 1)
        inside = (idx < num_sets) & (dist <= radii[safe])
        return np.where(inside, idx, -1).astype(np.int32)

    indices = rows_of(points)
    contenders = _host_greedy(indices, num_sets, np.ones(num_elements), min(2 * k, num_sets))[0]
    contenders = contenders[k // 2:]
    num_add = num_neighbours // 2
    discs = rng.choice(contenders, size=num_add)
    angle = rng.uniform(0, 2 * math.pi, num_add)
    radius = radii[discs] * np.sqrt(rng.random(num_add))
    added = centres[discs] + radius[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    added_rows = [r[r >= 0] for r in rows_of(added)]
    all_indices, weights, neighbours, kinds, _ = _neighbours(indices, num_sets, k, rng,
                                                             num_neighbours, added_rows)
    return CoverageInstance(all_indices, num_sets, weights, neighbours, kinds)


def random_instance(seed: int, num_elements: int, num_sets: int, k: int, *, mean_degree=3.0,
                    max_degree: int = 8, skew: float = 1.0,
                    num_neighbours: int = 8) -> CoverageInstance:
    """A random set system with skewed set sizes: element e joins ``1 + Poisson(mean − 1)`` sets
    (at most ``max_degree``) drawn with probabilities ``∝ exp(skew·N(0, 1))``. Neighbours as for
    :func:`disc_instance`; an added element joins two contender sets."""
    rng = np.random.default_rng(seed)
    popularity = np.exp(skew * rng.normal(size=num_sets))
    cdf = np.cumsum(popularity / popularity.sum())
    degree = np.minimum(1 + rng.poisson(mean_degree - 1, num_elements), max_degree)
    picks = np.minimum(np.searchsorted(cdf, rng.random((num_elements, max_degree))),
                       num_sets - 1).astype(np.int32)
    picks = np.sort(np.where(np.arange(max_degree)[None, :] < degree[:, None], picks,
                             num_sets), axis=1)
    repeated = np.zeros_like(picks, bool)
    repeated[:, 1:] = picks[:, 1:] == picks[:, :-1]
    indices = np.where(repeated | (picks >= num_sets), -1, picks).astype(np.int32)
    contenders = _host_greedy(indices, num_sets, np.ones(num_elements), min(2 * k, num_sets))[0]
    contenders = contenders[k // 2:]
    num_add = num_neighbours // 2
    added_rows = [rng.choice(contenders, size=2, replace=False) for _ in range(num_add)]
    all_indices, weights, neighbours, kinds, _ = _neighbours(indices, num_sets, k, rng,
                                                             num_neighbours, added_rows)
    return CoverageInstance(all_indices, num_sets, weights, neighbours, kinds)
