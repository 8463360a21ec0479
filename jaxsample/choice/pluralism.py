"""Value-priority attribution and distributional pluralism from recorded discrete choices.

After Chandak et al., *What Does the AI Doctor Value?* (arXiv 2605.18738, 2026): a decision-maker
(a model, or one physician) faces dilemmas ``j``, each a choice between options ``k`` annotated by
``z_{jk} ∈ ℝ^P`` (how option ``k`` upholds or violates each of ``P`` principles, e.g. autonomy,
beneficence, nonmaleficence, justice). The attribution model is a conditional logit
(Bradley–Terry for two options)::

    P(choose k | j) = softmax_k(θᵀ z_{jk}),        θ = β·w,  w ∈ Δ^{P−1},  β = Σ_p θ_p,

fitted by penalised maximum likelihood (a Gaussian prior ``N(0, I/l2)`` on ``θ``, so that the
near-deterministic choices of a model, which make the data separable, still give a finite
estimate). The paper's own attribution model was not published; this is the standard conditional
logit it describes.

Identifiability: the likelihood depends on ``θ`` only through the differences ``θᵀ(z_{jk} −
z_{j1})``. Only the projection of ``θ`` on the span of those differences is identified; the
penalty picks the minimum-norm ``θ`` along the rest. ``info.design_rank`` reports that rank: when
it is below ``P`` (for instance every dilemma pits one principle against another, so the
differences sum to zero) report contrasts ``θ_p − θ_q`` only.

* :func:`fit_value_priorities` — the fit (optimistix BFGS), with bootstrap intervals (one ``vmap``
  over resampled dilemmas) or Laplace (inverse-Hessian) intervals.
* :func:`choice_probabilities`, :func:`sample_choices` — the model's choice law and draws from it.
* :func:`decision_entropy` — per-dilemma entropy (bits) of repeated choices.
* :func:`pluralism_gap` — per-dilemma total-variation distance between a model's and a panel's
  empirical choice laws (distributional pluralism).
* :func:`panel_percentile` — the fraction of a panel at or below a decision-maker, per principle.

:func:`jaxsample.datasets.synthetic_panel` draws a planted panel of decision-makers on synthetic
dilemmas to test them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from jaxsample._batching import vmap_in_blocks
from jaxsample._checks import (
    check_array,
    check_hyperparameter,
    check_int,
    check_key,
    check_number,
    check_progress,
    is_concrete,
)
from jaxsample._solver import from_optimistix, warn_if_unsuccessful
from jaxsample.kernels import resampling
from jaxsample.kernels.solver import SolverStats, batched, select

__all__ = [
    "ChoiceLawInfo",
    "DecisionEntropyInfo",
    "PanelPercentileInfo",
    "PluralismGapInfo",
    "PriorityInfo",
    "bootstrap_value_priorities",
    "choice_probabilities",
    "decision_entropy",
    "fit_value_priorities",
    "panel_percentile",
    "pluralism_gap",
    "sample_choices",
]


class PriorityInfo(NamedTuple):
    """Diagnostics of :func:`fit_value_priorities` and :func:`bootstrap_value_priorities`.

    Attributes:
        lower, upper: ``(P,)`` interval for each priority at ``level``: bootstrap percentiles
            (:func:`bootstrap_value_priorities`), or Laplace's ``θ̂ ± z·sqrt(diag H⁻¹)``, ``H``
            the Hessian of the penalised negative log-likelihood (:func:`fit_value_priorities`).
        standard_error: ``(P,)`` bootstrap standard deviation, or the Laplace standard error.
        weights: ``(P,)`` the simplex weights ``w = θ̂/β`` (meaningful where ``θ̂ ≥ 0``).
        decisiveness: ``β = Σ_p θ̂_p``.
        log_likelihood: log-likelihood of the data at ``θ̂`` (penalty excluded).
        design_rank: rank of the option-difference design; ``< P`` means only a subspace of
            ``θ`` is identified.
        solver: :class:`~jaxsample.SolverStats` of the BFGS fit on the full data (iterations),
            whose result is the first unsuccessful one of that fit and every bootstrap fit.
        nonfinite: a non-finite estimate, interval or likelihood.
    """

    lower: jax.Array
    upper: jax.Array
    standard_error: jax.Array
    weights: jax.Array
    decisiveness: jax.Array
    log_likelihood: jax.Array
    design_rank: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


class ChoiceLawInfo(NamedTuple):
    """The model's choice law, beside :func:`choice_probabilities` and :func:`sample_choices`.

    Attributes:
        log_probabilities: ``(..., num_dilemmas, num_options)`` ``log softmax_k(θᵀ z_{jk})``
            (accurate where a probability underflows).
        nonfinite: a log-probability is NaN or ``+inf``.
    """

    log_probabilities: jax.Array
    nonfinite: jax.Array


class DecisionEntropyInfo(NamedTuple):
    """Beside :func:`decision_entropy`: ``frequencies`` ``(num_dilemmas, num_options)``, the
    empirical choice law of each dilemma; ``nonfinite``: an entropy is not finite."""

    frequencies: jax.Array
    nonfinite: jax.Array


class PluralismGapInfo(NamedTuple):
    """Beside :func:`pluralism_gap`: the two empirical choice laws
    ``(num_dilemmas, num_options)`` compared, and ``nonfinite`` (a gap is not finite)."""

    model_frequencies: jax.Array
    panel_frequencies: jax.Array
    nonfinite: jax.Array


class PanelPercentileInfo(NamedTuple):
    """Beside :func:`panel_percentile`: ``panel_median`` ``(P,)``, the panel's median priority
    per principle; ``nonfinite``: a priority of the panel or the decision-maker is not
    finite."""

    panel_median: jax.Array
    nonfinite: jax.Array


def _option_logits(theta, features):
    return jnp.einsum("jkp,p->jk", features, theta)


def _counts(choices, num_options, dtype):
    """``(num_dilemmas, num_options)`` counts from ``(R, num_dilemmas)`` choices."""
    return jnp.sum(jax.nn.one_hot(choices, num_options, dtype=dtype), axis=0)


def _objective(theta, features, counts, l2):
    """Penalised negative log-likelihood per decision (the fit's scale-free objective)."""
    log_probs = jax.nn.log_softmax(_option_logits(theta, features), axis=-1)
    total = jnp.sum(counts)
    return (-jnp.sum(counts * log_probs) + 0.5 * l2 * jnp.sum(theta**2)) / total


def _solve(features, counts, l2, *, max_iterations, tolerance):
    """BFGS (optimistix) on the convex penalised objective, from ``θ = 0``.

    Stops when successive iterates and objective values change by less than
    ``tolerance·(1 + |·|)`` (optimistix's Cauchy criterion).
    """
    solver = optx.BFGS(rtol=tolerance, atol=tolerance)
    solution = optx.minimise(
        lambda theta, _: _objective(theta, features, counts, l2), solver,
        jnp.zeros(features.shape[-1], features.dtype), max_steps=max_iterations, throw=False)
    return solution.value, from_optimistix(solution)


def _normal_quantile(level, dtype):
    return jax.scipy.special.ndtri(jnp.asarray(0.5 + 0.5 * level, dtype))


def _fit(key, features, choices, l2, *, num_resamples, level, max_iterations, tolerance,
         progress=None):
    with jax.named_scope("fit_value_priorities"):
        dtype = features.dtype
        counts = _counts(choices, features.shape[1], dtype)
        l2 = jnp.asarray(l2, dtype)
        solve = functools.partial(_solve, max_iterations=max_iterations, tolerance=tolerance)
        theta, stats = solve(features, counts, l2)
        log_probs = jax.nn.log_softmax(_option_logits(theta, features), axis=-1)
        log_likelihood = jnp.sum(counts * log_probs)
        deltas = (features - features[:, :1]).reshape((-1, features.shape[-1]))
        design_rank = jnp.linalg.matrix_rank(deltas).astype(jnp.int32)
        if key is None:
            hessian = jax.hessian(_objective)(theta, features, counts, l2) * jnp.sum(counts)
            standard_error = jnp.sqrt(jnp.diag(jnp.linalg.inv(hessian)))
            half = _normal_quantile(level, dtype) * standard_error
            lower, upper = theta - half, theta + half
        else:
            num_dilemmas = features.shape[0]
            index = jax.random.randint(key, (num_resamples, num_dilemmas), 0, num_dilemmas)
            thetas, boot_stats = vmap_in_blocks(lambda i: solve(features[i], counts[i], l2),
                                                index, progress=progress)
            first_failure = batched(boot_stats).result
            stats = SolverStats(stats.num_iterations,
                                select(stats.converged, first_failure, stats.result))
            alpha = 0.5 * (1.0 - level)
            lower, upper = jnp.quantile(thetas, jnp.asarray([alpha, 1.0 - alpha], dtype), axis=0)
            standard_error = jnp.std(thetas, axis=0)
        finite = jnp.all(jnp.isfinite(jnp.concatenate([theta, lower, upper, log_likelihood[None]])))
        decisiveness = jnp.sum(theta)
        return theta, PriorityInfo(
            lower=lower, upper=upper, standard_error=standard_error,
            weights=theta / decisiveness, decisiveness=decisiveness,
            log_likelihood=log_likelihood, design_rank=design_rank, solver=stats,
            nonfinite=~finite)


_fit_jit = jax.jit(_fit, static_argnames=("num_resamples", "level", "max_iterations",
                                          "tolerance", "progress"))


def _check_features(option_features):
    features = check_array("option_features", option_features, ndim=3, finite=True)
    if features.shape[1] < 2:
        raise ValueError(f"option_features must have at least 2 options (axis 1), got shape "
                         f"{features.shape}")
    return features


def _check_choices(name, choices, num_dilemmas, num_options):
    """Integer choices of shape ``(num_dilemmas,)`` or ``(R, num_dilemmas)``, as ``(R, J)``."""
    choices = check_array(name, choices, kind="integer")
    if choices.ndim not in (1, 2) or (num_dilemmas is not None
                                      and choices.shape[-1] != num_dilemmas):
        want = "(num_dilemmas,) or (num_repeats, num_dilemmas)" if num_dilemmas is None else (
            f"({num_dilemmas},) or (num_repeats, {num_dilemmas})")
        raise ValueError(f"{name} must have shape {want}, got {choices.shape}")
    if is_concrete(choices):
        values = np.asarray(choices)
        if values.size and (values.min() < 0 or values.max() >= num_options):
            raise ValueError(f"{name} must lie in the option set [0, {num_options}), got values "
                             f"in [{values.min()}, {values.max()}]")
    return choices.reshape((-1, choices.shape[-1]))


def fit_value_priorities(choices, option_features, *, l2=1.0, level: float = 0.9,
                         max_iterations: int = 100, tolerance: float | None = None
                         ) -> tuple[jax.Array, PriorityInfo]:
    """Fits a decision-maker's priorities ``θ = β·w`` to its choices (penalised conditional logit).

    Maximises ``Σ_j Σ_r log softmax_k(θᵀ z_{jk})[c_{rj}] − (l2/2)·‖θ‖²`` by ``optimistix.BFGS``
    on the penalised negative log-likelihood per decision (convex; the fit stops when successive
    iterates and objective values change by less than ``tolerance`` relative). The intervals are
    Laplace's; :func:`bootstrap_value_priorities` gives bootstrap intervals. ``info.weights``
    and ``info.decisiveness`` hold the simplex weights ``w`` and the decisiveness ``β``.

    Args:
        choices: ``(num_dilemmas,)`` or ``(num_repeats, num_dilemmas)`` ints in
            ``[0, num_options)``: the option chosen (repeats: resampled runs or variants).
        option_features: ``(num_dilemmas, num_options, P)`` floating annotations.
        l2: penalty (prior precision) on ``θ``, ``> 0``; traced.
        level: interval level in ``(0, 1)``.
        max_iterations: BFGS iteration cap (each fit).
        tolerance: relative/absolute step tolerance; ``None``: ``1e-8`` in float64, ``1e-4`` in
            float32.

    Returns:
        ``(priorities, info)``: ``(P,)`` estimate ``θ̂`` in ``option_features``' dtype and a
        :class:`PriorityInfo`.

    Example:
        >>> import jax
        >>> from jaxsample.datasets import synthetic_panel
        >>> panel = synthetic_panel(jax.random.key(0), num_agents=30, num_dilemmas=50)
        >>> theta, info = fit_value_priorities(panel.choices[0], panel.option_features, l2=0.1)
        >>> theta.shape, bool(info.solver.converged), int(info.design_rank)
        ((4,), True, 4)
        >>> round(float(info.weights.sum()), 4)
        1.0
    """
    return _checked_fit(None, choices, option_features, l2=l2, num_resamples=0, level=level,
                        max_iterations=max_iterations, tolerance=tolerance)


def bootstrap_value_priorities(key, choices, option_features, *, l2=1.0,
                               num_resamples: int = 200, level: float = 0.9,
                               max_iterations: int = 100, tolerance: float | None = None,
                               progress=None) -> tuple[jax.Array, PriorityInfo]:
    """:func:`fit_value_priorities` with bootstrap percentile intervals.

    The point estimate is the fit to all dilemmas; ``num_resamples`` further fits on dilemmas
    resampled with replacement (the repeated choices of a dilemma travel together) run as one
    ``vmap`` and give the percentile intervals and standard errors.

    Args:
        key: PRNG key of the resampling.
        choices, option_features, l2, level, max_iterations, tolerance: as in
            :func:`fit_value_priorities`.
        num_resamples: bootstrap resamples ``B >= 2``.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`): the resampled fits
            then run in 10 blocks, one report per block (the same fits, to round-off).

    Returns:
        ``(priorities, info)`` as :func:`fit_value_priorities`, with bootstrap intervals.

    Example:
        >>> import jax
        >>> from jaxsample.datasets import synthetic_panel
        >>> panel = synthetic_panel(jax.random.key(0), num_agents=30, num_dilemmas=50)
        >>> theta, info = bootstrap_value_priorities(jax.random.key(1), panel.choices[0],
        ...                                          panel.option_features, l2=0.1,
        ...                                          num_resamples=16)
        >>> theta.shape, bool(info.solver.converged), bool((info.lower <= info.upper).all())
        ((4,), True, True)
    """
    key = check_key("key", key)
    num_resamples = check_int("num_resamples", num_resamples, 2)
    return _checked_fit(key, choices, option_features, l2=l2, num_resamples=num_resamples,
                        level=level, max_iterations=max_iterations, tolerance=tolerance,
                        progress=check_progress(progress))


def _checked_fit(key, choices, option_features, *, l2, num_resamples, level, max_iterations,
                 tolerance, progress=None):
    features = _check_features(option_features)
    num_dilemmas, num_options = features.shape[:2]
    choices = _check_choices("choices", choices, num_dilemmas, num_options)
    l2 = check_hyperparameter("l2", l2)
    level = check_number("level", level, maximum=1.0)
    if level >= 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    max_iterations = check_int("max_iterations", max_iterations, 1)
    if tolerance is None:
        tolerance = 1e-8 if features.dtype == jnp.float64 else 1e-4
    tolerance = check_number("tolerance", tolerance)
    theta, info = _fit_jit(key, features, choices, l2, num_resamples=num_resamples,
                           level=level, max_iterations=max_iterations, tolerance=tolerance,
                           progress=progress)
    what = "fit_value_priorities' BFGS fit" if key is None else (
        "bootstrap_value_priorities' BFGS fits")
    warn_if_unsuccessful(info.solver, what, stacklevel=4)
    return theta, info


def choice_probabilities(priorities, option_features) -> tuple[jax.Array, ChoiceLawInfo]:
    """The model's choice law ``softmax_k(θᵀ z_{jk})``: ``(..., num_dilemmas, num_options)``.

    ``priorities`` is ``(P,)`` or a batch ``(..., P)`` of decision-makers.

    Returns:
        ``(probabilities, info)``: the law and a :class:`ChoiceLawInfo` (its logarithm).

    Example:
        >>> import jax.numpy as jnp
        >>> z = jnp.array([[[1.0, 0.0], [0.0, 1.0]]])           # one dilemma, two options
        >>> probs, info = choice_probabilities(jnp.array([0.0, 0.0]), z)
        >>> probs.tolist()
        [[0.5, 0.5]]
    """
    features = _check_features(option_features)
    priorities = _check_priorities(priorities, features)
    return _choice_probabilities(priorities, features)


def _choice_law(priorities, features):
    log_probs = jax.nn.log_softmax(jnp.einsum("jkp,...p->...jk", features, priorities), axis=-1)
    nonfinite = jnp.any(jnp.isnan(log_probs) | (log_probs == jnp.inf))
    return log_probs, ChoiceLawInfo(log_probs, nonfinite)


@jax.jit
def _choice_probabilities(priorities, features):
    with jax.named_scope("choice_probabilities"):
        log_probs, info = _choice_law(priorities, features)
        return jnp.exp(log_probs), info


def _check_priorities(priorities, features):
    priorities = check_array("priorities", priorities, dtype=features.dtype)
    if priorities.ndim < 1 or priorities.shape[-1] != features.shape[-1]:
        raise ValueError(f"priorities must have shape (..., {features.shape[-1]}), got "
                         f"{priorities.shape}")
    return priorities


def sample_choices(key, priorities, option_features, *, num_samples: int
                   ) -> tuple[jax.Array, ChoiceLawInfo]:
    """``num_samples`` independent decisions on every dilemma: ``(num_samples, ..., J)`` ints.

    Draws by :func:`jaxsample.kernels.resampling.categorical` from :func:`choice_probabilities`'s
    law; ``priorities`` may be a batch ``(..., P)``.

    Returns:
        ``(choices, info)``: int32 choices and a :class:`ChoiceLawInfo` (the law drawn from).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> z = jnp.array([[[1.0], [0.0]], [[0.0], [1.0]]])
        >>> choices, info = sample_choices(jax.random.key(0), jnp.array([50.0]), z, num_samples=3)
        >>> choices.tolist()
        [[0, 1], [0, 1], [0, 1]]
    """
    key = check_key("key", key)
    num_samples = check_int("num_samples", num_samples, 1)
    features = _check_features(option_features)
    priorities = _check_priorities(priorities, features)
    return _sample_choices(key, priorities, features, num_samples=num_samples)


@functools.partial(jax.jit, static_argnames="num_samples")
def _sample_choices(key, priorities, features, *, num_samples):
    with jax.named_scope("sample_choices"):
        log_probs, info = _choice_law(priorities, features)
        return resampling.categorical(key, log_probs, num_samples), info


def _entropy_bits(probs):
    safe = jnp.where(probs > 0, probs, jnp.ones_like(probs))
    # p·log₂(1/p) rather than −p·log₂p: a certain choice gives +0.0, not −0.0
    return jnp.sum(jnp.where(probs > 0, probs * jnp.log2(1 / safe), jnp.zeros_like(probs)),
                   axis=-1)


def _frequencies(choices, num_options, dtype):
    counts = _counts(choices, num_options, dtype)
    return counts / jnp.sum(counts, axis=-1, keepdims=True)


def decision_entropy(choice_samples, *, num_options: int = 2, dtype=None
                     ) -> tuple[jax.Array, DecisionEntropyInfo]:
    """Plug-in entropy (bits) of repeated decisions on each dilemma: ``(num_dilemmas,)``.

    ``H_j = −Σ_k p̂_{jk} log₂ p̂_{jk}`` with ``p̂_{jk}`` the fraction of the ``R`` samples choosing
    ``k``: 0 for constant decisions, 1 bit for an even binary split. The plug-in value is biased
    low for small ``R`` (by about ``(K − 1)/(2R ln 2)`` bits, Miller–Madow).

    Args:
        choice_samples: ``(R, num_dilemmas)`` ints in ``[0, num_options)``.
        num_options: ``K``.
        dtype: floating dtype of the result (default: JAX's default float).

    Returns:
        ``(entropy, info)``: ``(num_dilemmas,)`` bits and a :class:`DecisionEntropyInfo` (the
        frequencies ``p̂``).

    Example:
        >>> import jax.numpy as jnp
        >>> entropy, info = decision_entropy(jnp.array([[0, 0, 1], [0, 1, 1]]))
        >>> entropy.tolist()
        [0.0, 1.0, 0.0]
    """
    num_options = check_int("num_options", num_options, 2)
    choices = _check_choices("choice_samples", choice_samples, None, num_options)
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return _decision_entropy(choices, num_options=num_options, dtype=dtype)


@functools.partial(jax.jit, static_argnames=("num_options", "dtype"))
def _decision_entropy(choices, *, num_options, dtype):
    with jax.named_scope("decision_entropy"):
        frequencies = _frequencies(choices, num_options, dtype)
        entropy = _entropy_bits(frequencies)
        return entropy, DecisionEntropyInfo(frequencies, ~jnp.all(jnp.isfinite(entropy)))


def pluralism_gap(model_choices, panel_choices, *, num_options: int = 2, dtype=None
                  ) -> tuple[jax.Array, PluralismGapInfo]:
    """Per-dilemma total-variation distance between a model's and a panel's choice laws.

    ``D_j = ½ Σ_k |p̂^{model}_{jk} − p̂^{panel}_{jk}|`` (for two options ``|p̂_A − p̂_B|``), where
    ``p̂^{panel}`` is the fraction of panel members choosing each option and ``p̂^{model}`` the
    fraction of the model's repeated samples. Its mean over dilemmas is the distributional-
    pluralism gap: 0 when the model reproduces the panel's spread of decisions.

    Args:
        model_choices: ``(R, num_dilemmas)`` ints (``R`` samples of the model).
        panel_choices: ``(M, num_dilemmas)`` ints (one decision per panel member).
        num_options: ``K``.
        dtype: floating dtype of the result (default: JAX's default float).

    Returns:
        ``(gap, info)``: ``(num_dilemmas,)`` in ``[0, 1]`` and a :class:`PluralismGapInfo` (the
        two empirical laws).

    Example:
        >>> import jax.numpy as jnp
        >>> gap, info = pluralism_gap(jnp.array([[0, 0], [0, 0]]), jnp.array([[0, 1], [1, 1]]))
        >>> gap.tolist()
        [0.5, 1.0]
    """
    num_options = check_int("num_options", num_options, 2)
    model = _check_choices("model_choices", model_choices, None, num_options)
    panel = _check_choices("panel_choices", panel_choices, model.shape[-1], num_options)
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return _pluralism_gap(model, panel, num_options=num_options, dtype=dtype)


@functools.partial(jax.jit, static_argnames=("num_options", "dtype"))
def _pluralism_gap(model, panel, *, num_options, dtype):
    with jax.named_scope("pluralism_gap"):
        model_law = _frequencies(model, num_options, dtype)
        panel_law = _frequencies(panel, num_options, dtype)
        gap = 0.5 * jnp.sum(jnp.abs(model_law - panel_law), axis=-1)
        return gap, PluralismGapInfo(model_law, panel_law, ~jnp.all(jnp.isfinite(gap)))


def panel_percentile(priorities, panel_priorities) -> tuple[jax.Array, PanelPercentileInfo]:
    """Fraction of the panel at or below ``priorities``, per principle: ``(..., P)`` in [0, 1].

    ``F_p = #{m : θ^{(m)}_p ≤ θ_p} / M`` — the empirical CDF of the panel's ``p``-th priority at
    the decision-maker's value (monotone in ``θ_p``). A value below the panel's 5th percentile
    (``F_p < 0.05``) flags a principle the decision-maker underweights relative to the panel.

    Args:
        priorities: ``(..., P)`` one or more decision-makers (raw ``θ`` or normalised ``w``;
            use the same kind for both arguments).
        panel_priorities: ``(M, P)``.

    Returns:
        ``(percentile, info)``: ``(..., P)`` fractions and a :class:`PanelPercentileInfo`.

    Example:
        >>> import jax.numpy as jnp
        >>> panel = jnp.array([[0.1, 0.9], [0.3, 0.7], [0.5, 0.5], [0.7, 0.3]])
        >>> percentile, info = panel_percentile(jnp.array([0.3, 0.2]), panel)
        >>> percentile.tolist()
        [0.5, 0.0]
    """
    panel = check_array("panel_priorities", panel_priorities, ndim=2)
    priorities = check_array("priorities", priorities, dtype=panel.dtype)
    if priorities.ndim < 1 or priorities.shape[-1] != panel.shape[1]:
        raise ValueError(f"priorities must have shape (..., {panel.shape[1]}), got "
                         f"{priorities.shape}")
    return _panel_percentile(priorities, panel)


@jax.jit
def _panel_percentile(priorities, panel):
    with jax.named_scope("panel_percentile"):
        batch = priorities.shape[:-1]
        flat = priorities.reshape((-1, 1, panel.shape[1]))
        below = panel[None] <= flat
        percentile = jnp.mean(below.astype(panel.dtype), axis=1).reshape(batch
                                                                          + (panel.shape[1],))
        nonfinite = ~(jnp.all(jnp.isfinite(panel)) & jnp.all(jnp.isfinite(priorities)))
        return percentile, PanelPercentileInfo(jnp.median(panel, axis=0), nonfinite)
