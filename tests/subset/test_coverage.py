"""Stable maximum coverage and common-seed k-subset sampling: laws, bounds and couplings.

Sampler tests share one m = 7, k = 3 shape (so their compilations are shared); relaxation tests
share one batched solve of a 44-element, 14-set instance over (reg, weights) pairs.
"""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxsample import subset

K = 3
X7 = np.array([0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.15])               # sums to 3
X7_FORCED = np.array([1.0, 0.0, 0.6, 0.5, 0.4, 0.3, 0.2])          # a forced-in, a forced-out
NUM_DRAWS = 20_000
P_VALUE = 1e-3          # every statistical test rejects a correct sampler with probability <= 1e-3


@functools.cache
def _sampler(scheme):
    """``NUM_DRAWS`` common-seed draws, compiled once per scheme (``"cp"`` takes log-weights)."""
    if scheme == "cp":
        one = lambda key, theta: subset.conditional_poisson(key, theta, K)[0]
    else:
        one = lambda key, x: subset.correlated_k_subset(key, x, K, scheme=scheme)[0]
    return jax.jit(lambda key, v: jax.vmap(one, (0, None))(jax.random.split(key, NUM_DRAWS), v))


def _draws(scheme, marginals, key):
    """Draws of ``correlated_k_subset(scheme)``; "cp" as fit_weights + conditional_poisson."""
    marginals = jnp.asarray(marginals)
    if scheme == "cp":
        marginals, _ = subset.fit_weights(marginals, K)
    return np.asarray(_sampler(scheme)(key, marginals))


def _z(p_value, tests=1):
    """Two-sided normal quantile with a Bonferroni correction over ``tests``."""
    return float(stats.norm.isf(p_value / (2 * tests)))


def _reference_fit(x, k, steps=60):
    """Conditional Poisson log-weights for marginals x by enumeration (NumPy, small m): the
    exact-coordinate iteration θ ← θ + ½(logit x − logit π) over the free items (x_i = 1 is
    forced in, θ_i = +inf), π summed over all subsets of the free items."""
    forced = x >= 1
    free = np.flatnonzero(~forced)
    slots = k - forced.sum()
    subsets = np.array(list(itertools.combinations(range(free.size), slots)))
    target = np.log(x[free]) - np.log1p(-x[free])
    theta = target.copy()
    for _ in range(steps):
        log_mass = theta[subsets].sum(axis=1)
        mass = np.exp(log_mass - log_mass.max())
        pi = np.zeros(free.size)
        np.add.at(pi, subsets.ravel(), np.repeat(mass / mass.sum(), slots))
        theta += 0.5 * (target - np.log(pi) + np.log1p(-pi))
    full = np.full(x.size, np.inf)
    full[free] = theta
    return full, np.abs(pi - x[free]).max()


def _law(theta, k):
    """Enumerated P(A) ∝ Π_{i∈A} e^{θ_i} (θ = +inf forced in, -inf out): (subsets, probs)."""
    theta = np.asarray(theta)
    forced = np.flatnonzero(theta == np.inf)
    free = np.flatnonzero(np.isfinite(theta))
    subsets = [tuple(sorted((*forced, *rest)))
               for rest in itertools.combinations(free, k - forced.size)]
    log_mass = np.array([theta[list(a)][np.isfinite(theta[list(a)])].sum() for a in subsets])
    probs = np.exp(log_mass - log_mass.max())
    return subsets, probs / probs.sum()


def test_cp_law_equals_enumerated_maximum_entropy_law(x64):
    """m = 7: the sampler's law is P(A) ∝ Π w_i (chi-square, p = 1e-3) with marginals x."""
    theta, info = subset.fit_weights(jnp.asarray(X7), K)
    assert bool(info.solver.converged) and float(info.residual) < 1e-9
    subsets, probs = _law(theta, K)
    marginals = [sum(p for a, p in zip(subsets, probs, strict=True) if i in a) for i in range(7)]
    np.testing.assert_allclose(marginals, X7, atol=1e-9)

    masks = np.asarray(_sampler("cp")(jax.random.key(0), theta))
    assert np.all(masks.sum(axis=1) == K)
    index = {a: j for j, a in enumerate(subsets)}
    counts = np.bincount([index[tuple(np.flatnonzero(row))] for row in masks],
                         minlength=len(subsets))
    expected = NUM_DRAWS * probs
    assert expected.min() >= 5, "cells too small for the chi-square approximation"
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(statistic, len(subsets) - 1) > P_VALUE, statistic


