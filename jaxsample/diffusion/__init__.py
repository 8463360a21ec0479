"""Diffusion and flow samplers.

- :mod:`jaxsample.diffusion.shs` — stratified hazard sampling (SHS) for uniform-noise discrete
  diffusion and flow models: ``shs.sample(key, denoiser, ...) -> (tokens, info)``.

Each method is a module of this package; import it by name (``from jaxsample.diffusion import
shs``).
"""

from jaxsample.diffusion import shs as shs

__all__ = ["shs"]
