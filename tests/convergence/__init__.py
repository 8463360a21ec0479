"""The convergence registry: every method's *defaults*, run at growing budgets on a problem with
an exact answer, must bring its error down to the Monte Carlo floor.

Each method module adds ``tests/convergence/<family>_<module>.py`` defining ``ENTRIES``, a list of
:class:`Entry`; ``tests/test_convergence.py`` discovers the files (no hand list) and
``bench/bench_defaults.py`` reads the same entries to write the ``defaults`` table.

An entry runs the public call *as a user would*, with every option left at its default except the
budget knob (``num_steps``, ``num_samples``, ``max_iterations``, …) and what the problem itself
must supply (the density, the denoiser, the data). The problems are not those the method's own
tests use, so the registry measures the defaults rather than the cases they were tuned on.

The statistic and its floor
    ``error(budget, keys)`` returns one error per key (a TV distance of marginals, a relative
    error of a covariance, a duality gap, …). ``floor(keys)`` returns the *same statistic* computed
    from exact draws of the same size (a multinomial sample of the true law, exact Gaussian draws):
    what a perfect sampler would score, so a sampler has converged when its error is the floor's,
    up to Monte Carlo error. Deterministic problems (an optimum, a closed form) have floor 0 and
    state their solver tolerance as ``atol``.

The verdict, with its error budget (one-sided tests at ``Z = 3.09``, p = 0.001 each)
    At the largest budget, over the ``seeds`` keys, with ``d = error - floor`` per key:
    ``mean(d) <= slack * mean(floor) + atol + Z * se(d)``. ``slack`` (default 0.25) is the
    excess over the floor still called converged: a discretisation bias of a quarter of the
    sampling noise is invisible in use. The trend: the error at the largest budget may not exceed
    the error at the smallest by more than ``Z`` standard errors (more budget never hurts).

A documented limit
    A method whose error stops above the floor by design passes only if its documentation states
    the limit and its Info reports it: ``limit`` names the docs page and a phrase that must appear
    there, and ``limit_reported(keys)`` must return True (the Info flag is raised). The verdict is
    then not asserted (the test runs only the flag's check); the bench's table shows the errors
    and the entry as "limit (documented, flagged)".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

Z = 3.09  # one-sided normal quantile at p = 0.001


@dataclasses.dataclass(frozen=True)
class Limit:
    """A documented limit: ``page`` (a path under ``docs/``) contains ``phrase``, and
    ``reported(keys) -> bool`` says the method's Info raised its flag on the entry's problem."""

    page: str
    phrase: str
    reported: Callable[[np.ndarray], bool]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One method's defaults on one problem with an exact answer.

    Attributes:
        name: registry id shown in test names (``"diffusion.shs/product-law"``).
        covers: the public callables whose defaults the entry runs, family-qualified as reached
            from ``jaxsample`` (``"diffusion.shs.sample"``, ``"decision.SphericalLinearBO"``).
        problem: one line: the problem and its exact answer.
        knob: the budget argument's name (``"num_steps"``).
        budgets: three or more increasing values of the knob.
        error: ``error(budget, keys) -> (len(keys),)`` errors of the defaults at that budget.
        floor: ``floor(keys) -> (len(keys),)`` the same statistic from exact draws (zeros for a
            deterministic problem).
        floor_formula: how the floor is computed (shown in the bench table's notes).
        seeds: number of keys (fixed: ``jax.random.split(jax.random.key(20261207), seeds)``).
        slack: allowed excess over the floor, as a fraction of the floor.
        atol: allowed absolute excess (a deterministic problem's solver tolerance).
        limit: a documented limit instead of convergence (see the module docstring).
        requires: optional packages the entry needs; its test skips where one is missing.
    """

    name: str
    covers: tuple[str, ...]
    problem: str
    knob: str
    budgets: tuple[int, ...]
    error: Callable[[int, np.ndarray], np.ndarray]
    floor: Callable[[np.ndarray], np.ndarray]
    floor_formula: str
    seeds: int = 5
    slack: float = 0.25
    atol: float = 0.0
    limit: Limit | None = None
    requires: tuple[str, ...] = ()


