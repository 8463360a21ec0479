"""Test-wide JAX settings, as in Equinox: strict dtype and rank promotion, fake CPU devices.

XLA_FLAGS must be set before JAX initialises its backends, hence before any import of jax.
"""

import os

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

import jax
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


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
