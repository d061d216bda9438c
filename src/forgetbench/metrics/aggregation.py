"""How per-item metric values become the reported number (lm-evaluation-harness's
`register_aggregation`): each metric in `METRICS` names one of these, so a task hands its per-item
values to `aggregate` and never decides the reduction itself.

One-sample aggregations take the per-item values; two-sample ones take two groups: `roc_auc`
(members, non-members: `forgetbench.metrics.mia_roc`) and `ks_pvalue` (the evaluated model's values,
a retain model's: `forgetbench.metrics.tofu`), registered where they are defined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import hmean

from forgetbench.metrics.info import METRICS
from forgetbench.registry import Registry

AGGREGATIONS: Registry[Callable[..., float]] = Registry("aggregation")


@AGGREGATIONS.register("mean")
def mean(values: Sequence[float]) -> float:
    """Arithmetic mean over items: (N,) -> scalar."""
    return float(np.mean(np.asarray(values, dtype=np.float64)))


@AGGREGATIONS.register("harmonic_mean")
def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean (`scipy.stats.hmean`) of non-negative scores, 0 when any of them is 0: one
    score lost entirely cannot be averaged away (TOFU's model utility, LUME's task aggregate)."""
    array = np.asarray(values, dtype=np.float64)
    if np.any(array == 0):
        return 0.0
    return float(hmean(array))


def aggregate(metric: str, *samples: Sequence[Any]) -> float:
    """The reported number of `metric` from its per-item values, by the aggregation `METRICS`
    declares for it (`aggregate("mia/loss", member_scores, nonmember_scores)`)."""
    return AGGREGATIONS.get(METRICS[metric].aggregation)(*samples)
