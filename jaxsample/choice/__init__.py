"""Discrete-choice samplers: value-priority attribution and alien-space tilted sampling.

* :mod:`jaxsample.choice.pluralism` — conditional-logit (Bradley–Terry) attribution of value
  priorities from recorded choices with bootstrap intervals, decision entropy, the
  distributional-pluralism gap, percentiles within a panel, and a synthetic panel.
* :mod:`jaxsample.choice.alien` — tilted sampling of atom combinations ``∝ p_coh^a · A^{−b}``
  (exact enumeration or sampling-importance-resampling with a Gumbel-top-L proposal),
  reciprocal-rank fusion, effective vocabulary, and a synthetic community world.
"""

from jaxsample.choice.alien import Community as Community
from jaxsample.choice.alien import TiltedInfo as TiltedInfo
from jaxsample.choice.alien import effective_vocabulary as effective_vocabulary
from jaxsample.choice.alien import reciprocal_rank_fusion as reciprocal_rank_fusion
from jaxsample.choice.alien import set_log_scores as set_log_scores
from jaxsample.choice.alien import synthetic_community as synthetic_community
from jaxsample.choice.alien import tilted_sample as tilted_sample
from jaxsample.choice.pluralism import Panel as Panel
from jaxsample.choice.pluralism import PriorityInfo as PriorityInfo
from jaxsample.choice.pluralism import bootstrap_value_priorities as bootstrap_value_priorities
from jaxsample.choice.pluralism import choice_probabilities as choice_probabilities
from jaxsample.choice.pluralism import decision_entropy as decision_entropy
from jaxsample.choice.pluralism import fit_value_priorities as fit_value_priorities
from jaxsample.choice.pluralism import normalize_priorities as normalize_priorities
from jaxsample.choice.pluralism import panel_percentile as panel_percentile
from jaxsample.choice.pluralism import pluralism_gap as pluralism_gap
from jaxsample.choice.pluralism import sample_choices as sample_choices
from jaxsample.choice.pluralism import synthetic_panel as synthetic_panel

__all__ = [
    "Community",
    "Panel",
    "PriorityInfo",
    "bootstrap_value_priorities",
    "TiltedInfo",
    "choice_probabilities",
    "decision_entropy",
    "effective_vocabulary",
    "fit_value_priorities",
    "normalize_priorities",
    "panel_percentile",
    "pluralism_gap",
    "reciprocal_rank_fusion",
    "sample_choices",
    "set_log_scores",
    "synthetic_community",
    "synthetic_panel",
    "tilted_sample",
]
