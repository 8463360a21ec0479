"""The ``jaxsample demo`` main job: one section per method, discovered from this package.

A section is a module in ``jaxsample/demo/`` (name not starting with ``_``) that defines
``SECTION = Section(...)``. Its ``run(key, outdir)`` returns a :class:`SectionReport`: a small
comparison table, the figures it wrote into ``outdir``, and a one-line note. Sections run in
``order``; each must finish in well under a minute on 2 CPU cores with its built-in defaults.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax

from jaxsample.report import markdown_table

__all__ = ["Section", "SectionReport", "available_sections", "run_demo"]


@dataclass(frozen=True)
class SectionReport:
    """What a demo section shows: a table (``headers``, ``rows``), figures written, a note."""

    headers: Sequence[str]
    rows: Sequence[Sequence]
    figures: Sequence[Path] = field(default_factory=tuple)
    note: str = ""


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


def run_demo(outdir: Path, *, seed: int = 0, only: Sequence[str] | None = None, echo=print) -> dict:
    """Runs the demo sections, prints their tables, returns ``{name: SectionReport}``."""
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
    echo(f"jaxsample demo on {jax.default_backend().upper()} ({jax.device_count()} device(s)); "
         f"figures go to {outdir.resolve()}")
    for index, section in enumerate(sections):
        t0 = time.perf_counter()
        report = section.run(jax.random.fold_in(key, index), outdir)
        elapsed = time.perf_counter() - t0
        echo(f"\n## {section.title}  ({elapsed:.1f}s)\n")
        echo(markdown_table(report.headers, report.rows))
        if report.note:
            echo(f"\n{report.note}")
        for figure in report.figures:
            echo(f"figure: {figure}")
        reports[section.name] = report
    return reports
