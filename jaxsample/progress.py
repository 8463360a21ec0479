"""Progress meters for :func:`jaxsample.run` that stay correct under ``jit``, ``vmap`` and ``grad``.

A meter is an object with a ``report(step, num_steps)`` method that :func:`jaxsample.run` calls
*while tracing* the scan body, with ``step`` a traced 1-based step counter. The base class turns
that into a ``jax.debug.callback`` fired every ``every`` steps (a ``lax.cond`` on the step counter,
which is never batched, so ``vmap`` keeps it a real branch and calls the callback once per step,
however many chains). Under ``pmap`` each device calls it; the host side drops repeats of a step it
has already shown, so every reported step prints one line.

Passing ``progress=None`` (the default) adds nothing at all to the computation.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import TextIO

import jax

from jaxsample._checks import check_int

__all__ = ["ProgressMeter", "TextProgress", "TqdmProgress"]


class ProgressMeter:
    """Base class: subclasses implement the host-side ``on_update`` and ``on_finish``.

    The clock of a run starts when its first step is done, so the times a meter reports leave out
    compilation, unless :meth:`start` was called before the call that compiles: then the first
    run after it counts from that moment.

    Args:
        every: report every ``every`` steps; default ``max(1, num_steps // 10)``.
        label: a name shown with every report (which run, which setting), or ``None``.
    """

    def __init__(self, every: int | None = None, *, label: str | None = None):
        self.every = check_int("every", every, 1, allow_none=True)
        if label is not None and not isinstance(label, str):
            raise TypeError(f"label must be a str or None, got {type(label).__name__}")
        self.label = label
        self._last_step = 0
        self._t0 = 0.0
        self._started_at: float | None = None

    def start(self) -> ProgressMeter:
        """Host side: start the clock now, so the next run's times include its compilation.

        Call it just before ``run`` (or the jitted or vmapped function around it); returns the
        meter, so ``progress=TextProgress(label="h = 0.1").start()`` reads as one expression.
        """
        self._started_at = time.perf_counter()
        self._last_step = 0
        return self

    def report(self, step: jax.Array, num_steps: int) -> None:
        """Traced side: called by :func:`jaxsample.run` once per step inside the scan."""
        every = self.every or max(1, num_steps // 10)
        # step 1 starts the clock on the host; multiples of `every` and the last step are shown
        due = (step % every == 0) | (step == num_steps) | (step == 1)
        # num_steps is static: bind it on the host side, not as a (traced) callback operand
        host_report = functools.partial(self._host_report, num_steps=num_steps, every=every)
        jax.lax.cond(due, lambda s: jax.debug.callback(host_report, s), lambda s: None, step)

    def _host_report(self, step, *, num_steps: int, every: int) -> None:
        step = int(step)
        if step == self._last_step:  # the same step again (one call per device under pmap)
            return
        if step < self._last_step or self._last_step == 0:  # a new run starts
            started, self._started_at = self._started_at, None
            self._t0 = time.perf_counter() if started is None else started
            self.on_start(num_steps)
        self._last_step = step
        elapsed = time.perf_counter() - self._t0
        if step % every == 0 or step == num_steps:
            self.on_update(step, num_steps, elapsed)
        if step == num_steps:
            self.on_finish(num_steps, elapsed)

    def on_start(self, num_steps: int) -> None:
        """Host side: a run begins (its first step is done)."""

    def on_update(self, step: int, num_steps: int, elapsed: float) -> None:
        """Host side: ``step`` of ``num_steps`` done, ``elapsed`` seconds after the first step
        (or after :meth:`start`)."""

    def on_finish(self, num_steps: int, elapsed: float) -> None:
        """Host side: the last step is done."""


class TextProgress(ProgressMeter):
    """Plain-text meter: one line per report, e.g. ``step 50/500 (10%) 1.2s``, or with a label
    ``ULA h=0.05: step 50/500 (10%) 1.2s``.

    Args:
        every: report every ``every`` steps (default: ten reports per run).
        file: stream to write to (default ``sys.stderr``).
        label: shown before every line (which run, which setting), or ``None``.

    Example:
        >>> import jax, jax.numpy as jnp, io, jaxsample
        >>> alg = jaxsample.SamplingAlgorithm(lambda x: x, lambda k, x: (x + 1.0, None))
        >>> out = io.StringIO()
        >>> _ = jaxsample.run(jax.random.key(0), alg, jnp.zeros(()), 4,
        ...                   progress=jaxsample.TextProgress(every=2, file=out))
        >>> jax.effects_barrier(); print(out.getvalue().splitlines()[-1].split()[:2])
        ['step', '4/4']
    """

    def __init__(self, every: int | None = None, file: TextIO | None = None, *,
                 label: str | None = None):
        super().__init__(every, label=label)
        self.file = file
        self.steps_reported: list[int] = []

    def on_start(self, num_steps: int) -> None:
        self.steps_reported = []

    def on_update(self, step: int, num_steps: int, elapsed: float) -> None:
        self.steps_reported.append(step)
        stream = self.file if self.file is not None else sys.stderr
        prefix = "" if self.label is None else f"{self.label}: "
        print(f"{prefix}step {step}/{num_steps} ({100 * step // num_steps}%) {elapsed:.1f}s",
              file=stream)


class TqdmProgress(ProgressMeter):
    """A ``tqdm`` bar (requires the optional ``tqdm`` package).

    Args:
        every: advance the bar every ``every`` steps (default: ten updates per run).
        label: the bar's ``desc`` unless one is given.
        **tqdm_kwargs: passed to ``tqdm.tqdm`` (``desc``, ``leave``, ...).
    """

    def __init__(self, every: int | None = None, *, label: str | None = None, **tqdm_kwargs):
        try:
            import tqdm  # noqa: F401
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("TqdmProgress needs tqdm: pip install tqdm") from err
        super().__init__(every, label=label)
        if label is not None:
            tqdm_kwargs.setdefault("desc", label)
        self.tqdm_kwargs = tqdm_kwargs
        self._bar = None

    def on_start(self, num_steps: int) -> None:
        import tqdm

        self._bar = tqdm.tqdm(total=num_steps, **self.tqdm_kwargs)

    def on_update(self, step: int, num_steps: int, elapsed: float) -> None:
        self._bar.update(step - self._bar.n)

    def on_finish(self, num_steps: int, elapsed: float) -> None:
        self._bar.close()
