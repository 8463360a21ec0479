"""Diffusion and flow samplers.

- :mod:`jaxsample.diffusion.shs` — stratified hazard sampling (SHS) for uniform-noise discrete
  diffusion and flow models: ``shs.sample(key, denoiser, ...) -> (tokens, info)``.
- :mod:`jaxsample.diffusion.vmf` — vMF spherical flows for discrete sequences, ODE and
  predictor–corrector samplers: ``vmf.sample(key, posterior_fn, embeddings, path, ...)``.

Each method is a module of this package; import it by name (``from jaxsample.diffusion import
shs``).
"""

from jaxsample.diffusion import shs as shs
from jaxsample.diffusion import vmf as vmf

__all__ = ["shs", "vmf"]
