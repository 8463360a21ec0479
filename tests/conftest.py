"""Test-wide JAX settings, as in Equinox: strict dtype and rank promotion, fake CPU devices.

XLA_FLAGS must be set before JAX initialises its backends, hence before any import of jax.
"""

import os
import shutil
import tempfile

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

import jax
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

_CACHE_ENV = "JAXSAMPLE_TEST_COMPILATION_CACHE"


def pytest_configure(config):
    """One persistent compilation cache per test run, shared by its xdist workers.

    Tests, contract entries and doctests compile many identical programs from different ``jit``
    wrappers (and in different worker processes); the cache compiles each once. The directory
    is made by the controlling process before the workers start (they inherit it through the
    environment) and removed when the run ends.
    """
    if not hasattr(config, "workerinput"):
        os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="jaxsample-tests-jit-")
    jax.config.update("jax_compilation_cache_dir", os.environ[_CACHE_ENV])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ.pop(_CACHE_ENV), ignore_errors=True)


@pytest.fixture
def x64():
    """Runs the test with 64-bit types enabled (float64 arrays stay float64)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """Parametrises a test over float32 and float64 (x64 enabled for the latter)."""
    if request.param == "float64":
        with jax.enable_x64(True):
            yield jax.numpy.float64
    else:
        yield jax.numpy.float32
