"""Test-wide JAX settings, as in Equinox: strict dtype and rank promotion, fake CPU devices.

XLA_FLAGS must be set before JAX initialises its backends, hence before any import of jax.
"""

import atexit
import importlib.util
import os
import shutil
import tempfile

# One persistent compilation cache for this run, shared by the xdist workers and by the fresh
# interpreters tests start (docs pages, README snippets, the CLI): the controller sets it before
# the workers are spawned, and they inherit it. A fresh directory each run, so nothing is reused
# from an earlier checkout; the process that made it removes it at exit. A size bound makes JAX
# lock the directory (filelock) around reads and writes, so two workers never see a torn entry;
# without filelock the cache stays off.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and importlib.util.find_spec("filelock"):
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxsample-tests-xla-")
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(8 * 2**30)
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.1"
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)

# Four fake CPU devices for the sharding tests, and the compile-time settings of tests/_xla.py
# (the backend's optimisation level 0 and the legacy fusion emitter; measured, the README command
# went from 14 min 43 s at XLA's defaults to 11-12.5 min at level 0 on one 2-core host, and from
# 18 min at level 0 to 10-10.5 min with the emitter added on a slower one). What they can change
# is the order of a float reduction, so tests that compare two differently compiled programs bit
# for bit are marked ``default_compiler`` and run in a child at XLA's defaults
# (tests/test_default_compiler.py). Set a flag yourself to override it;
# JAXSAMPLE_TESTS_DEFAULT_COMPILER=1 runs the whole suite at XLA's defaults.
from _xla import FAST_COMPILE  # noqa: E402  (XLA_FLAGS before jax: no jax import above)

_FLAGS = ["--xla_force_host_platform_device_count=4"]
if os.environ.get("JAXSAMPLE_TESTS_DEFAULT_COMPILER") != "1":
    _FLAGS += FAST_COMPILE
for _flag in _FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
_FAST_COMPILE = any(flag in os.environ["XLA_FLAGS"].split() for flag in FAST_COMPILE)

import jax
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_collection_modifyitems(config, items):
    """Under the suite's compile-time settings, ``default_compiler`` tests are left to the child
    run of tests/test_default_compiler.py."""
    if _FAST_COMPILE:
        skip = pytest.mark.skip(reason="a bit-for-bit claim checked at XLA's default settings by "
                                       "tests/test_default_compiler.py")
        for item in items:
            if "default_compiler" in item.keywords:
                item.add_marker(skip)


_MAX_MAPS = 30_000  # Linux refuses new mappings past vm.max_map_count (65 530 by default)
_teardowns = [0]


@pytest.fixture(autouse=True)
def _bounded_executable_cache():
    """Drops JAX's compiled executables when this process holds too many memory mappings.

    Every XLA:CPU executable keeps a few mappings alive (about three each) for as long as a jit
    cache holds it, and one pytest worker compiles tens of thousands of programs: past the kernel's
    ``vm.max_map_count`` the next compilation fails inside LLVM (a segfault or abort that kills the
    worker). Counting reads /proc/self/maps (about 20 ms at 30 000 lines), so it runs after every
    eighth test; where that file does not exist the fixture does nothing.
    """
    yield
    _teardowns[0] += 1
    if _teardowns[0] % 8:
        return
    try:
        with open("/proc/self/maps", "rb") as maps:
            count = sum(1 for _ in maps)
    except OSError:
        return
    if count > _MAX_MAPS:
        jax.clear_caches()


@pytest.fixture
def fast_compile():
    """Whether this process compiles with one of the suite's compile-time settings."""
    return _FAST_COMPILE


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
