"""Samplers for uniform-noise discrete diffusion and flow models.

Three pieces compose (issue 3; SHS, Jang & Han 2026, arXiv:2601.02799):

1. a *model*: any ``denoiser(tokens, signal) -> logits`` over clean tokens, ``(B, L, K)``;
2. a *process*: the stay-vs-replace decomposition of :class:`DTMC` (D3PM/UDLM ancestral),
   :class:`CTMC` (reverse of the uniform forward CTMC, SEDD-uniform) or :class:`Flow` (discrete
   flow matching, uniform source);
3. a *jump rule*: ``"stratified"`` (systematic hazard sampling) or ``"bernoulli"``.

:func:`sample` puts them together; :class:`MarkovChainData` is an exactly solvable data model
with its Bayes-optimal denoiser, for tests and benchmarks.
"""

from jaxsample.discrete.markov import MarkovChainData
from jaxsample.discrete.processes import CTMC, DTMC, Flow
from jaxsample.discrete.sampler import SampleInfo, sample

__all__ = ["CTMC", "DTMC", "Flow", "MarkovChainData", "SampleInfo", "sample"]