@pytest.mark.parametrize("scheme", subset.ksubset.SCHEMES)
def test_size_and_inclusion_frequencies(scheme, x64):
    """|A| = k (cp, systematic) or E|A| = k (independent); frequencies = marginals (z, p = 1e-3)."""
    masks = _draws(scheme, X7_FORCED, jax.random.key(1))
    sizes = masks.sum(axis=1)
    if scheme == "independent":
        sd = math.sqrt((X7_FORCED * (1 - X7_FORCED)).sum() / NUM_DRAWS)
        assert abs(sizes.mean() - K) <= _z(P_VALUE) * sd
    else:
        assert np.all(sizes == K)
    assert np.all(masks[:, 0]) and not np.any(masks[:, 1])          # forced in / out
    free = X7_FORCED[2:]
    se = np.sqrt(free * (1 - free) / NUM_DRAWS)
    assert np.all(np.abs(masks[:, 2:].mean(axis=0) - free) <= _z(P_VALUE, free.size) * se)


def test_compiled_batch_equals_eager_calls_bitwise(x64):
    """Same (input, key), same subset: jitted, vmapped conditional Poisson draws equal eager
    per-key calls of correlated_k_subset bitwise; every scheme repeats itself exactly. (jit ==
    eager and vmap == loop of the systematic rounding are the contract entry's checks.)"""
    x = jnp.asarray(X7)
    key = jax.random.key(5)
    batched = _draws("cp", X7, key)
    for i, one in enumerate(jax.random.split(key, NUM_DRAWS)[:2]):
        np.testing.assert_array_equal(batched[i], subset.correlated_k_subset(one, x, K)[0])
    for scheme in subset.ksubset.SCHEMES:
        np.testing.assert_array_equal(_draws(scheme, X7, key), _draws(scheme, X7, key))


def test_common_seed_couples_nearby_marginals(x64):
    """Common keys: E|A Δ A′| = ‖x − y‖₁ exactly for independent thresholds (z, p = 1e-3), and far
    below the fresh-key value for the exact-size schemes."""
    direction = np.array([1.0, -1.0, 0.5, -0.5, 0.0, 0.25, -0.25])
    y = X7 + 0.05 * direction                  # zero-sum, ‖x − y‖₁ = 0.175
    distance = np.abs(X7 - y).sum()
    for scheme in subset.ksubset.SCHEMES:
        a = _draws(scheme, X7, jax.random.key(2))
        b = _draws(scheme, y, jax.random.key(2))
        fresh = _draws(scheme, y, jax.random.key(3))
        common = (a != b).sum(axis=1)
        if scheme == "independent":
            p = np.abs(X7 - y)                  # item i flips iff U_i falls between x_i and y_i
            sd = math.sqrt((p * (1 - p)).sum() / common.size)
            assert abs(common.mean() - distance) <= _z(P_VALUE) * sd
        assert common.mean() <= 0.25 * (a != fresh).sum(axis=1).mean(), scheme


@pytest.fixture(scope="module")
def instance():
    """A 40-element, 14-set instance (+4 absent elements for add-neighbours) and its relaxations.

    One batched solve over (reg, weights): the base weights at several reg values, then delete- and
    add-neighbours at reg = REG_STABLE, then one NaN weight (nonfinite flag under a trace).
    """
    rng = np.random.default_rng(0)
    n, extra, m = 40, 4, 14
    dense = rng.random((n + extra, m)) < 0.2
    weights = np.r_[rng.uniform(0.5, 1.5, n), np.zeros(extra)]
    regs = [0.05, 0.3, 100.0, 1e4]
    reg_stable = 1.0
    deleted = [e for e in np.argsort(-dense.sum(axis=1)) if e < n][:4]
    neighbours = []
    for e in deleted:
        w = weights.copy()
        w[e] = 0.0
        neighbours.append((e, w))
    for e in range(n, n + extra):
        w = weights.copy()
        w[e] = 1.0
        neighbours.append((e, w))
    nan_weights = weights.copy()
    nan_weights[0] = np.nan
    batch_regs = regs + [reg_stable] * (1 + len(neighbours)) + [1.0]
    batch_weights = [weights] * (len(regs) + 1) + [w for _, w in neighbours] + [nan_weights]
    with jax.enable_x64(True):
        incidence = jnp.asarray(dense)

        def solve(reg, w):   # tolerance 0: all 2000 steps (those at reg >= 100 stop at gap 0)
            return subset.max_coverage_relaxation(incidence, 4, reg=reg, weights=w,
                                                  num_steps=2000, tolerance=0.0)

        xs, infos = jax.jit(jax.vmap(solve))(jnp.asarray(batch_regs),
                                             jnp.asarray(np.stack(batch_weights)))
    xs, infos = np.asarray(xs), jax.tree.map(np.asarray, infos)
    subsets = list(itertools.combinations(range(m), 4))
    masks = np.zeros((len(subsets), m), bool)
    for j, a in enumerate(subsets):
        masks[j, list(a)] = True
    covers = weights @ ((dense.astype(float) @ masks.T) > 0)
    return dict(dense=dense, weights=weights, regs=regs, reg_stable=reg_stable, xs=xs,
                infos=infos, neighbours=neighbours, masks=masks, covers=covers, k=4, m=m)


