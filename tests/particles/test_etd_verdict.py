"""ETD is loud when it cannot be right: the ``collapsed`` verdict on planted failures (one per
failure mode), the eager warning, ``diagnostics.diagnose``, the adaptation, and a Laplace fit
that fails clearly."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsample
from jaxsample import RESULTS
from jaxsample.diagnostics import diagnose
from jaxsample.particles import Mutation, ProposalAdaptation, laplace_preconditioner

D = 20


def std_normal(x):
    return -0.5 * jnp.sum(x**2)


def _start(scale, n=40, d=D, seed=0):
    return scale * jax.random.normal(jax.random.key(seed), (n, d))


def _quiet_run(alg, positions, num_steps):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return jaxsample.run(jax.random.key(1), alg, alg.init(positions), num_steps)


# Each planted failure holds for every step by construction, so `collapsed` must be set within
# `CollapseCriteria.patience` (10) steps; the frozen settings (no mutation steps) keep the
# failure from healing itself. Every planted target is the Gaussian N(shift, I/precision), and
# the failures differ only in traced values (shift, precision, proposal_step, epsilon, the start),
# so all the categorical ones share one compiled run and the barycentric one another.
FROZEN = dict(num_proposals=4, mutation=Mutation(steps=0), preconditioner=None)
NUM_STEPS = 14
PLANTED = {
    # a cloud 100x narrower than N(0, I): distinct particles, full rank, but Stein ratio 1e-4
    "narrow": (dict(proposal_step=1e-6), 0.01, "stein_ratio"),
    # a cloud 10x wider: Stein ratio ~100
    "wide": (dict(proposal_step=1e-6), 10.0, "stein_ratio"),
    # one coordinate 10x too narrow (a funnel's neck): the mean ratio is 0.95, the smallest 0.01
    "one_coordinate": (dict(proposal_step=1e-6), jnp.ones(D).at[0].set(0.1)[None, :],
                       "stein_ratio_min"),
    # the right spread two sds off-centre: Stein ratio 1, score bias about 4
    "offcentre": (dict(shift=2.0, proposal_step=1e-6), 1.0, "score_bias"),
    # sd-0.05 target from an N(0, I) start: one proposal holds the weight, few distinct picks
    "weights": (dict(precision=400.0, proposal_step=0.5), 1.0, "weight_ess"),
    # barycentric update with epsilon >> 1: every row is b, every particle moves to one point
    "rank": (dict(update="barycentric", epsilon=1e3), 1.0, "effective_rank"),
}


def _planted_algorithm(shift, precision, update="categorical", proposal_step=0.5, epsilon=0.1):
    """The frozen sampler on N(shift, I/precision); the floats may be traced."""
    target = lambda x: -0.5 * precision * jnp.sum((x - shift) ** 2)
    return jaxsample.etd(target, score_fn="autodiff", update=update,
                         proposal_step=proposal_step, epsilon=epsilon, **FROZEN)


@functools.cache
def _planted_runner(update):
    """One jitted run per update rule, the planted failure's floats as traced arguments."""

    @jax.jit
    def run(shift, precision, proposal_step, epsilon, start):
        alg = _planted_algorithm(shift, precision, update, proposal_step, epsilon)
        return jaxsample.run(jax.random.key(1), alg, alg.init(start), NUM_STEPS)

    return run


def _planted_run(mode):
    extra, scale, _ = PLANTED[mode]
    extra = dict(dict(shift=0.0, precision=1.0, proposal_step=0.5, epsilon=0.1), **extra)
    run = _planted_runner(extra.pop("update", "categorical"))
    floats = [jnp.asarray(extra[name]) for name in ("shift", "precision", "proposal_step",
                                                     "epsilon")]
    return run(*floats, _start(scale))


@pytest.mark.parametrize("mode", sorted(PLANTED))
def test_planted_failure_raises_collapsed(mode):
    _, _, evidence = PLANTED[mode]
    state, info = _planted_run(mode)
    assert bool(state.collapsed) and bool(info.collapsed[-1]), mode
    assert bool(jnp.all(info.degenerate[2:])), (mode, info.degenerate)
    # the verdict's memory: 1 - 0.9^k > 1/2 needs k >= 7 degenerate steps
    assert not bool(jnp.any(info.collapsed[:6]))
    value = np.asarray(getattr(info, evidence))[-1]
    limit = {"stein_ratio": (0.6, 1.6), "weight_ess": (1.5, None), "score_bias": (-1.0, 0.05),
             "effective_rank": (0.1 * min(39, D), None), "stein_ratio_min": (0.3, None)}[evidence]
    low, high = limit
    assert value < low or (high is not None and value > high), (mode, evidence, value)
    report, stats = diagnose(info)
    assert int(stats.collapsed_steps) > 0 and not bool(stats.nonfinite)
    assert not report.ok and any("collapsed" in p for p in report.problems), str(report)
    assert any("Mutation(steps" in p for p in report.problems)


