"""The ``jaxsample demo`` main job: one section per method, discovered from this package.

A section is a module in ``jaxsample/demo/`` (name not starting with ``_``) that defines
``SECTION = Section(...)``. Its ``run(key, outdir)`` returns a :class:`SectionReport`: a small
comparison table (and more tables where two kinds of rows would share columns), the figures it
wrote into ``outdir``, and a one-line note. Sections run in ``order``; each must finish in well
under a minute on 2 CPU cores with its built-in defaults.

While the demo runs, every figure is read back before it is saved: each panel needs a title and
labelled axes, and a reference line (``axhline``/``axvline``) a legend entry
(:func:`jaxsample.demo._figures.figure_problems`); the problems found are printed and kept in
:attr:`SectionReport.figure_problems`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pkgutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax

from jaxsample.progress import TextProgress
from jaxsample.report import markdown_table

__all__ = ["DEMO_TIME", "Section", "SectionReport", "available_sections", "progress", "run_demo"]

# the whole demo's run time, measured on a quiet 2-core CPU (the README and `jaxsample demo
# --help` quote it; tests/test_readme.py holds them to this one number)
DEMO_TIME = "about 85 s on a 2-core CPU, compilation included"


@dataclass(frozen=True)
class SectionReport:
    """What a demo section shows: a table (``headers``, ``rows``), figures written, a note.

    ``extra_tables`` holds further ``(headers, rows)`` tables, printed after the first, so that
    each column of a table means one thing in every row. ``figure_problems`` is filled in by
    :func:`run_demo`: for each figure saved, what its check found (empty when none).
    """

    headers: Sequence[str]
    rows: Sequence[Sequence]
    figures: Sequence[Path] = field(default_factory=tuple)
    note: str = ""
    extra_tables: Sequence[tuple[Sequence[str], Sequence[Sequence]]] = ()
    figure_problems: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    """A demo section: ``run(key, outdir) -> SectionReport``."""

    name: str
    title: str
    run: Callable[[jax.Array, Path], SectionReport]
    order: int = 100


def available_sections() -> list[Section]:
    """All sections found in this package, in display order."""
    sections = []
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        section = getattr(module, "SECTION", None)
        if isinstance(section, Section):
            sections.append(section)
    return sorted(sections, key=lambda s: (s.order, s.name))


def progress(label: str, every: int | None = None) -> TextProgress:
    """A started text meter for a section's run: each line carries ``label`` (which run, which
    setting) and the time since this call, so it counts compilation too. Lines go to stdout,
    under the section's header."""
    return TextProgress(every=every, file=sys.stdout, label=label).start()


@contextlib.contextmanager
def _checking_figures(record: dict):
    """Every ``Figure.savefig`` in the block first records ``figure_problems`` under its path."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # no figures without matplotlib: nothing to check
        yield
        return
    from jaxsample.demo._figures import figure_problems

    original = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        record[str(fname)] = figure_problems(self)
        return original(self, fname, *args, **kwargs)

    Figure.savefig = savefig
    try:
        yield
    finally:
        Figure.savefig = original


def run_demo(outdir: Path, *, seed: int = 0, only: Sequence[str] | None = None, echo=print) -> dict:
    """Runs the demo sections, prints their tables, returns ``{name: SectionReport}``.

    Each section prints its header first, then its progress lines, its tables, its note and
    figures, and the time it took (compilation included); the demo ends with its total time.
    """
    sections = available_sections()
    if only:
        known = {s.name for s in sections}
        unknown = sorted(set(only) - known)
        if unknown:
            raise ValueError(f"unknown demo section(s) {unknown}; available: {sorted(known)}")
        sections = [s for s in sections if s.name in only]
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    key = jax.random.key(seed)
    reports = {}
    echo(f"jaxsample demo on {jax.default_backend().upper()} ({jax.device_count()} device(s)), "
         f"{len(sections)} section(s); figures go to {outdir.resolve()}")
    start = time.perf_counter()
    for index, section in enumerate(sections):
        echo(f"\n## {section.title}\n")
        sys.stdout.flush()
        t0 = time.perf_counter()
        checks: dict = {}
        with _checking_figures(checks):
            report = section.run(jax.random.fold_in(key, index), outdir)
            jax.effects_barrier()  # the section's progress lines are out before its table
        elapsed = time.perf_counter() - t0
        report = dataclasses.replace(report, figure_problems=checks)
        echo(markdown_table(report.headers, report.rows))
        for headers, rows in report.extra_tables:
            echo("")
            echo(markdown_table(headers, rows))
        if report.note:
            echo(f"\n{report.note}")
        for figure in report.figures:
            echo(f"figure: {figure}")
            for problem in checks.get(str(figure), ()):
                echo(f"  figure check: {problem}")
        echo(f"({section.name}: {elapsed:.1f} s, compilation included)")
        reports[section.name] = report
    total = time.perf_counter() - start
    echo(f"\njaxsample demo: {len(sections)} section(s) in {total:.1f} s "
         f"({total / 60:.1f} min), compilation included")
    return reports