def test_relaxation_feasible_and_large_reg_limit(instance):
    """x* ∈ Δ_k, x* > 0, H <= k log(m/k); reg → ∞: |x_i − k/m| <= (k/m)(e^{G/reg} − 1) → 0."""
    k, m = instance["k"], instance["m"]
    spans = []
    for j, reg in enumerate(instance["regs"]):
        x = instance["xs"][j]
        assert abs(x.sum() - k) < 1e-9 and np.all(x > 0) and np.all(x <= 1)
        assert instance["infos"].entropy[j] <= k * math.log(m / k) + 1e-9
        assert not instance["infos"].nonfinite[j]
        if reg >= 100:
            biggest_set = (instance["weights"][:, None] * instance["dense"]).sum(axis=0).max()
            assert np.all(np.abs(x - k / m) <= k / m * math.expm1(biggest_set / reg) + 1e-12)
            spans.append(np.abs(x - k / m).max())
    assert spans[1] < spans[0] / 50 and spans[1] < 1e-3


def test_approximation_inequalities_against_brute_force(instance):
    """F(x*) >= OPT − reg k log(m/k) (− gap); exact E_CP cov >= (1 − 1/e)·F(x*) and
    >= (1 − 1/e)(OPT − reg k log(m/k)) by enumeration of the fitted law."""
    k, m = instance["k"], instance["m"]
    opt = instance["covers"].max()
    for j, reg in enumerate(instance["regs"][:2]):
        x, gap = instance["xs"][j], instance["infos"].gap[j]
        floor = opt - reg * k * math.log(m / k)
        assert floor > 0.9 * opt                     # the bound says something here
        assert instance["infos"].relaxed_value[j] >= floor - gap - 1e-9
        theta, residual = _reference_fit(x, k)
        assert residual < 1e-9
        law_subsets, probs = _law(theta, k)
        index = {a: i for i, a in enumerate(itertools.combinations(range(m), k))}
        expected_cover = sum(p * instance["covers"][index[a]]
                             for a, p in zip(law_subsets, probs, strict=True))
        ratio = 1 - 1 / math.e
        assert expected_cover >= ratio * instance["infos"].relaxed_value[j] - 1e-6
        assert expected_cover >= ratio * floor


def test_stability_bound_for_add_and_delete_neighbours(instance):
    """‖x*(I) − x*(I′)‖₁ <= w_e k / reg, up to each solve's certified distance to its optimum."""
    k, reg = instance["k"], instance["reg_stable"]
    base = len(instance["regs"])
    x, slack = instance["xs"][base], instance["infos"].distance_bound[base]
    moved = []
    for j, (e, w) in enumerate(instance["neighbours"]):
        w_e = max(w[e], instance["weights"][e])
        bound = w_e * k / reg
        other = base + 1 + j
        certified = slack + instance["infos"].distance_bound[other]
        assert certified <= 0.05 * bound                 # the solves are accurate enough to tell
        change = np.abs(x - instance["xs"][other]).sum()
        assert change <= bound + certified
        moved.append(change)
    assert max(moved) > 1e-3                              # the neighbours do move x*


def test_nonfinite_weights_under_a_trace_are_flagged(instance):
    """A NaN weight passed under vmap (unchecked) sets CoverageRelaxationInfo.nonfinite, and its
    solver status says so; the finite solves, run for all their steps at tolerance 0, report the
    step cap unless their gap reached 0 (large reg)."""
    from jaxsample import RESULTS

    infos = instance["infos"]
    assert infos.nonfinite[-1]
    assert not np.any(infos.nonfinite[:-1])
    result = np.asarray(infos.solver.result._value)
    assert result[-1] == RESULTS.nonfinite._value
    exact = infos.relative_gap[:-1] == 0
    assert np.all(result[:-1][exact] == RESULTS.successful._value)
    assert np.all(result[:-1][~exact] == RESULTS.max_iterations_reached._value)
    assert np.all(infos.solver.num_iterations[:-1][~exact] == 2000)


