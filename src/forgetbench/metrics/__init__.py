"""Metrics: pure functions over per-question arrays. A metric never touches a model.

Per-item functions return one value per question; aggregations are separate functions, so every
reported number can be recomputed from a cached log. One module per family: `tofu`, `rouge`, the
membership attacks (`mia` on one model, `mia_shadow` with shadow models, `mia_roc` the AUC, TPR
at low FPR and PrivLeak that score them), `memorisation`, `lume`, `formats`, `muse`, `gradnorm`
(the gradient-norm attack), `wmdp`, `rwku` (RWKU's probes, fluency and MIA scores) and
`degeneracy` (degenerate generations), each registering its metrics in `METRICS` (`info`) and
its aggregations in `AGGREGATIONS` (`aggregation`); `meta` scores the metrics themselves (the
meta-evaluation) and registers none."""

# Each metric module registers the metrics it defines (`register_metric`) and the aggregations it
# defines (mia_roc: roc_auc, tpr_at_fpr; tofu: ks_pvalue), so importing them all here makes
# `METRICS` and `AGGREGATIONS` whole whichever metrics module is imported first. The order of the
# imports is the order of `METRICS`, so of results.json's `metric_versions` and of the report's
# table of them: TOFU's metrics first, then the MIAs, memorisation, LUME's, the formats', MUSE's,
# the gradient-norm attack, WMDP's, RWKU's and the degenerate generations'.
# isort: off
from forgetbench.metrics import tofu, rouge, mia, mia_roc, mia_shadow, memorisation  # noqa: F401
from forgetbench.metrics import lume, formats, muse, gradnorm, wmdp, rwku  # noqa: F401
from forgetbench.metrics import degeneracy  # noqa: F401

# isort: on
from forgetbench.metrics.aggregation import AGGREGATIONS, aggregate
from forgetbench.metrics.info import METRICS, MetricInfo, register_metric

__all__ = ["AGGREGATIONS", "METRICS", "MetricInfo", "aggregate", "register_metric"]
