"""The one solver status: RESULTS members, SolverStats.of, and the optimistix/lineax mappings."""

import jax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx
import pytest

from jaxsample import RESULTS, SolverStats
from jaxsample._solver import from_lineax, from_optimistix


def test_every_failure_member_says_how_to_fix_it():
    for name in ("max_iterations_reached", "nonfinite", "diverged", "not_positive_definite",
                 "singular"):
        assert len(RESULTS[getattr(RESULTS, name)]) > 20, name
    assert RESULTS[RESULTS.successful] == ""


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_of_is_elementwise_and_nonfinite_wins(shape):
    n = jnp.arange(int(jnp.prod(jnp.asarray(shape))) if shape else 1).reshape(shape)
    stats = jax.jit(lambda n: SolverStats.of(n, converged=n % 2 == 0, nonfinite=n == 3))(n)
    assert stats.num_iterations.dtype == jnp.int32
    expect = (n % 2 == 0) & (n != 3)
    assert jnp.array_equal(stats.converged, expect)
    assert jnp.array_equal(stats.result == RESULTS.nonfinite, n == 3)


def test_vmap_and_scan_carry_the_status():
    stats = jax.vmap(lambda n: SolverStats.of(n, converged=n < 2))(jnp.arange(4))
    assert stats.converged.tolist() == [True, True, False, False]


def test_optimistix_mapping():
    f = lambda x, _: jnp.sum((x - 1.0) ** 2 * jnp.arange(1.0, 4.0))
    ok = optx.minimise(f, optx.BFGS(rtol=1e-8, atol=1e-8), jnp.zeros(3), max_steps=100,
                       throw=False)
    capped = optx.minimise(f, optx.BFGS(rtol=1e-8, atol=1e-8), jnp.zeros(3), max_steps=1,
                           throw=False)
    assert bool(from_optimistix(ok).converged)
    stats = from_optimistix(capped)
    assert RESULTS[stats.result] == RESULTS[RESULTS.max_iterations_reached]
    assert int(stats.num_iterations) == 1


def test_lineax_mapping():
    op = lx.MatrixLinearOperator(jnp.eye(3))
    assert bool(from_lineax(lx.linear_solve(op, jnp.ones(3), throw=False)).converged)
    singular = lx.linear_solve(lx.MatrixLinearOperator(jnp.zeros((3, 3))), jnp.ones(3),
                               solver=lx.LU(), throw=False)
    assert not bool(from_lineax(singular).converged)


def test_sequential_and_batched_keep_the_first_failure():
    from jaxsample.kernels.solver import batched, sequential

    ok = SolverStats.of(3, converged=jnp.asarray(True))
    capped = SolverStats.of(5, converged=jnp.asarray(False))
    bad = SolverStats.of(2, converged=jnp.asarray(True), nonfinite=jnp.asarray(True))
    both = sequential(ok, capped)
    assert int(both.num_iterations) == 8 and both.result == RESULTS.max_iterations_reached
    assert sequential(capped, bad).result == RESULTS.max_iterations_reached
    assert sequential(ok, ok).result == RESULTS.successful
    batch = jax.tree.map(lambda *v: jnp.stack(v), ok, bad, capped)
    worst = jax.jit(batched)(batch)
    assert int(worst.num_iterations) == 5 and worst.result == RESULTS.nonfinite
    all_ok = batched(jax.tree.map(lambda *v: jnp.stack(v), ok, ok))
    assert int(all_ok.num_iterations) == 3 and all_ok.result == RESULTS.successful
