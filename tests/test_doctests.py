"""Runs the examples in every public docstring (they are part of the documentation)."""

import doctest
import importlib
import pkgutil

import pytest

import jaxsample
import jaxsample.kernels


def _modules():
    names = []
    for package in (jaxsample, jaxsample.kernels):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name != "jaxsample.__main__":
                names.append(info.name)
    return sorted(set(names))


@pytest.mark.parametrize("module_name", _modules())
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
