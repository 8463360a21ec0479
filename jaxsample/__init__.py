"""jaxsample: sampling methods in JAX.

Pure jitted kernels (:mod:`jaxsample.kernels`) composed into samplers that run unchanged on CPU,
GPU and TPU. Iterative samplers follow one convention (BlackJAX's)::

    alg = jaxsample.etd(logdensity_fn, epsilon=0.1)      # -> SamplingAlgorithm(init, step)
    state = alg.init(positions)
    state, info = alg.step(key, state)
    state, trace = jaxsample.run(key, alg, state, num_steps=500)

One-shot samplers are plain functions ``sample(key, ...) -> (samples, info)`` in their modules.
"""

from jaxsample.core import SamplingAlgorithm, run
from jaxsample.progress import ProgressMeter, TextProgress, TqdmProgress

__version__ = "0.1.0"

__all__ = [
    "ProgressMeter",
    "SamplingAlgorithm",
    "TextProgress",
    "TqdmProgress",
    "run",
]
