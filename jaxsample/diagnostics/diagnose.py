"""``diagnose``: read a run's trace and say in words what went wrong and what to do about it.

A sampler can return numbers that look like a posterior sample and are not: a particle cloud
collapsed onto a few points, importance weights held by one proposal, chains that never mixed.
Every jaxsample Info records the evidence per step (``nonfinite``, ``collapsed``,
``weight_ess``, ``stein_ratio``, ``acceptance_rate``, ``solver``…); :func:`diagnose` reads
whichever of those fields a trace has (so it serves every iterative sampler, and BlackJAX's
infos where the field names agree), optionally with the draws of several chains for R̂ and ESS
(:mod:`jaxsample.diagnostics.chains`), and returns ``(Diagnosis, DiagnosisInfo)`` — the
library's deterministic-estimator shape: the :class:`Diagnosis` text names each problem with its
remedy, the :class:`DiagnosisInfo` holds the statistics the verdict was drawn from. It runs
eagerly on concrete arrays (a report, not a jittable kernel).

Thresholds (stated, not tuned; the table :data:`RULES`): Stein ratio outside ``[0.6, 1.6]``
over the last quarter and mean score bias above 0.05 (the mean bias² in posterior sds it
estimates), both read from :class:`~jaxsample.diagnostics.CollapseCriteria`'s defaults, the band
ETD's verdict uses (about sd ratios 0.77–1.26 on a Gaussian); the scale-mixture (funnel) Stein test
(``scaling_flag``, :func:`jaxsample.diagnostics.stein_check`) fired on more than half of the
last half (it fires on 0.4–9 % of exact clouds of 100 points, measured); the mass-loss test
(``mass_lost``, :meth:`~jaxsample.diagnostics.CollapseCriteria.mass_loss`) on more than half of
the last quarter; weight ESS below 2 on
more than half of the last half; weights tempered below ``β = 0.1`` on average; mutation
acceptance outside ``[0.15, 0.95]``; an inner solver short of its tolerance on more than a
quarter of the steps; R̂ above 1.01 or bulk ESS below 100 (Vehtari et al. 2021).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxsample.diagnostics.chains import ess as chain_ess
from jaxsample.diagnostics.chains import rhat as chain_rhat
from jaxsample.diagnostics.criteria import CollapseCriteria
from jaxsample.kernels.solver import RESULTS

__all__ = ["RULES", "Diagnosis", "DiagnosisInfo", "Rule", "diagnose"]


class Diagnosis(NamedTuple):
    """What :func:`diagnose` found, in words; ``print(diagnosis)`` gives the report.

    Attributes:
        ok: no problem found.
        problems: one sentence per problem: what was seen, with numbers, and the remedy.
        summary: the statistics the verdict was drawn from, as one line of text (the numbers
            are in :class:`DiagnosisInfo`).
    """

    ok: bool
    problems: tuple[str, ...]
    summary: str

    def __str__(self) -> str:
        head = "no problem found" if self.ok else f"{len(self.problems)} problem(s) found"
        lines = [f"diagnose: {head} ({self.summary})" if self.summary else f"diagnose: {head}"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class DiagnosisInfo(NamedTuple):
    """The statistics :func:`diagnose` read (NaN where the trace has no such field).

    Attributes:
        steps: number of steps in the trace.
        nonfinite_steps: steps whose Info flagged non-finite values.
        collapsed_steps: steps with the collapse verdict raised.
        stein_ratio: mean Stein ratio over the last quarter.
        score_bias: mean score bias over the last quarter.
        scaling_flag_fraction: fraction of the last half's steps on which the scale-mixture
            Stein test fired (``scaling_flag``).
        mass_lost_fraction: fraction of the last quarter's steps on which the cloud covered
            less of the target's mass than it had (``mass_lost``).
        weight_ess: median importance-weight ESS over the last half.
        weight_temperature: mean weight-guard temperature β over the last half.
        acceptance_rate: mean Metropolis acceptance over the last half.
        solver_failures: steps whose inner solver missed its tolerance.
        max_rhat: largest R̂ over the coordinates (with ``samples``).
        min_ess: smallest bulk ESS over the coordinates (with ``samples``).
        nonfinite: the trace or the draws held non-finite values.
    """

    steps: np.ndarray
    nonfinite_steps: np.ndarray
    collapsed_steps: np.ndarray
    stein_ratio: np.ndarray
    score_bias: np.ndarray
    scaling_flag_fraction: np.ndarray
    mass_lost_fraction: np.ndarray
    weight_ess: np.ndarray
    weight_temperature: np.ndarray
    acceptance_rate: np.ndarray
    solver_failures: np.ndarray
    max_rhat: np.ndarray
    min_ess: np.ndarray
    nonfinite: np.ndarray



_CRITERIA = CollapseCriteria()  # the sampler's defaults: the report reads the same thresholds
_STEIN_LOW, _STEIN_HIGH = _CRITERIA.stein_band


class Rule(NamedTuple):
    """One row of :data:`RULES`: read ``field`` over the last ``fraction`` of the steps (each
    step reduced over its batch axes by ``reduce``), summarise it by ``statistic`` into the
    :class:`DiagnosisInfo` field ``summary``, and report ``message(value)`` for each finding
    whose ``fires(late_values, value)`` holds."""

    field: str
    fraction: float
    reduce: Callable
    summary: str
    statistic: Callable
    findings: tuple[tuple[Callable, Callable], ...]


RULES: tuple[Rule, ...] = (
    Rule("stein_ratio", 0.25, np.nanmean, "stein_ratio", np.nanmean, (
        (lambda late, v: v < _STEIN_LOW, lambda v: (
            f"the cloud is narrower than the target (Stein ratio {v:.2f} over the last quarter, "
            f"below {_STEIN_LOW:g}; 1 for a sample, about the squared sd ratio): see the "
            "collapse remedies; run longer if it is still rising")),
        (lambda late, v: v > _STEIN_HIGH, lambda v: (
            f"the cloud is wider than the target (Stein ratio {v:.2f} over the last quarter, "
            f"above {_STEIN_HIGH:g}): it has not contracted yet — run longer, or lower "
            "proposal_step")),
    )),
    Rule("score_bias", 0.25, np.nanmean, "score_bias", np.nanmean, (
        (lambda late, v: v > _CRITERIA.max_score_bias, lambda v: (
            f"the cloud's mean is off (score bias {v:.3f} over the last quarter, above "
            f"{_CRITERIA.max_score_bias:g}: the mean score should vanish, and this estimates "
            "the mean bias² in posterior sds): run longer, or see the collapse remedies")),
    )),
    Rule("scaling_flag", 0.5, np.any, "scaling_flag_fraction", np.mean, (
        (lambda late, v: v > 0.5, lambda v: (
            f"the cloud fails the scale-mixture Stein test on {100 * v:.0f}% of the last "
            "half's steps: a funnel-shaped or hierarchical posterior whose scale coordinate the "
            "cloud covers wrongly (stuck in the neck, or too narrow along the funnel). "
            "Remedies: reparametrise non-centred (for a NumPyro model, "
            "numpyro.handlers.reparam with LocScaleReparam(0) on the group effects, then "
            "jaxsample.interop.from_numpyro) or use NUTS with a small step")),
    )),
    Rule("mass_lost", 0.25, np.any, "mass_lost_fraction", np.mean, (
        (lambda late, v: v > 0.5, lambda v: (
            f"the cloud lost part of the target's mass it covered earlier (mass_lost on "
            f"{100 * v:.0f}% of the last quarter's steps: the evidence estimate log_evidence "
            f"fell by more than log(1/(1 - {_CRITERIA.max_mass_loss:g})) and stayed down): a "
            "mode was emptied, and the surviving cloud can look healthy. Compare "
            "info.log_evidence early and late for the lost fraction 1 - exp(late - early). "
            "Remedies: more particles, a start that covers the modes, the default proposal "
            "step (ProposalAdaptation(), which follows the MALA step only while the weights "
            "are tempered), preconditioner='fisher' with a score, or a tempered sampler for "
            "modes the cloud never reached")),
    )),
    Rule("weight_ess", 0.5, np.mean, "weight_ess", np.median, (
        (lambda late, v: np.mean(late < 2.0) > 0.5, lambda v: (
            f"importance weights degenerate (median ESS {v:.2f} over the last half: one or two "
            "proposals hold the mass): the resampling duplicates particles. Raise "
            "min_weight_ess or the mutation moves (Mutation(steps=...)), use a "
            "preconditioner")),
    )),
    Rule("weight_temperature", 0.5, np.mean, "weight_temperature", np.mean, (
        (lambda late, v: v < 0.1, lambda v: (
            f"the weight guard tempered the weights hard (mean β {v:.3f} over the last half): "
            "the resampling carries little information about the target, and the cloud is as "
            "good as its mutation chains; check the Stein ratio and run longer")),
    )),
    Rule("acceptance_rate", 0.5, np.mean, "acceptance_rate", np.mean, (
        (lambda late, v: v < 0.15, lambda v: (
            f"Metropolis acceptance {v:.2f} over the last half: the step size is too large for "
            "the target's scale (lower it, or let it adapt longer)")),
        (lambda late, v: 0.95 < v < 1.0, lambda v: (
            f"Metropolis acceptance {v:.2f} over the last half: the steps are too small to "
            "move (raise the step size)")),
    )),
)
"""What :func:`diagnose` reads beyond the flags, one row per Info field: the Stein thresholds
are :class:`~jaxsample.diagnostics.CollapseCriteria`'s defaults, so a changed default changes
the sampler's flag and this report together."""


