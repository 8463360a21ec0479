"""Shared pieces of the benchmarks: timing, rows, tables.

Every ``bench/bench_*.py`` module defines ``run(size: str) -> list[BenchTable]`` with ``size`` one
of ``SIZES``: ``"quick"`` (CI-sized, seconds), ``"full"`` (the sizes its issue names that fit this
project's 2-core CPU machine) and ``"gpu"`` (the sizes its issue names as large, for one
accelerator). ``bench/run.py`` discovers and runs them in one process and writes one Markdown file.

Timing rule: a function is called once to compile (warm-up), then ``repeats`` more times; the
reported time is the median, each call ending in ``jax.block_until_ready`` on its outputs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax

from jaxsample.report import markdown_table

SIZES = ("quick", "full", "gpu")

# A timing is comparable only when the host was otherwise idle: the 1-minute load average before
# a module starts must be below this (on the 2-core host, 1.5 leaves one core free of other work).
QUIET_LOAD = 1.5


def load_average() -> float:
    """The host's 1-minute load average (0.0 where the OS does not report one)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def wait_for_quiet(threshold: float = QUIET_LOAD, max_wait: float = 180.0,
                   poll: float = 5.0) -> float:
    """Sleeps until the 1-minute load average is below ``threshold`` or ``max_wait`` seconds
    have passed; returns the load average at the end. A bench's own previous module keeps the
    average high for a while after it ends (it decays with a one-minute time constant), so
    each module waits before it starts rather than once per run."""
    deadline = time.monotonic() + max_wait
    load = load_average()
    while load >= threshold and time.monotonic() < deadline:
        time.sleep(poll)
        load = load_average()
    return load


def peak_bytes(fn: Callable, *args, **kwargs) -> int:
    """Compiled temporary + output memory of ``jax.jit(fn)(*args)``, from XLA's memory analysis.

    Works on every backend without running ``fn`` (on CPU there is no live device-memory counter);
    pass ``jax.ShapeDtypeStruct`` arguments to size problems that would not fit.
    """
    compiled = jax.jit(fn, **kwargs).lower(*args).compile()
    stats = compiled.memory_analysis()
    return int(stats.temp_size_in_bytes + stats.output_size_in_bytes)


def device_facts() -> list[str]:
    """Markdown bullet lines naming the device kind, count, memory and the jax/jaxlib versions."""
    import platform

    import jaxlib

    device = jax.devices()[0]
    memory = None
    try:
        stats = device.memory_stats() or {}
        memory = stats.get("bytes_limit")
    except Exception:  # CPU devices have no memory stats
        memory = None
    mem = f", {memory / 2**30:.0f} GiB each" if memory else ""
    return [
        f"- device: {jax.default_backend().upper()} ({device.device_kind}), "
        f"{jax.device_count()} device(s){mem}; host: {platform.machine()}, "
        f"{__import__('os').cpu_count()} CPU cores, Python {platform.python_version()}",
        f"- jax {jax.__version__}, jaxlib {jaxlib.__version__}",
    ]


def time_fn(fn: Callable, *args, repeats: int = 5, **kwargs) -> tuple[float, object]:
    """Median wall time (s) of ``fn(*args, **kwargs)`` after one warm-up call, and its output."""
    out = jax.block_until_ready(fn(*args, **kwargs))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args, **kwargs))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


@dataclass
class Row:
    """One method on one case. ``metrics`` maps a column name to a value (float, int or str).

    ``peer=True`` marks the row the other rows of the same case are compared with; the table's
    ``speed-up`` column is ``peer seconds / seconds`` (above 1: faster than the peer).
    """

    case: str
    method: str
    metrics: dict
    seconds: float | None = None
    peer: bool = False


@dataclass
class BenchTable:
    """A titled table of rows with optional notes (goals met or missed, set-up)."""

    title: str
    rows: list[Row]
    notes: Sequence[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        metric_names: list[str] = []
        for row in self.rows:
            for name in row.metrics:
                if name not in metric_names:
                    metric_names.append(name)
        peer_time = {r.case: r.seconds for r in self.rows if r.peer and r.seconds}
        timed = any(r.seconds is not None for r in self.rows)  # a quality-only table has none
        headers = ["case", "method", *metric_names, *(("time (s)", "speed-up vs peer")
                                                      if timed else ())]
        body = []
        for r in self.rows:
            ratio = None
            if r.seconds and r.case in peer_time:
                ratio = "peer" if r.peer else f"{peer_time[r.case] / r.seconds:.2f}x"
            body.append([r.case, r.method, *(r.metrics.get(m) for m in metric_names),
                         *((r.seconds, ratio) if timed else ())])
        parts = [f"### {self.title}", "", markdown_table(headers, body)]
        if self.notes:
            parts += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(parts)
