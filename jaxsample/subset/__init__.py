"""Subset selection: diverse subsets, stable coverage, correlated k-subset sampling.

Methods land here as modules (``leverage``, ``coverage``), each re-exported below.
"""

from jaxsample.subset import leverage as leverage
from jaxsample.subset.leverage import LeverageInfo as LeverageInfo
from jaxsample.subset.leverage import ShardedLeverageInfo as ShardedLeverageInfo
from jaxsample.subset.leverage import leverage_select as leverage_select
from jaxsample.subset.leverage import leverage_select_sharded as leverage_select_sharded
from jaxsample.subset.leverage import vendi_score as vendi_score

__all__: list[str] = []
__all__ += ["leverage", "LeverageInfo", "ShardedLeverageInfo", "leverage_select",
            "leverage_select_sharded", "vendi_score"]