def _field(trace, name):
    value = getattr(trace, name, None)
    if value is None and isinstance(trace, dict):
        value = trace.get(name)
    return None if value is None else np.asarray(value)


def _per_step(values: np.ndarray, reduce) -> np.ndarray:
    """Reduce every axis but the first (steps) of a trace leaf (chains under vmap, …)."""
    values = np.asarray(values)
    if values.ndim == 0:
        return values.reshape(1)
    if values.ndim == 1:
        return values
    return reduce(values.reshape(values.shape[0], -1), axis=1)


def _late(trace, name: str, fraction: float, reduce=np.mean) -> np.ndarray | None:
    """The last ``fraction`` of the steps of field ``name`` (reduced per step), or None when
    the trace has no such field or only NaN there."""
    values = _field(trace, name)
    if values is None:
        return None
    values = _per_step(values, reduce)
    late = values[min(int(len(values) * (1 - fraction)), len(values) - 1):]
    return late if np.isfinite(late).any() else None


def _steps(flags: np.ndarray) -> str:
    idx = np.flatnonzero(flags)
    if idx.size == 0:
        return "none"
    if idx.size == 1:
        return f"step {idx[0]}"
    return f"{idx.size} steps, first {idx[0]}, last {idx[-1]}"


def diagnose(trace: Any, *, samples=None) -> tuple[Diagnosis, DiagnosisInfo]:
    """Diagnose a run from its trace (and optionally its chains' draws).

    Args:
        trace: the trace :func:`jaxsample.run` returned with the default ``transform`` (the
            per-step Info, every leaf with a leading step axis; further axes — chains under
            ``vmap`` — are reduced), or any NamedTuple / dict with some of the fields
            ``nonfinite``, ``collapsed``, ``degenerate``, ``weight_ess``, ``num_distinct``,
            ``stein_ratio``, ``score_bias``, ``scaling_flag``, ``mass_lost``,
            ``weight_temperature``,
            ``acceptance_rate``, ``solver``.
        samples: optional draws ``(num_chains, num_draws)`` or ``(num_chains, num_draws, d)``
            from several chains: adds R̂ and bulk ESS.

    Returns:
        ``(diagnosis, info)``: ``print(diagnosis)`` gives the report; ``info`` holds the
        statistics (:class:`DiagnosisInfo`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import jaxsample
        >>> from jaxsample.diagnostics import diagnose
        >>> alg = jaxsample.etd(lambda x: -0.5 * jnp.sum(x**2), num_proposals=5)
        >>> state, trace = jaxsample.run(jax.random.key(1), alg,
        ...                              alg.init(jax.random.normal(jax.random.key(0), (40, 2))),
        ...                              num_steps=30)
        >>> diagnosis, info = diagnose(trace)
        >>> diagnosis.ok, int(info.collapsed_steps)
        (True, 0)
    """
    problems: list[str] = []
    summary: dict[str, float] = {}

    nonfinite = _field(trace, "nonfinite")
    if nonfinite is not None:
        bad = _per_step(nonfinite, np.any)
        summary["nonfinite_steps"] = float(bad.sum())
        if bad.any():
            problems.append(
                f"non-finite values met in {_steps(bad)}: logdensity_fn or score_fn returns NaN "
                "or inf where the sampler evaluates it (affected proposals get zero weight and "
                "a failed move keeps the previous state); make the functions finite on the "
                "support or start inside it")

    num_steps = len(bad) if nonfinite is not None else None
    collapsed = _field(trace, "collapsed")
    if collapsed is not None:
        flags = _per_step(collapsed, np.any)
        num_steps = len(flags)
        summary["collapsed_steps"] = float(flags.sum())
        if flags.any():
            final = "and at the end" if flags[-1] else "then recovered"
            problems.append(
                f"the particle cloud collapsed ({_steps(flags)}, {final}): it is not a sample "
                "of the target. Remedies: more π-invariant MALA moves "
                "(mutation=jaxsample.particles.Mutation(steps=...)) and steps, a fixed "
                "preconditioner (laplace_preconditioner for a unimodal, "
                "near-Gaussian posterior), a larger min_weight_ess, more particles; on a "
                "hard or high-dimensional posterior the documented switch "
                "jaxsample.particles.ETD_HARD with at least 2d particles: "
                "jaxsample.etd(logdensity_fn, score_fn=..., **ETD_HARD)")

    for rule in RULES:
        late = _late(trace, rule.field, rule.fraction, rule.reduce)
        if late is None:
            continue
        value = float(rule.statistic(late))
        summary[rule.summary] = value
        problems += [message(value) for fires, message in rule.findings if fires(late, value)]

    solver = trace.get("solver") if isinstance(trace, dict) else getattr(trace, "solver", None)
    if hasattr(solver, "result"):
        failed = _per_step(np.asarray(solver.result != RESULTS.successful), np.any)
        summary["solver_failures"] = float(failed.sum())
        if failed.mean() > 0.25:
            problems.append(
                f"the inner solver missed its tolerance in {_steps(failed)} "
                f"({100 * failed.mean():.0f}% of steps): raise max_iterations or loosen "
                "tolerance (for Sinkhorn: raise epsilon)")

    nonfinite_draws = False
    if samples is not None:
        r = np.asarray(chain_rhat(samples)[0])
        e = np.asarray(chain_ess(samples)[0])
        nonfinite_draws = not (np.all(np.isfinite(samples)))
        summary["max_rhat"] = float(np.max(r))
        summary["min_ess"] = float(np.min(e))
        if np.max(r) > 1.01:
            problems.append(
                f"chains disagree (max R-hat {np.max(r):.3f} > 1.01): they have not mixed; run "
                "longer or reparametrise")
        if np.min(e) < 100:
            problems.append(
                f"few effective draws (min bulk ESS {np.min(e):.0f} < 100): run longer")

    if num_steps is not None:
        summary["steps"] = float(num_steps)
    stats = {name: np.asarray(summary.get(name, np.nan), np.float64)
             for name in DiagnosisInfo._fields if name != "nonfinite"}
    info = DiagnosisInfo(**stats, nonfinite=np.asarray(
        nonfinite_draws or summary.get("nonfinite_steps", 0.0) > 0))
    text = ", ".join(f"{k} {v:.3g}" for k, v in summary.items())
    return Diagnosis(not problems, tuple(problems), text), info
