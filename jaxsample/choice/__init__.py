"""Discrete-choice samplers: value-priority attribution and alien-space tilted sampling.

* :mod:`jaxsample.choice.pluralism` — conditional-logit (Bradley–Terry) attribution of value
  priorities from recorded choices with Laplace or bootstrap intervals, the choice law and draws
  from it, decision entropy, the distributional-pluralism gap and percentiles within a panel.
* :mod:`jaxsample.choice.alien` — tilted sampling of atom combinations ``∝ p_coh^a · A^{−b}``
  (exact enumeration or sampling-importance-resampling with a Gumbel-top-L proposal),
  reciprocal-rank fusion and the effective vocabulary.

Their planted worlds are :func:`jaxsample.datasets.synthetic_panel` and
:func:`jaxsample.datasets.synthetic_community`.
"""

from jaxsample.choice.alien import RRFInfo as RRFInfo
from jaxsample.choice.alien import TiltedInfo as TiltedInfo
from jaxsample.choice.alien import VocabularyInfo as VocabularyInfo
from jaxsample.choice.alien import effective_vocabulary as effective_vocabulary
from jaxsample.choice.alien import reciprocal_rank_fusion as reciprocal_rank_fusion
from jaxsample.choice.alien import tilted_sample as tilted_sample
from jaxsample.choice.pluralism import ChoiceLawInfo as ChoiceLawInfo
from jaxsample.choice.pluralism import DecisionEntropyInfo as DecisionEntropyInfo
from jaxsample.choice.pluralism import PanelPercentileInfo as PanelPercentileInfo
from jaxsample.choice.pluralism import PluralismGapInfo as PluralismGapInfo
from jaxsample.choice.pluralism import PriorityInfo as PriorityInfo
from jaxsample.choice.pluralism import bootstrap_value_priorities as bootstrap_value_priorities
from jaxsample.choice.pluralism import choice_probabilities as choice_probabilities
from jaxsample.choice.pluralism import decision_entropy as decision_entropy
from jaxsample.choice.pluralism import fit_value_priorities as fit_value_priorities
from jaxsample.choice.pluralism import panel_percentile as panel_percentile
from jaxsample.choice.pluralism import pluralism_gap as pluralism_gap
from jaxsample.choice.pluralism import sample_choices as sample_choices

__all__ = [
    "ChoiceLawInfo",
    "DecisionEntropyInfo",
    "PanelPercentileInfo",
    "PluralismGapInfo",
    "PriorityInfo",
    "RRFInfo",
    "TiltedInfo",
    "VocabularyInfo",
    "bootstrap_value_priorities",
    "choice_probabilities",
    "decision_entropy",
    "effective_vocabulary",
    "fit_value_priorities",
    "panel_percentile",
    "pluralism_gap",
    "reciprocal_rank_fusion",
    "sample_choices",
    "tilted_sample",
]
