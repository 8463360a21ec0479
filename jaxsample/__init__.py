"""jaxsample: sampling methods in JAX.

Pure jitted kernels (:mod:`jaxsample.kernels`) composed into samplers that run unchanged on CPU,
GPU and TPU. Iterative samplers follow one convention (BlackJAX's)::

    alg = jaxsample.etd(logdensity_fn, epsilon=0.1)      # -> SamplingAlgorithm(init, step)
    state = alg.init(positions)
    state, info = alg.step(key, state)
    state, trace = jaxsample.run(key, alg, state, num_steps=500)

One-shot samplers are plain functions ``sample(key, ...) -> (samples, info)`` in their modules:
:mod:`jaxsample.diffusion` (SHS), :mod:`jaxsample.gaussian`, :mod:`jaxsample.softmax`.

Method modules load on first use, so ``import jaxsample`` stays cheap.
"""

import importlib

from jaxsample.core import RunUntilInfo, SamplingAlgorithm, run, run_until
from jaxsample.kernels.solver import RESULTS, SolverStats
from jaxsample.progress import ProgressMeter, TextProgress, TqdmProgress

__version__ = "0.2.0.dev0"

# public name -> (module, attribute or None for the module itself)
_LAZY = {
    "diagnostics": ("jaxsample.diagnostics", None),
    "targets": ("jaxsample.targets", None),
    "sharding": ("jaxsample.sharding", None),
    "diffusion": ("jaxsample.diffusion", None),
    "gaussian": ("jaxsample.gaussian", None),
    "softmax": ("jaxsample.softmax", None),
    "particles": ("jaxsample.particles", None),
    "subset": ("jaxsample.subset", None),
    "risk": ("jaxsample.risk", None),
    "decision": ("jaxsample.decision", None),
    "mcmc": ("jaxsample.mcmc", None),
    "choice": ("jaxsample.choice", None),
    "interop": ("jaxsample.interop", None),
    "etd": ("jaxsample.particles.etd", "etd"),
    "mmsold": ("jaxsample.particles.mmsold", "mmsold"),
}

__all__ = [
    "ProgressMeter",
    "RESULTS",
    "RunUntilInfo",
    "SamplingAlgorithm",
    "SolverStats",
    "TextProgress",
    "TqdmProgress",
    "run",
    "run_until",
    *_LAZY,
]


def __getattr__(name):
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jaxsample' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