# The healthy run and the fixed-step half of the adaptation test share one compiled run: the
# default sampler (ensemble preconditioner, 2 MALA steps) on N(0, I_5), 40 particles, 60 steps;
# they differ only in traced floats.
HEALTHY_D, HEALTHY_STEPS = 5, 60


def test_healthy_run_is_not_flagged_and_diagnose_is_quiet():
    alg = jaxsample.etd(std_normal, score_fn=jax.grad(std_normal), num_proposals=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no collapse warning
        state, info = jaxsample.run(jax.random.key(1), alg,
                                    alg.init(_start(1.0, d=HEALTHY_D)), HEALTHY_STEPS)
    assert not bool(jnp.any(info.collapsed))
    # Stein ratio of a sample of N(0, I5) from 40 particles: sd about sqrt(2/(40*5)) = 0.1;
    # the mean over the last 10 steps lies well inside [0.6, 1.6]
    assert 0.6 < float(jnp.mean(info.stein_ratio[-10:])) < 1.6
    report, stats = diagnose(info)
    assert report.ok, str(report)
    assert float(stats.steps) == HEALTHY_STEPS and 0.6 < float(stats.stein_ratio) < 1.6


def test_eager_run_warns_once_and_traced_run_keeps_the_flag():
    alg = _planted_algorithm(0.0, 1.0, proposal_step=1e-6)  # the "narrow" failure
    state0 = alg.init(_start(0.01))
    with pytest.warns(RuntimeWarning, match="collapsed") as record:
        eager_state, _ = jaxsample.run(jax.random.key(1), alg, state0, NUM_STEPS)
    assert len([r for r in record if "collapsed" in str(r.message)]) == 1
    assert bool(eager_state.collapsed)
    # the same run inside jit (the planted test's compiled runner): no warning, the flag is kept
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        state, _ = _planted_run("narrow")
    assert bool(state.collapsed)


def test_diagnose_reads_any_trace():
    steps = 40
    trace = {
        "nonfinite": np.r_[np.zeros(39, bool), True],
        "acceptance_rate": np.full(steps, 0.02),
        "solver": jaxsample.SolverStats.of(np.full(steps, 200), converged=np.zeros(steps, bool)),
        "weight_temperature": np.full(steps, 0.01),
    }
    report, stats = diagnose(trace)
    text = str(report)
    assert bool(stats.nonfinite) and float(stats.solver_failures) == steps
    assert np.isnan(float(stats.stein_ratio))  # not in this trace
    assert not report.ok and len(report.problems) == 4, text
    assert "step 39" in text and "step size" in text and "max_iterations" in text
    # chains that disagree: two chains around different means
    chains = np.stack([np.random.default_rng(0).normal(m, 1.0, 200) for m in (0.0, 3.0)])
    report, stats = diagnose({}, samples=chains)
    assert float(stats.max_rhat) > 1.01
    assert any("R-hat" in p for p in report.problems)


def test_diagnose_names_the_funnel_finding():
    """``scaling_flag`` on more than half of the last half names the funnel and its remedies;
    early flags (a cloud that fixed itself) or rare ones (false alarms) do not. Traces under
    ``vmap`` (steps × chains) count a step as flagged when any chain is."""
    steps = 40
    funnel = {"scaling_flag": np.r_[np.zeros(10, bool), np.ones(30, bool)]}
    report, stats = diagnose(funnel)
    assert not report.ok and float(stats.scaling_flag_fraction) == 1.0
    (problem,) = report.problems
    assert "scale-mixture Stein test" in problem and "funnel-shaped or hierarchical" in problem
    assert "non-centred" in problem and "LocScaleReparam" in problem and "NUTS" in problem
    early = np.r_[np.ones(20, bool), np.zeros(20, bool)]
    rare = np.arange(steps) % 10 == 0
    for trace in ({"scaling_flag": early}, {"scaling_flag": rare}):
        report, stats = diagnose(trace)
        assert report.ok and float(stats.scaling_flag_fraction) <= 0.1, str(report)
    chains = np.stack([np.zeros(steps, bool), funnel["scaling_flag"]], axis=1)
    assert not diagnose({"scaling_flag": chains})[0].ok
    assert np.isnan(float(diagnose({})[1].scaling_flag_fraction))  # not in this trace


def test_adaptation_moves_the_steps_towards_their_targets():
    """From a proposal step 100x too large the weight ESS is tiny, so α must shrink; the MALA
    step adapts towards 0.574 acceptance. Per-step acceptance is a mean over 40·2 proposals
    (sd <= 0.06), so the last-15-step mean within 0.2 of the target is a wide margin."""
    alg = jaxsample.etd(std_normal, score_fn=jax.grad(std_normal), num_proposals=4,
                        proposal_step=50.0, preconditioner=None,
                        mutation=Mutation(step_size=10.0, adaptation_rate=1.0),
                        proposal_adaptation=ProposalAdaptation(rate=0.3))
    state, info = _quiet_run(alg, _start(1.0, d=5), num_steps=60)
    alpha = np.asarray(info.proposal_step)
    assert alpha[-1] < 0.1 * alpha[0]
    assert abs(float(np.mean(info.acceptance_rate[-15:])) - 0.574) < 0.2
    # without its own adaptation (the default) and not following the mutation step, α stays
    fixed = jaxsample.etd(std_normal, score_fn=jax.grad(std_normal), num_proposals=4,
                          proposal_step=50.0,
                          proposal_adaptation=ProposalAdaptation(follows_mutation=False))
    _, info = _quiet_run(fixed, _start(1.0, d=HEALTHY_D), num_steps=HEALTHY_STEPS)
    np.testing.assert_allclose(info.proposal_step, 50.0, rtol=1e-6)


def test_laplace_fit_gaussian_and_status():
    cov = jnp.array([[2.0, 0.6], [0.6, 1.0]])
    prec = jnp.linalg.inv(cov)
    target = lambda x: -0.5 * (x - 1.0) @ prec @ (x - 1.0)
    fit, info = laplace_preconditioner(target, jnp.zeros(2))
    np.testing.assert_allclose(fit.mode, [1.0, 1.0], atol=1e-4)
    np.testing.assert_allclose(fit.chol @ fit.chol.T, cov, rtol=1e-4)
    assert bool(info.solver.converged) and float(info.damping) == 0.0
    assert not bool(info.nonfinite)


def test_laplace_fit_at_a_non_maximum_is_damped_not_nan():
    """log π = −Σ(x² − 1)²: x = 0 is a stationary point where log π is convex, so BFGS stops
    there and −∇² log π = −4I is negative definite."""
    target = lambda x: -jnp.sum((x**2 - 1.0) ** 2)
    with pytest.warns(RuntimeWarning, match="positive definite"):
        fit, info = laplace_preconditioner(target, jnp.zeros(2))
    assert bool(jnp.all(jnp.isfinite(fit.chol)))
    assert float(info.damping) > 4.0
    assert info.solver.result == RESULTS.not_positive_definite
    assert "positive definite" in RESULTS[info.solver.result]
    jaxsample.etd(target, preconditioner=fit.chol)  # accepted by the sampler


def test_a_capped_laplace_fit_is_reported_under_jit_and_warned_eagerly():
    target = lambda x: -0.5 * jnp.sum((x - 3.0) ** 2 / jnp.array([1.0, 100.0]))
    _, info = jax.jit(lambda x: laplace_preconditioner(target, x, max_iterations=1))(jnp.zeros(2))
    assert info.solver.result == RESULTS.max_iterations_reached
    with pytest.warns(RuntimeWarning, match="laplace_preconditioner's fit did not succeed"):
        laplace_preconditioner(target, jnp.zeros(2), max_iterations=1)


def test_laplace_fit_outside_the_support_raises_eagerly_and_flags_under_jit():
    target = lambda x: jnp.sum(jnp.log(x)) - jnp.sum(x)  # Gamma(2, 1); NaN for x < 0
    start = jnp.full(2, -1.0)
    with pytest.raises(ValueError, match="not finite at the point the optimiser returned"):
        laplace_preconditioner(target, start)
    fit, info = jax.jit(lambda p: laplace_preconditioner(target, p))(start)
    assert bool(info.nonfinite) and bool(jnp.all(jnp.isfinite(fit.chol)))
    assert info.solver.result == RESULTS.nonfinite
