"""Demo section: stable maximum coverage, coverage against sensitivity across ``reg``.

A disc-cover instance (points in the unit square, each set the points within a radius of a centre:
many near-equal sets, where greedy's picks hinge on small differences) and its one-element
neighbours. For each entropic weight ``reg``: the expected coverage of the stable algorithm's subset
and its sensitivity ``E_seed |A(I) Δ A(I′)|`` over common seeds (conditional Poisson rounding);
greedy (deterministic) is the unstable reference point. The example and the benchmark add the
independent-threshold rounding.

The instance (:func:`jaxsample.datasets.disc_instance`) and the study
(:func:`jaxsample.subset.baselines.sensitivity_study`) come from the library, shared with
``examples/stable_coverage.py`` and ``bench/bench_coverage.py``; the figure is drawn here, so that
its reference line (95% of greedy's coverage) carries a legend entry like every demo figure.
"""

from __future__ import annotations

from pathlib import Path

import jax

from jaxsample.datasets import disc_instance
from jaxsample.demo import Section, SectionReport
from jaxsample.subset.baselines import coverage_figure, sensitivity_study


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    k = 8
    instance = disc_instance(0, 3000, 120, k, num_neighbours=6)
    study = sensitivity_study(instance, k, (0.01, 0.1), num_seeds=32, key=key,
                              roundings=("cp",))
    greedy = study["greedy"]
    rows = [["greedy", "-", greedy["coverage"], greedy["sensitivity"],
             greedy["max_sensitivity"], "-"]]
    for row in study["stable"]:
        rows.append([f"stable, c={row['fraction']:g}", row["reg"], row["cp_coverage"],
                     row["cp_sensitivity"], row["cp_max_sensitivity"], row["relaxed_distance"]])
    path = coverage_figure(study, Path(outdir) / "coverage_sensitivity.png",
                           f"disc cover, n=3000, m=120, k={k}, 6 neighbours, 32 seeds")
    note = ("reg = c·cov_greedy/(k log(m/k)); sensitivity = E_seed|A(I) Δ A(I′)| with common "
            "seeds (greedy: |A(I) Δ A(I′)|), mean and max over 6 one-element neighbours (two of "
            "them flip a close greedy pick); conditional Poisson rounding; the relaxation stops "
            "at a relative duality gap of 1e-3.")
    return SectionReport(["method", "reg", "coverage", "sensitivity (mean)", "sensitivity (max)",
                          "‖x*(I) − x*(I′)‖₁"], rows, [path], note)


SECTION = Section(name="coverage", title="Stable maximum coverage (coverage vs sensitivity)",
                  run=_run, order=75)
