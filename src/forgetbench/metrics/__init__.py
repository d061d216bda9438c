"""Metrics: pure functions over per-question arrays. A metric never touches a model.

Per-item functions return one value per question; aggregations are separate functions, so every
reported number can be recomputed from a cached log.
"""

# mia and tofu register the two-sample aggregations they define (roc_auc, ks_pvalue), so the
# registry is whole whichever metrics module is imported first.
from forgetbench.metrics import mia, tofu  # noqa: F401
from forgetbench.metrics.aggregation import AGGREGATIONS, aggregate
from forgetbench.metrics.info import METRICS, MetricInfo

__all__ = ["AGGREGATIONS", "METRICS", "MetricInfo", "aggregate"]
