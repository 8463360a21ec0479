"""XLA_FLAGS for this suite and for the interpreters the tests start."""

import os

# The suite's compile-time settings (tests/conftest.py). The suite compiles thousands of small
# programs that each run for microseconds, so compiling is most of its time: the backend's
# optimisation level 0 skips LLVM's optimisation passes, and the legacy elemental emitter compiles
# a fusion in a fraction of the time of XLA:CPU's MLIR fusion emitters. Measured on the 63
# particles contract tests: backend compilation 51.7 s at the defaults with level 0, 21.5 s with
# the legacy emitter added (the whole file group 69 s -> 38 s). Neither changes what an HLO op
# means; either may order a float reduction differently, which only bit-for-bit comparisons of two
# programs can see (the ``default_compiler`` tests, run at XLA's defaults).
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")

# XLA's default backend optimisation level, for the few programs whose run time, not their
# compilation, is what a test spends: level 0 runs a 100-particle, 50-dimensional ETD program
# ~6x slower (14.3 s against 2.3 s at level 2 or 3; compiling it takes 1.3-1.6 s either way).
_RUN_TIME_OPTIONS = {"xla_backend_optimization_level": 3}


def compiled_for_run_time(fn, *args):
    """``jax.jit(fn)`` compiled for ``args``' shapes at XLA's default optimisation level (the
    suite's level 0 is for the thousands of programs that run for microseconds): call it with
    arrays shaped like ``args``."""
    import jax  # XLA_FLAGS are set before jax is first imported (tests/conftest.py)

    return jax.jit(fn).lower(*args).compile(_RUN_TIME_OPTIONS)


def flags_without(*fragments: str) -> list[str]:
    """This process's XLA_FLAGS less every flag that contains one of ``fragments``."""
    return [flag for flag in os.environ.get("XLA_FLAGS", "").split()
            if not any(fragment in flag for fragment in fragments)]
