"""Gaussian samplers from smoothed-score (resolvent) oracles.

- :mod:`jaxsample.gaussian.resolvent` — draws ``N(m, Λ⁻¹)`` from smoothed scores alone by a
  rational quadrature of ``Λ^{-1/2}``: ``sample(key, oracle, ...) -> (x, info)``.
"""

from jaxsample.gaussian import resolvent as resolvent
from jaxsample.gaussian.resolvent import *  # noqa: F403  (the family's one method, re-exported)
from jaxsample.gaussian.resolvent import __all__ as _method_names

__all__ = ["resolvent", *_method_names]
