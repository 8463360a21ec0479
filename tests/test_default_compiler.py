"""Bit-for-bit claims at XLA's default compiler settings.

The suite compiles at the backend's optimisation level 0 with the legacy fusion emitter
(tests/_xla.py: about half the compile time), which may order a float reduction differently in
two programs that XLA's defaults compile to the same code. Tests that compare two differently
compiled programs bit for bit (flat vs pytree positions, chunked vs dense batches, a recorded hash)
carry the ``default_compiler`` mark: the suite skips them and this test runs them in a child pytest
at XLA's defaults, so the claims are checked as users compile them.
"""

import os
import subprocess
import sys

import pytest
from _xla import FAST_COMPILE, flags_without


def test_bitwise_claims_hold_at_the_default_compiler_settings(request, fast_compile):
    if not fast_compile:
        pytest.skip("this run compiles at XLA's defaults: the marked tests ran in it")
    marked = [item.nodeid for item in request.session.items
              if "default_compiler" in item.keywords]
    if not marked:
        pytest.skip("no default_compiler test was collected in this session")
    defaults = flags_without(*(flag.split("=")[0] for flag in FAST_COMPILE))
    env = {**os.environ, "XLA_FLAGS": " ".join(defaults), "JAXSAMPLE_TESTS_DEFAULT_COMPILER": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-m", "default_compiler", *marked],
                          cwd=request.config.rootpath, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"{len(marked)} passed" in done.stdout, done.stdout[-2000:]
