"""Every method's defaults at growing budgets beside the Monte Carlo floor (the ``defaults`` table).

The entries are the convergence registry's (``tests/convergence/``, one file per method module,
the same problems and statistics the test suite asserts on): each runs a public call with every
option at its default except the budget knob, on a problem with an exact answer, and reports its
error at each budget beside the floor, the same statistic computed from exact draws of the same
size. "converges" is the registry's verdict: at the largest budget the mean excess over the floor
is within ``slack x floor + atol + 3.09 se`` (one-sided, p = 0.001) and more budget did not make
it worse; "limit" marks a method whose documented limit is flagged by its Info. Quality only: no
timing, so the load does not matter.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from harness import BenchTable, Row

_TESTS = Path(__file__).resolve().parents[1] / "tests"


def _registry():
    if str(_TESTS) not in sys.path:
        sys.path.insert(0, str(_TESTS))
    modules = [importlib.import_module(f"convergence.{info.name}")
               for info in pkgutil.iter_modules([str(_TESTS / "convergence")])]
    return [(m.__name__.rsplit(".", 1)[-1], m.ENTRIES) for m in modules]


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def run(size: str) -> list[BenchTable]:
    import importlib.util

    registry = _registry()  # puts tests/ on the path first
    from convergence import measure

    rows, notes, families = [], [], set()
    for module, entries in registry:
        # quick: the first entry of each family (CI-sized); full and gpu: every entry
        family = module.split("_")[0]
        if size == "quick" and family in families:
            continue
        families.add(family)
        for entry in entries[:1] if size == "quick" else entries:
            if any(importlib.util.find_spec(p) is None for p in entry.requires):
                rows.append(Row(entry.name, module, {"converges": "skipped (missing "
                                                     f"{', '.join(entry.requires)})"}))
                continue
            m = measure(entry)
            if entry.limit is not None:
                verdict = "limit (documented, flagged)"
            else:
                verdict = "yes" if m.converged else "NO"
            rows.append(Row(entry.name, module, {
                "budget knob": entry.knob,
                "budgets": " / ".join(str(b) for b in entry.budgets),
                "error (mean over seeds)": " / ".join(_fmt(m.mean(b)) for b in entry.budgets),
                "floor": _fmt(m.floor_mean),
                "seeds": entry.seeds,
                "converges": verdict,
            }))
            notes.append(f"{entry.name}: {entry.problem}; floor = {entry.floor_formula}")
    missed = [r.case for r in rows if r.metrics.get("converges") == "NO"]
    notes.insert(0, "converges: at the largest budget, mean(error - floor) <= slack x floor + "
                    "atol + 3.09 se (slack 0.25 unless the entry says otherwise), and the "
                    "largest budget's error is not above the smallest's by more than 3.09 se")
    notes.insert(1, "entries that do not converge: " + (", ".join(missed) if missed else "none"))
    return [BenchTable("Defaults: error at three or more budgets beside the Monte Carlo floor",
                       rows, notes=notes)]
