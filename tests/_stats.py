"""Statistical helpers shared by the test files."""

import numpy as np
from scipy import stats


def chisquare_pvalue(counts, probs):
    """Pearson's chi-square p-value of ``counts`` against ``probs``.

    Cells with expected count < 5 are pooled into one; the expected counts are rescaled to the
    observed total so that ``probs`` need only sum to 1 up to round-off.
    """
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = probs * counts.sum()
    keep = expected >= 5
    obs, exp = list(counts[keep]), list(expected[keep])
    if expected[~keep].sum() > 0:
        obs.append(counts[~keep].sum())
        exp.append(expected[~keep].sum())
    obs, exp = np.array(obs), np.array(exp)
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
