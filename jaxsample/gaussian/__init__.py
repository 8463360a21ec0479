"""Gaussian samplers from smoothed-score (resolvent) oracles.

- :mod:`jaxsample.gaussian.resolvent` — draws ``N(m, Λ⁻¹)`` from smoothed scores alone by a
  rational quadrature of ``Λ^{-1/2}``: ``sample(key, oracle, ...) -> (x, info)``, and the oracle
  :class:`SmoothedScoreOracle`.
- :mod:`jaxsample.gaussian.baselines` — gradient-only Chebyshev and Lanczos samplers, and the exact
  Cholesky reference, with the same query accounting.
"""

from jaxsample.gaussian import baselines as baselines
from jaxsample.gaussian import resolvent as resolvent
from jaxsample.gaussian._common import GaussianInfo as GaussianInfo
from jaxsample.gaussian.baselines import chebyshev_sample as chebyshev_sample
from jaxsample.gaussian.baselines import cholesky_sample as cholesky_sample
from jaxsample.gaussian.baselines import lanczos_sample as lanczos_sample
from jaxsample.gaussian.resolvent import SmoothedScoreOracle as SmoothedScoreOracle
from jaxsample.gaussian.resolvent import sample as sample
from jaxsample.gaussian.resolvent import transform_noise as transform_noise

__all__ = [
    "GaussianInfo",
    "SmoothedScoreOracle",
    "baselines",
    "chebyshev_sample",
    "cholesky_sample",
    "lanczos_sample",
    "resolvent",
    "sample",
    "transform_noise",
]