def keys(entry: Entry):
    """The entry's fixed keys (one per seed)."""
    import jax

    return jax.random.split(jax.random.key(20261207), entry.seeds)


def floor_keys(entry: Entry):
    """Independent fixed keys for the floor's exact draws."""
    import jax

    return jax.random.split(jax.random.key(20261208), entry.seeds)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """An entry's errors at each budget (``errors[b]`` has one value per seed) and its floor."""

    entry: Entry
    errors: dict[int, np.ndarray]
    floor: np.ndarray

    def mean(self, budget: int) -> float:
        return float(np.mean(self.errors[budget]))

    @property
    def floor_mean(self) -> float:
        return float(np.mean(self.floor))

    def _se(self, x: np.ndarray) -> float:
        return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0

    def excess(self) -> tuple[float, float]:
        """``(mean(d), allowed)`` at the largest budget, ``d = error - floor`` per seed."""
        top = self.errors[self.entry.budgets[-1]]
        d = top - self.floor
        allowed = self.entry.slack * self.floor_mean + self.entry.atol + Z * self._se(d)
        return float(np.mean(d)), allowed

    def trend(self) -> tuple[float, float]:
        """``(mean(top) - mean(bottom), allowed)``: the largest budget's error over the
        smallest's, allowed ``Z`` standard errors (plus ``atol``)."""
        lo, hi = self.errors[self.entry.budgets[0]], self.errors[self.entry.budgets[-1]]
        se = float(np.sqrt(self._se(lo) ** 2 + self._se(hi) ** 2))
        return float(np.mean(hi) - np.mean(lo)), Z * se + self.entry.atol

    @property
    def converged(self) -> bool:
        (d, allowed), (t, t_allowed) = self.excess(), self.trend()
        return d <= allowed and t <= t_allowed


def measure(entry: Entry) -> Measurement:
    """Runs ``entry`` at every budget on its fixed keys."""
    ks, fks = keys(entry), floor_keys(entry)
    errors = {b: np.asarray(entry.error(b, ks), float).reshape(-1) for b in entry.budgets}
    floor = np.asarray(entry.floor(fks), float).reshape(-1)
    for b, e in errors.items():
        if e.shape != (entry.seeds,) or not np.all(np.isfinite(e)):
            raise AssertionError(f"{entry.name}: error({b}) must be {entry.seeds} finite values, "
                                 f"got {e}")
    if floor.shape != (entry.seeds,) or not np.all(np.isfinite(floor)):
        raise AssertionError(f"{entry.name}: floor must be {entry.seeds} finite values, got "
                             f"{floor}")
    return Measurement(entry, errors, floor)


def tv_counts(counts: np.ndarray, probs: np.ndarray) -> float:
    """Total-variation distance ``0.5 * sum |counts / n - probs|`` along the last axis, averaged
    over any leading axes (per-position marginals)."""
    counts = np.asarray(counts, float)
    freq = counts / counts.sum(axis=-1, keepdims=True)
    return float(np.mean(0.5 * np.abs(freq - np.asarray(probs, float)).sum(axis=-1)))


def multinomial_tv_floor(keys_, probs: np.ndarray, num_samples: int) -> np.ndarray:
    """The TV floor of per-row marginals: for each key, ``num_samples`` exact categorical draws of
    every row of ``probs`` (shape ``(..., K)``), and their ``tv_counts`` against ``probs``."""
    probs = np.asarray(probs, float)
    out = []
    for k in keys_:
        import jax

        seed = int(jax.random.randint(k, (), 0, 2**31 - 1))
        rng = np.random.default_rng(seed)
        rows = probs.reshape(-1, probs.shape[-1])
        counts = np.stack([rng.multinomial(num_samples, p / p.sum()) for p in rows])
        out.append(tv_counts(counts, rows))
    return np.asarray(out)