def test_sparse_incidence_matches_dense(instance, x64):
    """The padded-index form gives the same relaxation as the dense form (the solver is
    deterministic, so the same key then gives the same subset)."""
    dense = instance["dense"]
    rows = [np.flatnonzero(r) for r in dense]
    indices = np.full((dense.shape[0], max(r.size for r in rows)), -1)
    for e, r in enumerate(rows):
        indices[e, :r.size] = r
    sparse = subset.PaddedIncidence.from_indices(indices, num_sets=dense.shape[1])
    with pytest.warns(RuntimeWarning, match="mirror ascent"):     # tolerance 0: the cap
        x, info = subset.max_coverage_relaxation(sparse, 4, reg=instance["regs"][1],
                                                 weights=jnp.asarray(instance["weights"]),
                                                 num_steps=2000, tolerance=0.0)
    np.testing.assert_allclose(x, instance["xs"][1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(info.gap, instance["infos"].gap[1], rtol=1e-6, atol=1e-12)


def test_correlated_k_subset_reports_its_fit(x64):
    """The rounding returns the status of its weight fit (the fit_weights one), never drops it: a
    fit stopped after one iteration short of its tolerance says so; the fit-free schemes report
    0 iterations and success."""
    x, key = jnp.asarray(X7), jax.random.key(2)
    _, fit = subset.fit_weights(x, K)
    mask, info = subset.correlated_k_subset(key, x, K)
    assert isinstance(info, subset.KSubsetInfo) and int(mask.sum()) == K
    assert float(info.residual) == float(fit.residual) <= 1e-10
    assert int(info.solver.num_iterations) == int(fit.solver.num_iterations) > 1
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    with pytest.warns(RuntimeWarning, match="weight fit"):
        _, short = subset.correlated_k_subset(key, x, K, tolerance=1e-12, max_iterations=1)
    assert not bool(short.solver.converged) and int(short.solver.num_iterations) == 1
    assert float(short.residual) > 1e-12
    _, none = subset.correlated_k_subset(key, x, K, scheme="systematic")
    assert int(none.solver.num_iterations) == 0 and bool(none.solver.converged)
    assert float(none.residual) == 0.0


def test_progress_meter_reports_the_mirror_steps_and_changes_nothing():
    """``progress=`` reports every ``every`` mirror steps from inside the compiled loop; the
    result is bitwise that of the call without a meter."""
    import io

    import jaxsample

    incidence = np.random.default_rng(3).random((30, 9)) < 0.3
    out = io.StringIO()
    meter = jaxsample.TextProgress(every=5, file=out)
    kwargs = dict(reg=0.5, num_steps=20, gap_tolerance=0.0, scheme="systematic")
    with pytest.warns(RuntimeWarning):       # tolerance 0: the 20-step cap is reached
        mask, info = subset.stable_max_coverage(jax.random.key(0), incidence, 3,
                                                progress=meter, **kwargs)
    jax.effects_barrier()
    assert meter.steps_reported == [5, 10, 15, 20]
    with pytest.warns(RuntimeWarning):
        plain_mask, plain = subset.stable_max_coverage(jax.random.key(0), incidence, 3,
                                                       **kwargs)
    np.testing.assert_array_equal(mask, plain_mask)
    np.testing.assert_array_equal(info.marginals, plain.marginals)
    # one solver status: the 20 mirror steps, then the (absent) fit of the systematic rounding
    assert int(info.solver.num_iterations) == 20 and not bool(info.solver.converged)
    with pytest.raises(TypeError, match="progress"):
        subset.max_coverage_relaxation(incidence, 3, reg=0.5, progress="bar")


def _result(stats):
    from jaxsample import RESULTS

    return RESULTS[stats.result].split(";")[0] or "successful"


_CAPPED = "did not converge within max_iterations"


def _no_warning(fn):
    """``fn()`` with warnings turned into errors: a traced call must not warn."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


def test_default_steps_reach_the_relative_gap_at_the_issue_size():
    """n = 3000 elements, m = 120 sets, k = 10, reg = 0.3 (a skewed random set system): the
    former fixed 500 steps stopped at a duality gap of 126 (relative 0.07) reported as success;
    the default cap chosen from reg runs until the relative gap is <= 1e-3 and says so."""
    from jaxsample.datasets import random_instance

    inst = random_instance(0, 3000, 120, 10, num_neighbours=2)
    incidence = subset.PaddedIncidence.from_indices(inst.indices[:3000], num_sets=120)
    x, info = _no_warning(lambda: subset.max_coverage_relaxation(incidence, 10, reg=0.3))
    assert bool(info.solver.converged) and float(info.relative_gap) <= 1e-3
    assert float(info.gap) <= 1e-3 * (float(info.objective) + float(info.gap)) * (1 + 1e-5)
    assert 500 < int(info.solver.num_iterations) <= 8000 / 0.3 + 1


@pytest.fixture(scope="module")
def small_instance():
    rng = np.random.default_rng(44)
    return jnp.asarray(rng.random((60, 12)) < 0.25)


def test_relaxation_short_of_its_gap_is_reported(small_instance):
    """5 mirror steps at reg = 0.3 miss the relative gap 1e-3: max_iterations_reached in the
    Info under jit (no warning), one RuntimeWarning eagerly; a met tolerance is successful."""
    solve = jax.jit(lambda inc: subset.max_coverage_relaxation(inc, 3, reg=0.3, num_steps=5))
    _, info = _no_warning(lambda: solve(small_instance))
    assert _result(info.solver) == _CAPPED and int(info.solver.num_iterations) == 5
    assert float(info.relative_gap) > 1e-3
    with pytest.warns(RuntimeWarning, match="max_coverage_relaxation") as record:
        _, eager = subset.max_coverage_relaxation(small_instance, 3, reg=0.3, num_steps=5)
    assert len(record) == 1 and _result(eager.solver) == _CAPPED
    _, met = _no_warning(lambda: subset.max_coverage_relaxation(small_instance, 3, reg=0.3))
    assert bool(met.solver.converged) and float(met.relative_gap) <= 1e-3
    assert int(met.solver.num_iterations) < 8000 / 0.3


def test_stable_coverage_short_of_its_gap_or_fit_is_reported(small_instance):
    """stable_max_coverage reports the first failure of its two solves: the relaxation's step
    cap, else the fit's; under jit in the Info, eagerly as one warning."""
    key = jax.random.key(4)
    solve = jax.jit(lambda key, inc: subset.stable_max_coverage(key, inc, 3, reg=0.3,
                                                                num_steps=5))
    _, info = _no_warning(lambda: solve(key, small_instance))
    assert _result(info.solver) == _CAPPED and float(info.relative_gap) > 1e-3
    with pytest.warns(RuntimeWarning, match="stable_max_coverage") as record:
        subset.stable_max_coverage(key, small_instance, 3, reg=0.3, num_steps=5)
    assert len(record) == 1
    # the relaxation converges, the fit is stopped after one iteration (its jit path: above)
    with pytest.warns(RuntimeWarning, match="stable_max_coverage") as record:
        _, info = subset.stable_max_coverage(key, small_instance, 3, reg=0.3, tolerance=1e-12,
                                             max_iterations=1)
    assert len(record) == 1
    assert _result(info.solver) == _CAPPED and float(info.relative_gap) <= 1e-3
    assert float(info.fit_residual) > 1e-12


def test_fit_short_of_its_tolerance_is_reported(x64):
    """fit_weights and correlated_k_subset stopped after one fixed-point iteration, far from
    tolerance 1e-12: max_iterations_reached under jit (no warning), one warning eagerly."""
    x = jnp.asarray([0.9, 0.7, 0.5, 0.35, 0.3, 0.15, 0.1])          # sums to 3
    fit = jax.jit(lambda x: subset.fit_weights(x, K, tolerance=1e-12, max_iterations=1))
    _, info = _no_warning(lambda: fit(x))
    assert _result(info.solver) == _CAPPED and float(info.residual) > 1e-12
    with pytest.warns(RuntimeWarning, match="fit_weights") as record:
        subset.fit_weights(x, K, tolerance=1e-12, max_iterations=1)
    assert len(record) == 1
    draw = jax.jit(lambda key, x: subset.correlated_k_subset(key, x, K, tolerance=1e-12,
                                                             max_iterations=1))
    _, info = _no_warning(lambda: draw(jax.random.key(0), x))
    assert _result(info.solver) == _CAPPED
    with pytest.warns(RuntimeWarning, match="correlated_k_subset") as record:
        subset.correlated_k_subset(jax.random.key(0), x, K, tolerance=1e-12, max_iterations=1)
    assert len(record) == 1
    _, met = _no_warning(lambda: subset.fit_weights(x, K))
    assert bool(met.solver.converged) and float(met.residual) <= 1e-10
