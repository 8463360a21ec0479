"""Diffusion and flow samplers.

- :mod:`jaxsample.diffusion.shs` — systematic (stratified) hazard sampling (SHS) for
  uniform-noise discrete diffusion and flow models:
  ``shs.sample(key, denoiser, ...) -> (tokens, info)``.
- :mod:`jaxsample.diffusion.vmf` — vMF spherical flows for discrete sequences, ODE and
  predictor–corrector samplers: ``vmf.sample(key, posterior_fn, embeddings, path, ...)``.
- :mod:`jaxsample.diffusion.guidance` — guided VP diffusion sampling over any ε-predictor: DDIM /
  DDPM with classifier, TAG (temporal alignment) and DPS-style terms, NDTM control guidance and
  fiber sampling: ``guidance.sample(key, eps_fn, schedule, x_T, *, num_steps, solver=DDIM(eta) |
  DDPM() | NDTM(...), guidance=...) -> (x_0, info)``.

Each method is a module of this package; import it by name (``from jaxsample.diffusion import
shs``).
"""

from jaxsample.diffusion import guidance as guidance
from jaxsample.diffusion import shs as shs
from jaxsample.diffusion import vmf as vmf

__all__ = ["guidance", "shs", "vmf"]
